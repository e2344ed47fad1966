"""`perfsuite list`: the case matrix the options select, one case a line, with the reason where one is skipped.

It reads the same settings as pytest (`--device` here over `[tool.perfsuite]` in ./pyproject.toml over defaults) and
knows the same models: the project's conftest.py files are imported as pytest imports them, from the folder of
pyproject.toml.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfsuite.options.settings import OPTION_NAMES, OPTIONS, RawSettings

# The options that choose the cases, and the process count a train-ddp case's skip reason depends on: named as
# pytest's --perf-* options without the prefix, with their declared help.
LIST_OPTIONS = tuple(option for option in OPTIONS if option.fills_matrix) + (OPTION_NAMES["ddp_processes"],)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The matrix options, named as pytest's `--perf-*` options without the prefix."""
    for option in LIST_OPTIONS:
        parser.add_argument(f"--{option.key}", help=option.help)
    parser.add_argument("--pyproject", default="pyproject.toml",
                        help="where [tool.perfsuite] is read from; the conftest.py files that register the project's "
                        "models are loaded from its folder as pytest loads them")


def run(args: argparse.Namespace) -> int:
    """Print the matrix; 0."""
    from perfsuite.matrix.cases import build_matrix, skip_reason
    from perfsuite.options.settings import load_settings, read_pyproject
    from perfsuite.run import devices
    from perfsuite.workloads import model_facts
    from perfsuite.workloads.user import load_project_workloads

    load_project_workloads(Path(args.pyproject), read_pyproject(Path(args.pyproject)))
    cli = RawSettings(**{option.raw_name: getattr(args, option.raw_name) for option in LIST_OPTIONS})
    models = model_facts()
    chosen = load_settings(
        cli, Path(args.pyproject), list(models), devices.available_accelerators() or ["cpu"], flag_prefix="--"
    )
    cases = build_matrix(chosen.matrix, models)
    facts = devices.device_facts(any(case.compile != "eager" for case in cases), chosen.ddp_processes)
    for case in cases:
        reason = skip_reason(case, models[case.model], facts)
        print(case.benchmark_id if reason is None else f"{case.benchmark_id}  (skipped: {reason})")
    return 0
