"""`perfsuite coverage`: every op each model runs, and whether it would fall back to the CPU on MPS.

Each model is traced on the CPU (with the kernel choices MPS makes) in its modes, every op is looked up in
the MPS support table of the installed torch, and any op that would fall back and that
baselines/mps-fallback-allowlist.json does not allow fails the check. With --runtime, on a Mac, each model
also runs on MPS in a subprocess that reports every op that actually fell back.

Exit status: 0 no fallback outside the allowlist, 1 a fallback found, 2 a usage or setup error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfsuite.coverage.allowlist import DEFAULT_ALLOWLIST, AllowlistError, load_allowlist
from perfsuite.coverage.render import FORMATS, render

MODES = ("infer", "train")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `perfsuite coverage`."""
    parser.add_argument("--model", action="append", metavar="NAME",
                        help="model to check (repeat, or comma-separate); 'all' checks every registered one; default: "
                        "the project's own models when it registers some, else the built-in ones")
    parser.add_argument("--profile", default="smoke", choices=("smoke", "standard", "full"),
                        help="size of the traced models; smoke (default) has the same architecture and ops")
    parser.add_argument("--mode", default="all", choices=("all", *MODES), help="which modes to trace (default all)")
    parser.add_argument("--format", dest="output_format", default="text", choices=FORMATS, help="report format")
    parser.add_argument("--allowlist", type=Path, default=None,
                        help=f"reviewed allowed fallbacks (default {DEFAULT_ALLOWLIST}, if present)")
    parser.add_argument("--runtime", action="store_true",
                        help="also run each model on MPS and report what fell back (on a Mac; skipped elsewhere)")
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"),
                        help="the project whose conftest.py files register its models, as pytest loads them (its "
                        "folder is the root; default ./pyproject.toml)")


def selected_models(requested: list[str] | None, registered: list[str], defaults: list[str]) -> list[str]:
    """The model names `--model` selects: `defaults` when none is named, every registered one in registry order for
    'all'; a ValueError names unknown ones."""
    names = [name.strip() for value in (requested or []) for name in value.split(",") if name.strip()]
    if not names:
        return list(defaults)
    if "all" in names:
        return list(registered)
    unknown = [name for name in names if name not in registered]
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(unknown)}; registered: {', '.join(registered)}")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    """Trace, assess and report the selected models; the exit status as documented above."""
    from perfsuite.coverage.check import runtime_check, static_check
    from perfsuite.options.settings import read_pyproject
    from perfsuite.workloads import default_model_names, registered_workloads
    from perfsuite.workloads.user import load_project_workloads

    try:
        load_project_workloads(args.pyproject, read_pyproject(args.pyproject))
        workloads = registered_workloads()
        models = selected_models(args.model, list(workloads), default_model_names(workloads))
        allowlist = load_allowlist(args.allowlist or DEFAULT_ALLOWLIST, required=args.allowlist is not None)
    except (ValueError, AllowlistError) as error:  # UsageError, from a bad conftest.py or entry point, included
        print(f"perfsuite coverage: {error}", file=sys.stderr)
        return 2
    modes = MODES if args.mode == "all" else (args.mode,)
    reports = []
    for name in models:
        try:
            report = static_check(workloads[name], allowlist, args.profile, modes)
        except Exception as error:  # a model that cannot run on the CPU is a setup problem, reported as such
            print(f"perfsuite coverage: cannot trace model {name} on the CPU ({type(error).__name__}: {error}); "
                  f"fix the workload or leave it out with --model", file=sys.stderr)
            return 2
        if args.runtime:
            report = runtime_check(report, workloads[name], allowlist, args.profile, modes)
        reports.append(report)
    sys.stdout.write(render(reports, allowlist.source, args.output_format))
    return 1 if any(report.failed for report in reports) else 0
