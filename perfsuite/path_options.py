"""Path options given with a separate value outside the project: pytest would take the value for a test path.

pytest chooses its rootdir before plugins' options are known, reading `--perf-summary-dir /tmp/x` as an unknown
flag and a test path `/tmp/x`: the rootdir then becomes a parent such as /tmp, and [tool.perfsuite], testpaths
and the baseline folder would be silently lost. `--perf-summary-dir=/tmp/x` is read as one argument and is safe, so
such a command line is run again in that spelling. Pure functions; the plugin does the relaunch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from perfsuite.errors import UsageError

PATH_OPTIONS = ("--perf-baseline-dir", "--perf-summary-dir", "--perf-ab-python")


def rootdir_moving_paths(args: Sequence[str], invocation_dir: Path) -> list[tuple[str, str]]:
    """The path options given with their value as a separate argument whose value lies outside `invocation_dir`."""
    moving = []
    for option, value in zip(args, args[1:], strict=False):
        if option in PATH_OPTIONS and not value.startswith("-"):
            resolved = (invocation_dir / value).resolve()
            if not resolved.is_relative_to(invocation_dir.resolve()):
                moving.append((option, value))
    return moving


def joined_path_options(args: Sequence[str]) -> list[str]:
    """`args` with every path option and its separate value written as one `--option=value` argument."""
    joined: list[str] = []
    index = 0
    while index < len(args):
        if args[index] in PATH_OPTIONS and index + 1 < len(args) and not args[index + 1].startswith("-"):
            joined.append(f"{args[index]}={args[index + 1]}")
            index += 2
        else:
            joined.append(args[index])
            index += 1
    return joined


def relaunch_command(original_argv: Sequence[str], args: Sequence[str]) -> list[str] | None:
    """The command line that runs this pytest again with the path options joined to their values, or None when
    pytest's arguments are not the end of the interpreter's command line (pytest.main called from a program)."""
    if not args or list(original_argv[-len(args):]) != list(args):
        return None
    return [*original_argv[: -len(args)], *joined_path_options(args)]


def refusal(moving: Sequence[tuple[str, str]], rootdir: Path) -> str:
    """Why a command line whose path options move the rootdir is refused, and the spelling to use instead."""
    given = " ".join(f"{option} {value}" for option, value in moving)
    written = " ".join(f"{option}={value}" for option, value in moving)
    return (
        f"{given}: pytest takes a separate value outside this folder for a test path when it picks its rootdir "
        f"(it picked {rootdir}), which loses [tool.perfsuite] and the baselines; write {written}"
    )


def relaunch_if_rootdir_moves(args: Sequence[str], invocation_dir: Path, rootdir: Path) -> None:
    """Run this pytest again with the path options joined to their values when one would move the rootdir, before
    anything was collected or written, so both spellings behave alike; called as pytest.main(...) from a program,
    where the command line is not pytest's to repeat, raise UsageError naming the safe spelling instead."""
    moving = rootdir_moving_paths(args, invocation_dir)
    if not moving:
        return
    command = relaunch_command(sys.orig_argv, args)
    if command is None:
        raise UsageError(refusal(moving, rootdir))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)


def make_benchmark_json_folder(path: Path | IO[bytes] | None) -> None:
    """pytest-benchmark 5.3 and later write --benchmark-json only as the session ends, into a folder that must exist:
    made now, or a UsageError before anything is measured (else the run's tables were lost to its traceback). Earlier
    releases open the file as they parse the option (`path` is then that open file), so its folder exists."""
    if path is None or not isinstance(path, (str, os.PathLike)):
        return
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(
            f"--benchmark-json {path}: its folder cannot be made ({error.strerror or error}); name a writable path"
        ) from None
