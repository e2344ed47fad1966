"""Path options given with a separate value outside the project: pytest would take the value for a test path.

pytest chooses its rootdir before plugins' options are known, reading `--perf-summary-dir /tmp/x` as an unknown
flag and a test path `/tmp/x`: the rootdir then becomes a parent such as /tmp, and [tool.perfsuite], testpaths
and the baseline folder would be silently lost. `--perf-summary-dir=/tmp/x` is read as one argument and is safe, so
the plugin's `pytest_cmdline_main` runs such a session as `pytest.main` of that spelling, in this process and before
anything of the first reading is configured, collected or written (pytest has no hook that runs before it picks its
rootdir, and none that picks it again). Pure functions; the plugin runs the session.
"""

from __future__ import annotations

import os
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


def args_to_run_instead(args: Sequence[str], invocation_dir: Path) -> list[str] | None:
    """pytest's arguments with the path options joined to their values when one, given as a separate value, would
    move the rootdir (pytest took its value for a test path); None when `args` are safe as they are."""
    return joined_path_options(args) if rootdir_moving_paths(args, invocation_dir) else None


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
