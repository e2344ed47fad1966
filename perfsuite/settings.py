"""The user's choices, from command-line options over `[tool.perfsuite]` in pyproject.toml over defaults."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.matrix.cases import DEFAULT_DTYPES, DTYPES, MatrixOptions, UsageError, parse_batch_sizes, parse_names
from perfsuite.run.devices import DEVICES
from perfsuite.workloads import ALL_MODES, MODES, PROFILES

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# Option name (without --perf-) -> key in [tool.perfsuite].
SETTING_KEYS = ("device", "dtype", "model", "batch-size", "mode", "profile", "warmup")


@dataclass(frozen=True)
class RawSettings:
    """Option values as strings or lists, before validation; None means not given."""

    device: Any = None
    dtype: Any = None
    model: Any = None
    batch_size: Any = None
    mode: Any = None
    profile: Any = None
    warmup: Any = None


def read_pyproject_settings(pyproject: Path) -> dict[str, Any]:
    """The `[tool.perfsuite]` table of `pyproject`, or {} when the file or table is absent."""
    if not pyproject.is_file():
        return {}
    try:
        document = tomllib.loads(pyproject.read_text())
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{pyproject}: not valid TOML ({error}); fix the file or remove [tool.perfsuite]") from None
    table = document.get("tool", {}).get("perfsuite", {})
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.perfsuite] must be a table")
    return table


def merge_settings(cli: RawSettings, pyproject_table: Mapping[str, Any], source: str) -> RawSettings:
    """Command-line values where given, else the pyproject values; unknown pyproject keys are an error."""
    known = set(SETTING_KEYS) | {"tolerance", "memory_tolerance", "baseline-dir"}
    unknown = sorted(k for k in pyproject_table if k not in known and not isinstance(pyproject_table[k], dict))
    if unknown:
        raise UsageError(
            f"{source} [tool.perfsuite]: unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
        )
    values = {}
    for key in SETTING_KEYS:
        attribute = key.replace("-", "_")
        given = getattr(cli, attribute)
        values[attribute] = given if given is not None else pyproject_table.get(key)
    return RawSettings(**values)


def matrix_options(raw: RawSettings, workload_names: list[str], available_devices: list[str]) -> MatrixOptions:
    """Validate the raw settings into MatrixOptions; bad values raise UsageError listing the valid ones."""
    devices = parse_names(raw.device, DEVICES, "--perf-device") if raw.device else available_devices
    models = parse_names(raw.model, ["all", *workload_names], "--perf-model") if raw.model else None
    return MatrixOptions(
        devices=devices,
        dtypes=parse_names(raw.dtype, DTYPES, "--perf-dtype") if raw.dtype else DEFAULT_DTYPES,
        models=None if models is None or "all" in models else models,
        batch_sizes=parse_batch_sizes(raw.batch_size) if raw.batch_size else None,
        modes=parse_names(raw.mode, ALL_MODES, "--perf-mode") if raw.mode else MODES,
        profile=parse_names(raw.profile, PROFILES, "--perf-profile")[0] if raw.profile else "standard",
    )


def warmup_steps(raw: RawSettings, default: int) -> int:
    """Warm-up steps before timing; a non-negative integer."""
    if raw.warmup is None:
        return default
    try:
        value = int(raw.warmup)
    except (TypeError, ValueError):
        value = -1
    if value < 0:
        raise UsageError(f"--perf-warmup: {raw.warmup!r} is not a non-negative integer")
    return value
