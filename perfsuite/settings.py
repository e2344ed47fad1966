"""The user's choices, read once: command-line options over `[tool.perfsuite]` in pyproject.toml over defaults.

`load_settings` turns both sources into one validated `Settings` value that the pytest plugin, `perfsuite
list` and the other commands share. A bad value raises UsageError naming where it came from: the `--perf-*`
flag, or pyproject.toml and its key. Nothing here imports torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from perfsuite.errors import BadFileError, UsageError
from perfsuite.judge.tolerances import parse_tolerance, parse_tolerance_table
from perfsuite.matrix.axes import (
    ACCELERATOR_DEFAULT_PROFILE,
    ALL_MODES,
    COMPILE_MODES,
    CPU_DEFAULT_PROFILE,
    DATALOADER_MODEL,
    DEFAULT_COMPILE_MODES,
    DEFAULT_DTYPES,
    DEVICES,
    DTYPES,
    MODES,
    PROFILES,
)
from perfsuite.matrix.cases import MatrixOptions, parse_batch_sizes, parse_names
from perfsuite.store.baselines import MAX_MACHINE_NAME_BYTES
from perfsuite.store.files import read_text_capped, special_file_kind

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DEFAULT_WARMUP_STEPS = 3
# Bounds that catch a typo (an extra zero or three) before hours of measuring: each process is a fresh Python
# that imports torch, and each warm-up step is a full training step.
MAX_PROCESSES = 1000
MAX_WARMUP_STEPS = 100_000
MAX_PYPROJECT_BYTES = 16 * 2**20  # a pyproject.toml is a few kB; more is a wrong file
DEFAULT_BASELINE_DIR = "baselines"
DEFAULT_SUMMARY_DIR = ".perfsuite"

_Default = TypeVar("_Default", int, None)


@dataclass(frozen=True)
class RawSettings:
    """Option values as given (text, TOML numbers or lists), before validation; None means not given.

    The field names are the option names with `_` for `-`: `--perf-batch-size` / `batch-size` is `batch_size`.
    """

    device: Any = None
    dtype: Any = None
    model: Any = None
    batch_size: Any = None
    mode: Any = None
    profile: Any = None
    compile: Any = None
    warmup: Any = None
    processes: Any = None
    threads: Any = None
    ddp_processes: Any = None
    machine: Any = None
    baseline_dir: Any = None
    summary_dir: Any = None
    tolerance: Any = None
    memory_tolerance: Any = None


# Keys of [tool.perfsuite] that are tables rather than single values.
TABLE_KEYS = ("tolerance", "memory_tolerance")
SETTING_KEYS = tuple(f.name.replace("_", "-") for f in fields(RawSettings) if f.name not in TABLE_KEYS)


@dataclass(frozen=True)
class Settings:
    """Every choice of a session, validated. Paths are as given (relative to the project root unless absolute).

    `processes` is how many fresh processes measure each case (1: in the pytest process); `threads` torch's
    CPU threads in each (None: torch's default); `ddp_processes` the processes of a train-ddp step (None:
    one per CUDA GPU, 2 on the CPU); `machine` names this machine's baseline files instead of the hardware.
    Tolerances: the command-line band for every case, else the per-id/per-model tables. `profile_chosen` says
    whether the profile was given (else it follows the devices: `default_profile`).
    """

    matrix: MatrixOptions
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    processes: int = 1
    threads: int | None = None
    ddp_processes: int | None = None
    machine: str | None = None
    baseline_dir: str = DEFAULT_BASELINE_DIR
    summary_dir: str = DEFAULT_SUMMARY_DIR
    cli_tolerance: float | None = None
    cli_memory_tolerance: float | None = None
    tolerances: Mapping[str, float] = field(default_factory=dict)
    memory_tolerances: Mapping[str, float] = field(default_factory=dict)
    profile_chosen: bool = False


def read_pyproject(pyproject: Path) -> dict[str, Any]:
    """The TOML document of `pyproject`, or {} when it does not exist. A file that cannot be used (not a regular
    file, over MAX_PYPROJECT_BYTES, not UTF-8, not TOML) is a UsageError naming it."""
    remedy = "Fix the file, or run from a folder without it"
    try:
        text = read_text_capped(pyproject, MAX_PYPROJECT_BYTES, remedy, missing_ok=True)
    except BadFileError as error:
        raise UsageError(str(error)) from None
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{pyproject}: not valid TOML ({error}); fix the file") from None


def read_pyproject_table(pyproject: Path) -> dict[str, Any]:
    """The `[tool.perfsuite]` table of `pyproject`, or {} when the file or table is absent."""
    table = read_pyproject(pyproject).get("tool", {}).get("perfsuite", {})
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.perfsuite] must be a table")
    return table


def merge_settings(
    cli: RawSettings, table: Mapping[str, Any], source: str, flag_prefix: str = "--perf-"
) -> tuple[RawSettings, dict[str, str]]:
    """Command-line values where given, else the pyproject values; returns them and, per field, where each
    value came from (`<flag_prefix><key>` or `<source> [tool.perfsuite] <key>`) for error messages.

    Unknown keys and sub-tables are an error: a misspelt key would otherwise change nothing, silently.
    """
    known = set(SETTING_KEYS) | set(TABLE_KEYS)
    unknown = sorted(k for k in table if k not in known)
    if unknown:
        raise UsageError(
            f"{source} [tool.perfsuite]: unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
        )
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for item in fields(RawSettings):
        key = item.name if item.name in TABLE_KEYS else item.name.replace("_", "-")
        given = getattr(cli, item.name)
        if given is not None:
            values[item.name], origins[item.name] = given, f"{flag_prefix}{item.name.replace('_', '-')}"
        elif key in table:
            values[item.name], origins[item.name] = table[key], f"{source} [tool.perfsuite] {key}"
    return RawSettings(**values), origins


def load_settings(
    cli: RawSettings,
    pyproject: Path,
    workload_names: Sequence[str],
    available_devices: Sequence[str],
    flag_prefix: str = "--perf-",
) -> Settings:
    """The session's validated settings from the command line and `pyproject`'s [tool.perfsuite];
    `flag_prefix` is how the command line spells the options (`--perf-` in pytest, `--` in `perfsuite list`)."""
    raw, origins = merge_settings(cli, read_pyproject_table(pyproject), str(pyproject), flag_prefix)
    return validate_settings(raw, origins, workload_names, available_devices, project_root=pyproject.parent)


def validate_settings(
    raw: RawSettings,
    origins: Mapping[str, str],
    workload_names: Sequence[str],
    available_devices: Sequence[str],
    project_root: Path = Path("."),
) -> Settings:
    """Validate merged raw values; `origins` names where each came from in errors. Relative paths are checked
    against `project_root` (where the session writes them), so nothing is measured before a bad one is found."""

    def where(name: str) -> str:
        return origins.get(name, f"--perf-{name.replace('_', '-')}")

    devices = parse_names(raw.device, DEVICES, where("device")) if raw.device is not None else list(available_devices)
    valid_models = ["all", *workload_names, DATALOADER_MODEL]
    models = parse_names(raw.model, valid_models, where("model")) if raw.model is not None else None
    matrix = MatrixOptions(
        devices=devices,
        dtypes=parse_names(raw.dtype, DTYPES, where("dtype")) if raw.dtype is not None else DEFAULT_DTYPES,
        models=None if models is None else [*workload_names, DATALOADER_MODEL] if "all" in models else models,
        batch_sizes=parse_batch_sizes(raw.batch_size, where("batch_size")) if raw.batch_size is not None else None,
        modes=parse_names(raw.mode, ALL_MODES, where("mode")) if raw.mode is not None else MODES,
        profile=(
            _one_name(raw.profile, PROFILES, where("profile")) if raw.profile is not None else default_profile(devices)
        ),
        compile_modes=(
            parse_names(raw.compile, COMPILE_MODES, where("compile")) if raw.compile is not None
            else DEFAULT_COMPILE_MODES
        ),
    )
    return Settings(
        matrix=matrix,
        warmup_steps=_count(
            raw.warmup, where("warmup"), minimum=0, default=DEFAULT_WARMUP_STEPS, maximum=MAX_WARMUP_STEPS
        ),
        processes=_count(raw.processes, where("processes"), minimum=1, default=1, maximum=MAX_PROCESSES),
        threads=_count(raw.threads, where("threads"), minimum=1, default=None),
        ddp_processes=_count(raw.ddp_processes, where("ddp_processes"), minimum=1, default=None),
        machine=_machine_name(raw.machine, where("machine")),
        baseline_dir=_path_text(raw.baseline_dir, where("baseline_dir"), DEFAULT_BASELINE_DIR),
        summary_dir=_writable_folder(
            _path_text(raw.summary_dir, where("summary_dir"), DEFAULT_SUMMARY_DIR), where("summary_dir"), project_root,
            chosen=raw.summary_dir is not None,
        ),
        cli_tolerance=_cli_tolerance(raw.tolerance, where("tolerance")),
        cli_memory_tolerance=_cli_tolerance(raw.memory_tolerance, where("memory_tolerance")),
        tolerances=_tolerance_table(raw.tolerance, where("tolerance")),
        memory_tolerances=_tolerance_table(raw.memory_tolerance, where("memory_tolerance")),
        profile_chosen=raw.profile is not None,
    )


def default_profile(devices: Sequence[str]) -> str:
    """The profile when none is chosen: standard where an accelerator is among `devices`, smoke on the CPU alone."""
    return ACCELERATOR_DEFAULT_PROFILE if any(d != "cpu" for d in devices) else CPU_DEFAULT_PROFILE


def _one_name(raw: Any, valid: Sequence[str], where: str) -> str:
    names = parse_names(raw, valid, where)
    if len(names) != 1:
        raise UsageError(f"{where}: one value, please (got {', '.join(names)}); valid: {', '.join(valid)}")
    return names[0]


def _count(raw: Any, where: str, minimum: int, default: _Default, maximum: int | None = None) -> int | _Default:
    """A whole number in [`minimum`, `maximum`] from text or a TOML integer; `default` when not given."""
    if raw is None:
        return default
    if isinstance(raw, bool) or isinstance(raw, float) or not isinstance(raw, (int, str)):
        raise UsageError(f"{where}: {raw!r} is not a whole number; write e.g. {max(minimum, 3)}")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise UsageError(f"{where}: {raw!r} is not a whole number; write e.g. {max(minimum, 3)}") from None
    if value < minimum:
        raise UsageError(f"{where}: {value} is too small; it must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{where}: {value} is too large; it must be at most {maximum}")
    return value


def _machine_name(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    text = str(raw).strip() if isinstance(raw, str) else ""
    if not text or not all(c.isalnum() or c in "-_." for c in text) or text.startswith("."):
        raise UsageError(
            f"{where}: {raw!r} is not a machine name; use letters, digits, '-', '_' and '.', e.g. ci-m2-max"
        )
    size_bytes = len(text.encode("utf-8"))
    if size_bytes > MAX_MACHINE_NAME_BYTES:
        raise UsageError(
            f"{where}: a name of {size_bytes} bytes is too long for a file name; use at most {MAX_MACHINE_NAME_BYTES} "
            "bytes (the baseline file and the files perfsuite makes beside it must fit in 255)"
        )
    return text


def _path_text(raw: Any, where: str, default: str) -> str:
    if raw is None:
        return default
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError(f"{where}: {raw!r} is not a path")
    return raw.strip()


def _writable_folder(text: str, where: str, project_root: Path, chosen: bool) -> str:
    """`text` when it names a folder perfsuite can write files into, or one it can make (not made here). Where the
    folder was not `chosen` (the default), only a file in its place is an error: a session that measures nothing
    writes no summary, and a read-only checkout must still run its tests."""
    folder = project_root / text
    if not chosen:
        problem = _folder_problem(folder) if os.path.lexists(folder) and not folder.is_dir() else None
    elif os.path.lexists(folder):
        problem = _folder_problem(folder)
    else:
        ancestor = folder.parent
        while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        problem = _folder_problem(ancestor)
        problem = None if problem is None else f"cannot be made: {ancestor} {problem}"
    if problem is not None:
        raise UsageError(f"{where}: {text!r} {problem}; name a folder perfsuite can write into, or clear the way")
    return text


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be written into the existing path `folder`, or None."""
    try:
        mode = os.stat(folder).st_mode
    except OSError as error:  # a symlink to nowhere, or one in a loop
        return f"cannot be used ({error.strerror})"
    kind = special_file_kind(mode)
    if kind != "a folder":
        return f"is {kind or 'a file'}, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "is a folder that is not writable"
    return None


def _cli_tolerance(raw: Any, where: str) -> float | None:
    """A band given as one number (the command line's form); a table is read by `_tolerance_table`."""
    if raw is None or isinstance(raw, Mapping):
        return None
    return parse_tolerance(raw, where)


def _tolerance_table(raw: Any, where: str) -> dict[str, float]:
    if raw is None or not isinstance(raw, Mapping):
        return {}
    return parse_tolerance_table(raw, where)
