"""`perfsuite gains RESULTS.json`: what the article's advice gains on this machine, from one run's results.

RESULTS.json is the file a perfsuite benchmark run writes with --benchmark-json (or one pytest-benchmark
saved under .benchmarks/). Five tables: bf16/fp16 against fp32 (beside the article's +30% bf16 training
claim), train-checkpoint against train (memory saved, time paid), channels_last against the default
format, each compile mode (inductor, reduce-overhead, cuda-graph) against eager (speed-up, first-call
seconds, graph breaks, GPU busy), and DataLoader samples/s per storage, pin_memory and num_workers with the
best num_workers. Each table pairs rows of one compile mode only.
Exit status: 0 when the tables were printed, 2 when the file cannot be read (the message says why).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfsuite.analyse.gains import TABLES, GainsError, gains, results_from_document
from perfsuite.errors import BadFileError
from perfsuite.render.gains import FORMATS, render
from perfsuite.store.jsonfile import read_json_file

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
        help="print only this table; repeat for several (default: all five)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the tables `args` ask for; return the exit status."""
    try:
        document = read_json_file(
            Path(args.results), "Pass the JSON a perfsuite benchmark run writes with --benchmark-json."
        )
        result = gains(results_from_document(document, args.results))
    except (GainsError, BadFileError) as error:
        print(f"perfsuite gains: error: {error}", file=sys.stderr)
        return EXIT_CANNOT_READ
    print(render(result, args.format, args.table or TABLES), end="")
    return 0
