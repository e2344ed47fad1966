"""Verdicts: one current result judged against its baseline entry, and which tolerance applies.

`judge` is pure: it takes a `CaseResult`, the stored `BaselineEntry` (or None) and both machine
fingerprints and returns a `Verdict`. Only `regressed` (time) and a regressed memory figure fail the gate;
`no-baseline`, `incompatible` and `too-few-rounds` are shown and never gated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfsuite.judge.stats import (
    DEFAULT_DECISION,
    DecisionConfig,
    MemoryOutcome,
    TimeComparison,
    check_tolerance,
    compare_memory,
    compare_times,
    drift_factor,
)
from perfsuite.records import CaseResult, format_bytes, format_seconds
from perfsuite.store.baselines import RECORD_COMMAND, BaselineEntry, no_baseline_hint

VerdictStatus = Literal["regressed", "improved", "unchanged", "too-few-rounds", "no-baseline", "incompatible"]
VERDICT_STATUSES: tuple[VerdictStatus, ...] = (
    "regressed", "improved", "unchanged", "too-few-rounds", "no-baseline", "incompatible",
)
DEFAULT_TOLERANCE = 0.10
DEFAULT_MEMORY_TOLERANCE = 0.10


@dataclass(frozen=True)
class Verdict:
    """How one benchmark compares with its baseline.

    Times are in seconds, memory in bytes. `ratio` is median(current) / median(baseline);
    `normalised_ratio` divides it by the reference workload's drift (None without a reference on both
    sides); `ci_low`/`ci_high` bound the ratio the decision used, at `confidence`; `p_value` is the
    one-sided Mann-Whitney p-value in the direction of the change. `message` is one line for people.
    """

    benchmark_id: str
    status: VerdictStatus
    baseline_median_s: float | None
    current_median_s: float
    ratio: float | None
    normalised_ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    confidence: float
    tolerance: float
    baseline_rounds: int | None
    current_rounds: int
    memory_status: MemoryOutcome
    memory_figure: str
    baseline_memory_bytes: int | None
    current_memory_bytes: int | None
    memory_ratio: float | None
    memory_tolerance: float
    message: str
    notes: tuple[str, ...] = ()

    @property
    def gate_failed(self) -> bool:
        """True when this verdict must fail the run: the time or the memory figure regressed."""
        return self.status == "regressed" or self.memory_status == "regressed"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as plain JSON-ready data, with `gate_failed` included."""
        return {**asdict(self), "notes": list(self.notes), "gate_failed": self.gate_failed}


def incompatibility_reasons(
    current: CaseResult,
    baseline: BaselineEntry,
    current_machine: Mapping[str, Any],
    baseline_machine: Mapping[str, Any],
) -> tuple[str, ...]:
    """Why `current` may not be compared with `baseline` at all: another machine, device, profile, model
    configuration (config_digest) or torch version. Empty when they are comparable."""
    # The machine is the accelerator for cuda and mps, the CPU model for cpu (what the file name is made
    # from); the fingerprint's own "machine_slug" is not compared, as it may name another device's file.
    name_key = "cpu_model" if current.device == "cpu" else "accelerator_name"
    pairs = (
        (name_key, baseline_machine.get(name_key), current_machine.get(name_key)),
        ("device", baseline.device, current.device),
        ("profile", baseline.profile, current.profile),
        ("config_digest", baseline.config_digest, current.config_digest),
        ("torch_version", baseline.torch_version, current.torch_version),
    )
    return tuple(f"{what}: baseline {old!r}, current {new!r}" for what, old, new in pairs if old != new)


def _band(tolerance: float) -> str:
    return f"{tolerance * 100:g}%"


def _ratio_text(comparison: TimeComparison) -> str:
    text = f"x{comparison.ratio:.3f}"
    if comparison.normalised_ratio is not None:
        text += f", x{comparison.normalised_ratio:.3f} normalised by reference drift x{comparison.drift:.3f}"
    return text


def _time_message(benchmark_id: str, comparison: TimeComparison, tolerance: float, config: DecisionConfig) -> str:
    medians = f"median {format_seconds(comparison.baseline_median_s)} -> {format_seconds(comparison.current_median_s)}"
    head = f"{benchmark_id} {comparison.outcome}: {medians} ({_ratio_text(comparison)})"
    if comparison.outcome == "too-few-rounds":
        return (
            f"{benchmark_id}: too few rounds to judge ({medians}, {_ratio_text(comparison)}); at least "
            f"{config.min_rounds} rounds on each side are needed: raise --benchmark-min-rounds"
        )
    which = "normalised ratio" if comparison.normalised_ratio is not None else "ratio"
    interval = f"{config.confidence * 100:g}% CI of the {which} [{comparison.ci_low:.3f}, {comparison.ci_high:.3f}]"
    if comparison.outcome == "regressed":
        return (
            f"{head}; the {interval} lies above the band {1 + tolerance:.3g} (tolerance {_band(tolerance)}), "
            f"Mann-Whitney p = {comparison.p_value_slower:.2g}"
        )
    if comparison.outcome == "improved":
        return (
            f"{head}; the {interval} lies below the band {1 - tolerance:.3g} (tolerance {_band(tolerance)}), "
            f"Mann-Whitney p = {comparison.p_value_faster:.2g}"
        )
    if comparison.normalised_outcome not in (None, comparison.raw_outcome):
        return (
            f"{head}; the raw comparison says {comparison.raw_outcome}, the drift-normalised one says "
            f"{comparison.normalised_outcome} ({interval}): they disagree, so no change is called "
            f"(tolerance {_band(tolerance)})"
        )
    return f"{head}; the {interval} is not wholly outside the band +-{_band(tolerance)}"


def judge(
    current: CaseResult,
    baseline: BaselineEntry | None,
    baseline_machine: Mapping[str, Any] | None,
    current_machine: Mapping[str, Any],
    tolerance: float = DEFAULT_TOLERANCE,
    memory_tolerance: float = DEFAULT_MEMORY_TOLERANCE,
    config: DecisionConfig = DEFAULT_DECISION,
    baseline_source: str = "the baseline directory",
) -> Verdict:
    """Judge `current` against its stored `baseline` entry (None when there is none).

    `tolerance` and `memory_tolerance` are fractions (0.10: 10%); `baseline_source` (e.g. the baseline
    file's path) is named in the no-baseline hint. The time decision is `perfsuite.judge.stats.compare_times`;
    it uses the drift-normalised ratio when both sides timed the reference workload.
    """
    check_tolerance(tolerance, f"{current.benchmark_id}: tolerance")
    check_tolerance(memory_tolerance, f"{current.benchmark_id}: memory tolerance")
    common = {
        "benchmark_id": current.benchmark_id,
        "current_median_s": current.median_s,
        "confidence": config.confidence,
        "tolerance": tolerance,
        "current_rounds": current.rounds,
        "memory_figure": current.memory_figure,
        "current_memory_bytes": current.memory_bytes,
        "memory_tolerance": memory_tolerance,
    }
    no_memory = {"memory_status": "not-compared", "baseline_memory_bytes": None, "memory_ratio": None}
    if baseline is None:
        return Verdict(
            **common, **no_memory, status="no-baseline", baseline_median_s=None, ratio=None, normalised_ratio=None,
            ci_low=None, ci_high=None, p_value=None, baseline_rounds=None,
            message=f"{current.benchmark_id}: {no_baseline_hint(baseline_source)}",
        )
    drift = drift_factor(current.reference_median_s, baseline.reference_median_s)
    reasons = incompatibility_reasons(current, baseline, current_machine, baseline_machine or {})
    if reasons:
        # Only the medians are compared: shown for information, never gated.
        ratio = current.median_s / baseline.median_s
        return Verdict(
            **common, **no_memory, status="incompatible", baseline_median_s=baseline.median_s, ratio=ratio,
            normalised_ratio=None, ci_low=None, ci_high=None, p_value=None, baseline_rounds=baseline.rounds,
            message=(
                f"{current.benchmark_id}: not compared with its baseline ({'; '.join(reasons)}); median "
                f"{format_seconds(baseline.median_s)} -> {format_seconds(current.median_s)} (x{ratio:.3f}) shown "
                f"only. Once reviewed, re-record it with `{RECORD_COMMAND}`"
            ),
            notes=reasons,
        )
    comparison = compare_times(current.round_times_s, baseline.round_times_s, tolerance, drift, config)
    message = _time_message(current.benchmark_id, comparison, tolerance, config)
    notes: list[str] = []
    if baseline.memory_figure != current.memory_figure:
        memory_status: MemoryOutcome = "not-compared"
        memory_ratio = None
        notes.append(f"memory figures differ: baseline {baseline.memory_figure}, current {current.memory_figure}")
    else:
        memory_status, memory_ratio = compare_memory(current.memory_bytes, baseline.memory_bytes, memory_tolerance)
    if memory_status in ("regressed", "improved"):
        direction = "above" if memory_status == "regressed" else "below"
        limit = 1 + memory_tolerance if memory_status == "regressed" else 1 - memory_tolerance
        message += (
            f"; memory {memory_status}: {current.memory_figure} {format_bytes(baseline.memory_bytes)} -> "
            f"{format_bytes(current.memory_bytes)} (x{memory_ratio:.3f}, {direction} the band {limit:.3g}, "
            f"tolerance {_band(memory_tolerance)})"
        )
    p_value = comparison.p_value_slower if comparison.decision_ratio >= 1 else comparison.p_value_faster
    return Verdict(
        **common,
        status=comparison.outcome,
        baseline_median_s=comparison.baseline_median_s,
        ratio=comparison.ratio,
        normalised_ratio=comparison.normalised_ratio,
        ci_low=comparison.ci_low,
        ci_high=comparison.ci_high,
        p_value=p_value,
        baseline_rounds=baseline.rounds,
        memory_status=memory_status,
        baseline_memory_bytes=baseline.memory_bytes,
        memory_ratio=memory_ratio,
        message=message,
        notes=tuple(notes),
    )


def parse_tolerance_table(table: Mapping[str, Any], where: str) -> dict[str, float]:
    """Validate a tolerance table such as `[tool.perfsuite.tolerance]`: keys are "default", a model name
    or a benchmark id; values fractions in [0, 1). `where` names the table in errors."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table of name = fraction, e.g. resnet18 = 0.15; got {table!r}")
    parsed: dict[str, float] = {}
    for key, value in table.items():
        check_tolerance(value, f"{where}: {key!r}")
        parsed[str(key)] = float(value)
    return parsed


def tolerance_for(
    benchmark_id: str,
    model: str,
    overrides: Mapping[str, float],
    default: float = DEFAULT_TOLERANCE,
    cli_override: float | None = None,
) -> float:
    """The tolerance that applies to one benchmark: the command-line value, else the benchmark id's entry
    in `overrides`, else the model's entry, else `overrides["default"]`, else `default`."""
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
    """Keys of `overrides` that name no known benchmark id or model (and are not "default"): likely typos,
    worth a warning because they silently change nothing."""
    known = {"default", *benchmark_ids, *models}
    return sorted(key for key in overrides if key not in known)
