"""Thin command-line glue: `perfsuite --version`, `perfsuite list` and the subcommands of other modules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import perfsuite
from perfsuite import settings
from perfsuite.matrix.cases import UsageError, build_matrix
from perfsuite.run import devices
from perfsuite.run.runner import case_skip_reason
from perfsuite.workloads import registered_workloads


def _add_matrix_arguments(parser: argparse.ArgumentParser) -> None:
    for key in ("device", "dtype", "model", "batch-size", "mode", "profile"):
        parser.add_argument(f"--{key}", help=f"as pytest's --perf-{key}")


def list_cases(args: argparse.Namespace) -> int:
    """Print the case matrix the options select, one case a line, with the reason where it is skipped."""
    raw = settings.RawSettings(
        device=args.device, dtype=args.dtype, model=args.model, batch_size=args.batch_size, mode=args.mode,
        profile=args.profile,
    )
    workloads = registered_workloads()
    options = settings.matrix_options(raw, list(workloads), devices.available_accelerators() or ["cpu"])
    facts = devices.device_facts()
    for case in build_matrix(options, workloads):
        reason = case_skip_reason(case, facts)
        print(case.benchmark_id if reason is None else f"{case.benchmark_id}  (skipped: {reason})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The `perfsuite` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="perfsuite", description=perfsuite.__doc__)
    parser.add_argument("--version", action="version", version=f"perfsuite {perfsuite.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    list_parser = commands.add_parser("list", help="print the case matrix (ids, and skip reasons)")
    _add_matrix_arguments(list_parser)
    list_parser.set_defaults(run=list_cases)
    _add_command(commands, "doctor", "check this machine's setup for a device; each problem with its fix",
                 "perfsuite.commands.doctor")
    _add_command(commands, "coverage", "ops of each model that would fall back to the CPU on MPS",
                 "perfsuite.commands.coverage")
    _add_command(commands, "gains", "what the article's advice gains here: bf16/fp16, checkpointing, channels_last, "
                 "DataLoader workers", "perfsuite.commands.gains")
    _add_command(commands, "compare", "compare two result sets case by case: time ratio, memory, one-sided rows",
                 "perfsuite.commands.compare")
    _add_command(commands, "selftest", "measure timing accuracy, harness overhead and the gate's false-alarm and "
                 "detection rates; --report renders docs/measurement-quality.md", "perfsuite.commands.selftest")
    return parser


def _add_command(commands, name: str, help_text: str, module_name: str) -> None:
    """A subcommand whose module provides `add_arguments(parser)` and `run(args) -> int`."""
    import importlib

    module = importlib.import_module(module_name)
    parser = commands.add_parser(name, help=help_text, description=module.__doc__)
    module.add_arguments(parser)
    parser.set_defaults(run=module.run)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `perfsuite` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except UsageError as error:
        print(f"perfsuite {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
