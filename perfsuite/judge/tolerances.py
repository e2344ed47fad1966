"""Bands: the smallest change that matters, as a fraction (0.10 is 10%), and which one applies to a case."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from perfsuite.errors import UsageError

DEFAULT_TOLERANCE = 0.10
DEFAULT_MEMORY_TOLERANCE = 0.10


def check_tolerance(tolerance: float, what: str) -> None:
    """Raise ValueError unless `tolerance` is a fraction in [0, 1): 0.10 means a 10% band."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(f"{what} must be a fraction in [0, 1), e.g. 0.10 for a 10% band; got {tolerance!r}")


def parse_tolerance(raw: Any, where: str) -> float:
    """A band from text or a number: `0.15`, or `15%` for the same; raises UsageError naming `where`."""
    text = str(raw).strip() if isinstance(raw, str) else None
    try:
        if text is not None and text.endswith("%"):
            value = float(text[:-1]) / 100
        elif text is not None:
            value = float(text)
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            value = float(raw)
        else:
            raise ValueError
        check_tolerance(value, where)
    except ValueError:
        raise UsageError(f"{where}: {raw!r} is not a band; write a fraction in [0, 1) such as 0.10 (or 10%)") from None
    return value


def parse_tolerance_table(table: Mapping[str, Any], where: str) -> dict[str, float]:
    """Validate a tolerance table such as `[tool.perfsuite.tolerance]`: keys are "default", a model name or a
    benchmark id; values bands as `parse_tolerance` reads them."""
    if not isinstance(table, Mapping):
        raise UsageError(f"{where} must be a table of name = fraction, e.g. resnet18 = 0.15; got {table!r}")
    return {str(key): parse_tolerance(value, f"{where} {key!r}") for key, value in table.items()}


def tolerance_for(
    benchmark_id: str,
    model: str,
    overrides: Mapping[str, float],
    default: float = DEFAULT_TOLERANCE,
    cli_override: float | None = None,
) -> float:
    """The band that applies to one benchmark: the command-line value, else the benchmark id's entry in
    `overrides`, else the model's entry, else `overrides["default"]`, else `default`."""
    if cli_override is not None:
        chosen = cli_override
    elif benchmark_id in overrides:
        chosen = overrides[benchmark_id]
    elif model in overrides:
        chosen = overrides[model]
    else:
        chosen = overrides.get("default", default)
    check_tolerance(chosen, f"{benchmark_id}: tolerance")
    return chosen


def unknown_tolerance_keys(
    overrides: Mapping[str, float], benchmark_ids: Iterable[str], models: Iterable[str]
) -> list[str]:
    """Keys of `overrides` that name no known benchmark id or model (and are not "default"): likely typos."""
    known = {"default", *benchmark_ids, *models}
    return sorted(key for key in overrides if key not in known)
