"""Thin command-line glue: `perfsuite --version` and the subcommands, each a module of perfsuite.commands.

Subcommand modules are imported only when their command runs, so `perfsuite --version` and the commands that
need no torch (compare, gains, doctor) start without importing it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import perfsuite
from perfsuite.errors import BadFileError, UsageError
from perfsuite.render.escape import terminal_text

COMMANDS = {
    "list": "print the case matrix (ids, and skip reasons)",
    "doctor": "check this machine's setup for a device; each problem with its fix",
    "coverage": "ops of each model that would fall back to the CPU on MPS",
    "gains": "what the article's advice gains here: bf16/fp16, checkpointing, channels_last, DataLoader workers",
    "compare": "compare two result sets case by case: time ratio, memory, one-sided rows",
    "bisect": "find the commit (or torch release, --pythons) that made cases slower, an A/B judgement at each step",
    "selftest": "measure timing accuracy, harness overhead and the gate's false-alarm and detection rates; "
    "--report renders docs/measurement-quality.md",
    "site": "a static site of every case's runs over time, the comparison with CUDA and A/B results",
    "init-ci": "write a GitHub Actions workflow that gates your repository on self-hosted Macs",
    "ci": "a step of that workflow: judge, checkout-history, record, publish, site",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `perfsuite` argument parser; the arguments of `command` are added when it is given."""
    parser = argparse.ArgumentParser(prog="perfsuite", description=perfsuite.__doc__)
    parser.add_argument("--version", action="version", version=f"perfsuite {perfsuite.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        subparser = commands.add_parser(name, help=help_text)
        if name == command:
            module = importlib.import_module(f"perfsuite.commands.{name.replace('-', '_')}")
            subparser.description = module.__doc__
            module.add_arguments(subparser)
            subparser.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `perfsuite` console script; returns the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    # Arguments after `--` go to the pytest a command runs (`perfsuite ci judge -- --perf-device mps`).
    passthrough = arguments[arguments.index("--") + 1:] if "--" in arguments else []
    arguments = arguments[: arguments.index("--")] if "--" in arguments else arguments
    parser = build_parser(command)
    args = parser.parse_args(arguments)
    if passthrough and not hasattr(args, "pytest_args"):
        parser.error(f"perfsuite {args.command or ''} takes no arguments after --")
    if passthrough:
        args.pytest_args = passthrough
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except (UsageError, BadFileError) as error:
        print(f"perfsuite {args.command}: {terminal_text(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
