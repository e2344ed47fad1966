"""The reviewed allowlist of CPU fallbacks (baselines/mps-fallback-allowlist.json) and the check against it.

A model passes its coverage check when every op that would fall back to the CPU on MPS is allowed for
it, each allowance with a reason a reviewer accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from perfsuite.coverage.assess import ModelCoverage, OpUsage
from perfsuite.errors import BadFileError
from perfsuite.store.jsonfile import read_json_file

DEFAULT_ALLOWLIST = Path("baselines") / "mps-fallback-allowlist.json"
SCHEMA_VERSION = 1
ANY_MODEL = "*"


@dataclass(frozen=True)
class AllowedFallback:
    """`op` ('aten::name.overload', as the coverage report names it) may fall back in `models` ('*': any)."""

    op: str
    models: tuple[str, ...]
    reason: str

    def covers(self, model: str, op: str) -> bool:
        """Whether this entry allows `op` to fall back in `model`."""
        return op == self.op and (ANY_MODEL in self.models or model in self.models)


@dataclass(frozen=True)
class Allowlist:
    """The allowed fallbacks, and where they were read from."""

    entries: tuple[AllowedFallback, ...] = ()
    source: str = "(none)"

    def allowance(self, model: str, op: str) -> AllowedFallback | None:
        """The entry that allows `op` in `model`, or None."""
        return next((entry for entry in self.entries if entry.covers(model, op)), None)


class AllowlistError(ValueError):
    """The allowlist file is malformed: the message names the file, the entry and what to write."""


def parse_allowlist(data: object, source: str) -> Allowlist:
    """Check the allowlist's JSON object and build it; every entry needs an aten op, models and a reason."""
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise AllowlistError(f"{source}: expected a JSON object with \"schema_version\": {SCHEMA_VERSION}")
    raw_entries = data.get("allowed_fallbacks")
    if not isinstance(raw_entries, list):
        raise AllowlistError(f"{source}: \"allowed_fallbacks\" must be a list of entries")
    entries = []
    for index, raw in enumerate(raw_entries):
        where = f"{source}: allowed_fallbacks[{index}]"
        if not isinstance(raw, dict):
            raise AllowlistError(f"{where} must be an object with op, models and reason")
        op, models, reason = raw.get("op"), raw.get("models"), raw.get("reason")
        if not isinstance(op, str) or "::" not in op:
            raise AllowlistError(f"{where}: \"op\" must name the op as the report does, e.g. \"aten::linalg_svd\"")
        if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
            raise AllowlistError(f"{where} ({op}): \"models\" must be a non-empty list of model names, or [\"*\"]")
        if not isinstance(reason, str) or not reason.strip():
            raise AllowlistError(f"{where} ({op}): \"reason\" must say why this fallback is accepted")
        entries.append(AllowedFallback(op, tuple(models), reason.strip()))
    return Allowlist(tuple(entries), source)


def load_allowlist(path: Path = DEFAULT_ALLOWLIST, required: bool = False) -> Allowlist:
    """Read the allowlist at `path`; a missing file is an empty allowlist unless `required`."""
    if not path.exists():
        if required:
            raise AllowlistError(f"{path}: no such allowlist file; pass an existing file to --allowlist")
        return Allowlist(source=f"{path} (absent: nothing allowed)")
    try:
        data = read_json_file(path, "Fix the entry, or restore the file from version control.")
    except BadFileError as error:
        raise AllowlistError(str(error)) from None
    return parse_allowlist(data, str(path))


def unexpected_fallbacks(coverage: ModelCoverage, allowlist: Allowlist) -> tuple[OpUsage, ...]:
    """The ops of `coverage` that would fall back on MPS and that the allowlist does not allow."""
    return tuple(usage for usage in coverage.fallbacks if allowlist.allowance(coverage.model, usage.op) is None)


def describe_fallback(model: str, usage: OpUsage, allowlist_path: Path | str = DEFAULT_ALLOWLIST) -> str:
    """One paragraph a reader can act on: the op, the model, the phases and calls, why, and what to do."""
    phases = ", ".join(f"{phase} {calls} call{'s' if calls != 1 else ''}" for phase, calls in usage.calls_by_phase)
    via = f" (called inside {', '.join(usage.inside)})" if usage.inside else ""
    advice = f" Suggestion: {usage.suggestion}." if usage.suggestion else ""
    entry = json.dumps({"op": usage.op, "models": [model], "reason": "..."})
    return (
        f"{usage.op} would fall back to the CPU on MPS in model {model}: {phases}{via}. "
        f"Why: {usage.reason}.{advice} If this is accepted, add {entry} to {allowlist_path} with the reason."
    )


def runtime_unexpected(model: str, ops: list[str], allowlist: Allowlist) -> tuple[str, ...]:
    """The ops seen falling back at runtime that the allowlist does not allow in `model`. The profiler
    names an op without its overload ('aten::linalg_svd'), so an entry for any overload of it counts."""
    unexpected = []
    for op in ops:
        allowed = any(
            (ANY_MODEL in entry.models or model in entry.models) and op in (entry.op, entry.op.split(".")[0])
            for entry in allowlist.entries
        )
        if not allowed and op not in unexpected:
            unexpected.append(op)
    return tuple(unexpected)
