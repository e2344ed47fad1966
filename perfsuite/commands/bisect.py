"""`perfsuite bisect --good REV --bad REV [-- PYTEST_ARGS]`: the commit that made a case slower, found with an A/B
judgement at every step, or, with `--pythons PY1 PY2 ...`, the first of several environments (successive torch
releases, oldest first) where the slowdown appears.

The first judgement is bad against good: when it does not read regressed, the bisect stops and says so with the
floor it could see. Then each midpoint is judged against good: regressed, unchanged, or undecided (judged again with
twice the budget, then skipped for a neighbour); a commit that does not build or import is skipped and named. The
first bad commit is judged against its parent, and bad against it: a range with another change is searched again,
so several slowdowns are each named, and a slowdown that builds up over commits is reported as gradual.

Cases: those pytest's options after `--` select (e.g. `-- --perf-model resnet18 --perf-mode infer`), else those
that regressed in the last A/B job (.perfsuite/ab.json). Written to .perfsuite/bisect/ (--output-dir): bisect.log
(each step and pytest's output), bisect.json (the record), bisect.md, and each step's ab.json and ab.md.
Exit status: 0 when a change was named, 1 when the slowdown does not reproduce or could not be judged, 2 for a usage
error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from perfsuite.errors import UsageError
from perfsuite.options.settings import AB_DEFAULT_BUDGET_S
from perfsuite.render import bisect as render
from perfsuite.session.bisect import (
    DEFAULT_FOLDER,
    BisectPlan,
    commit_positions,
    python_positions,
    run_bisect,
    tracked_cases,
    write_record,
)
from perfsuite.store.files import write_text_atomically

EXIT_NOT_FOUND = 1


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite bisect`'s arguments to `parser`."""
    parser.add_argument("--good", metavar="REV", help="a commit where the cases were fast (older)")
    parser.add_argument("--bad", metavar="REV", help="a commit where they are slow (newer; default: HEAD)")
    parser.add_argument("--pythons", nargs="+", metavar="PY", help=(
        "instead of commits: the interpreters of environments holding successive torch releases, oldest first; "
        "the first release where the slowdown appears is named (each but the first needs perfsuite installed)"))
    parser.add_argument("--ab-budget", type=_seconds, default=AB_DEFAULT_BUDGET_S, metavar="SECONDS",
                        help="seconds each A/B judgement may spend measuring; an undecided one is judged again with "
                             "twice as much (default: %(default)g)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_FOLDER,
                        help="where the log, the record and each step's A/B summary go (default: %(default)s)")
    parser.add_argument("--project", type=Path, default=Path("."), help="the project's root (default: here)")
    parser.set_defaults(pytest_args=[])


def run(args: argparse.Namespace) -> int:
    """Run the bisect; print each step and the finding; return the exit status."""
    root = args.project.resolve()
    if args.pythons and (args.good or args.bad):
        raise UsageError("--pythons bisects environments on this working tree: leave --good and --bad out")
    if not args.pythons and not args.good:
        raise UsageError("give --good REV (a commit where the cases were fast) and --bad REV, or --pythons PY1 PY2 ...")
    positions = python_positions(args.pythons) if args.pythons else commit_positions(root, args.good,
                                                                                      args.bad or "HEAD")
    tracked, pytest_args = tracked_cases(root, args.pytest_args)
    folder = args.output_dir if args.output_dir.is_absolute() else root / args.output_dir
    plan = BisectPlan(positions, root, tracked, tuple(pytest_args), args.ab_budget, folder)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    finding, steps = run_bisect(plan, lambda line: print(line, flush=True))
    record = write_record(plan, finding, steps, started_at)
    summary = write_text_atomically(folder / render.SUMMARY_FILE, render.bisect_markdown(finding, steps, positions))
    print(render.finding_text(finding, steps, positions), end="")
    print(f"perfsuite bisect: wrote {record}, {summary} and {folder / render.LOG_FILE}")
    return 0 if finding.changes else EXIT_NOT_FOUND
