"""`perfsuite site [HISTORY...] -o DIR`: a static site of every case's runs over time.

HISTORY is a baseline folder (default: baselines/, with its archive/ and reference/ when present), a baseline
file, an archive folder or file, or a file of published figures. The site shows one row per case and machine with
its last time, trend, floor and verdict; a page per case with every run, torch upgrades, rebaselines,
regressions and improvements marked; the comparison of non-CUDA machines with the CUDA baselines and the
published figures; the A/B results given with --ab; and, on each case's page, what the bisects given with --bisect
found. The folder needs no server and no network: open
DIR/index.html, or publish the folder as it is. Bad files are named on the pages (and here), never fatal.
Exit status: 0 when built, 2 when nothing could be read or the output folder cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfsuite.errors import UsageError
from perfsuite.render.escape import terminal_text
from perfsuite.site.build import build_site

DEFAULT_HISTORY = "baselines"
DEFAULT_OUTPUT_DIR = "out/site"
EXIT_CANNOT_BUILD = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite site`'s arguments to `parser`."""
    parser.add_argument(
        "history", nargs="*", metavar="HISTORY",
        help=f"baseline folders or files, archive folders or files (default: {DEFAULT_HISTORY})",
    )
    parser.add_argument(
        "-o", "--output-dir", default=DEFAULT_OUTPUT_DIR,
        help="the folder to write the site into; replaced when perfsuite built it before (default: %(default)s)",
    )
    parser.add_argument(
        "--ab", nargs="+", default=[], metavar="FILE", action="extend",
        help="A/B summary files (schema perfsuite-ab) to show on their own page",
    )
    parser.add_argument(
        "--bisect", nargs="+", default=[], metavar="FILE", action="extend",
        help="bisect records (bisect.json of `perfsuite bisect`) to mark on the pages of the cases they followed",
    )


def run(args: argparse.Namespace) -> int:
    """Build the site; print where it is and every problem found; return the exit status."""
    inputs = [Path(h) for h in (args.history or [DEFAULT_HISTORY])]
    missing = [str(p) for p in [*inputs, *map(Path, args.ab), *map(Path, args.bisect)] if not p.exists()]
    if missing:
        raise UsageError(
            f"no such file or folder: {', '.join(missing)}; pass baseline folders or files (e.g. baselines/), "
            "archive folders, A/B summary files after --ab and bisect records after --bisect"
        )
    try:
        report = build_site(inputs, Path(args.output_dir), [Path(p) for p in args.ab],
                            bisect_files=[Path(p) for p in args.bisect])
    except OSError as error:
        print(
            f"perfsuite site: error: cannot write the site to {args.output_dir} ({error.strerror or error}); pick "
            "another folder with -o",
            file=sys.stderr,
        )
        return EXIT_CANNOT_BUILD
    for problem in report.problems:
        print(f"perfsuite site: problem: {terminal_text(problem)}", file=sys.stderr)
    if report.plot_note:
        print(f"perfsuite site: note: no plots: {terminal_text(report.plot_note)}", file=sys.stderr)
    if report.cases == 0 and not report.problems:
        print(
            f"perfsuite site: error: no case history in {', '.join(map(str, inputs))}: a baseline folder holds "
            "<device>/<machine>.json files and archive/; record some with "
            "`pytest --benchmark-only --perf-update-baseline`",
            file=sys.stderr,
        )
        return EXIT_CANNOT_BUILD
    problems = f"; {len(report.problems)} problem(s), named on the pages" if report.problems else ""
    print(f"wrote {report.output_dir / 'index.html'}: {report.cases} cases{problems}")
    return 0
