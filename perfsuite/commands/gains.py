"""`perfsuite gains RESULTS.json`: what the article's advice gains on this machine, from one run's results.

RESULTS.json is the file a perfsuite benchmark run writes with --benchmark-json (or one pytest-benchmark
saved under .benchmarks/). Four tables: bf16/fp16 against fp32 (beside the article's +30% bf16 training
claim), train-checkpoint against train (memory saved, time paid), channels_last against the default
format, and DataLoader samples/s per storage, pin_memory and num_workers with the best num_workers.
Exit status: 0 when the tables were printed, 2 when the file cannot be read (the message says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfsuite.analyse.gains import FORMATS, TABLES, GainsError, gains, render, results_from_document

EXIT_CANNOT_READ = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite gains`' arguments to `parser`."""
    parser.add_argument("results", metavar="RESULTS.json", help="a perfsuite run's --benchmark-json file")
    parser.add_argument(
        "--format", choices=FORMATS, default="text",
        help="text for the terminal, md (markdown), or csv in the code's units: seconds, bytes, ratios "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--table", choices=TABLES, action="append",
        help="print only this table; repeat for several (default: all four)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the tables `args` ask for; return the exit status."""
    try:
        document = _read_json(Path(args.results))
        result = gains(results_from_document(document, args.results))
    except GainsError as error:
        print(f"perfsuite gains: error: {error}", file=sys.stderr)
        return EXIT_CANNOT_READ
    print(render(result, args.format, args.table or TABLES), end="")
    return 0


def _read_json(path: Path) -> object:
    what_to_pass = "pass the JSON a perfsuite benchmark run writes with --benchmark-json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GainsError(f"{path}: no such file; {what_to_pass}") from None
    except UnicodeDecodeError:
        raise GainsError(f"{path}: not a UTF-8 text file, so not a results file; {what_to_pass}") from None
    except OSError as error:
        raise GainsError(f"{path}: cannot read it ({error.strerror}); check the path and its permissions") from None
    if not text.strip():
        raise GainsError(f"{path}: the file is empty; {what_to_pass}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise GainsError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}); {what_to_pass}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    """Run `perfsuite gains` with `argv` (default: the process arguments)."""
    parser = argparse.ArgumentParser(prog="perfsuite gains", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
