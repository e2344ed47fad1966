"""Verdicts: one measurement judged against its baseline entry.

`judge` is pure: it takes a `Measurement`, the stored `BaselineEntry` (or None), this machine's identity
and the bands, and returns a `Verdict`: the decision and every figure behind it, no sentences (perfsuite.render
writes those). `regressed` (time), a regressed memory figure and, unless the user downgrades it to a warning,
`incompatible` (the case changed against its history: model, inputs, torch, threads, figure or machine) fail the
gate; `uncalibrated` and `no-baseline` are shown and never fail it (except a change beyond the uncalibrated factor,
which is `regressed`).

The pooled spread of a machine's other cases, which the decision borrows from, is made here too
(`pooled_machine_spread`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfsuite.judge.stats import (
    DEFAULT_DECISION,
    DecisionConfig,
    MemoryOutcome,
    RunComparison,
    Spread,
    compare_memory,
    compare_runs,
    within_spread,
)
from perfsuite.records import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE, BaselineEntry, Measurement, check_band

VerdictStatus = Literal["regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible"]
VERDICT_STATUSES: tuple[VerdictStatus, ...] = (
    "regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible",
)
# Below this share of the step spent in GPU kernels, a CUDA step measures the host as much as the GPU.
LAUNCH_BOUND_BELOW = 0.5


@dataclass(frozen=True)
class Verdict:
    """How one benchmark compares with its baseline.

    Times in seconds, memory in bytes, bands and floors as fractions. `ratio` is the median of the
    current run medians over the baseline's; `ci_low`/`ci_high` bound it; `p_value` is the one-sided p-value
    in the direction of the change; `detectable_slowdown` the smallest slowdown the rule would call with
    95% power here; `processes_needed` the fewest processes with which the test can reach p < 0.01 here (None
    when the noise floor is above the band: no process count lowers it).
    `change_fails` says whether an `incompatible` verdict (a case changed against its history) fails the gate.
    """

    benchmark_id: str
    status: VerdictStatus
    baseline_median_s: float | None
    current_median_s: float
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    tolerance: float
    current_runs: int
    baseline_runs: int | None
    detectable_slowdown: float | None
    processes_needed: int | None
    samples_per_s: float
    tflops_per_s: float | None
    gpu_busy_fraction: float | None
    memory_status: MemoryOutcome
    memory_figure: str
    baseline_memory_bytes: int | None
    current_memory_bytes: int | None
    memory_ratio: float | None
    memory_tolerance: float
    comparison: RunComparison | None = None
    config: DecisionConfig = DEFAULT_DECISION
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    baseline_source: str = "the baseline directory"
    change_fails: bool = False

    @property
    def gate_failed(self) -> bool:
        """True when this verdict must fail the run: the time or the memory figure regressed, or the case changed
        against its history and changes fail."""
        changed = self.status == "incompatible" and self.change_fails
        return changed or self.status == "regressed" or self.memory_status == "regressed"

    @property
    def launch_bound(self) -> bool:
        """Whether the step spends under half its time in GPU kernels: it measures the host CPU and Python as
        much as the GPU."""
        return self.gpu_busy_fraction is not None and self.gpu_busy_fraction < LAUNCH_BOUND_BELOW

    @property
    def measured_change_s(self) -> float | None:
        """The change per step the verdict measured (current - baseline), in seconds: the baseline's median times the
        ratio less one, as the ratio estimates it; None where nothing was compared."""
        if self.ratio is None or self.baseline_median_s is None:
            return None
        return self.baseline_median_s * (self.ratio - 1)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as plain JSON-ready data, with `gate_failed` and `launch_bound` included."""
        return {
            **asdict(self), "reasons": list(self.reasons), "notes": list(self.notes), "gate_failed": self.gate_failed,
            "launch_bound": self.launch_bound,
        }


def incompatibility_reasons(
    current: Measurement, baseline: BaselineEntry, current_machine: Mapping[str, str]
) -> tuple[str, ...]:
    """Why `current` may not be compared with `baseline` at all: another machine, model configuration
    (parameter count, config_digest: parameter and input shapes), torch version, figure (step or latency) or thread
    count. Empty when they are comparable."""
    run = current.last
    pairs: list[tuple[str, object, object]] = [
        (f"machine {key}", baseline.machine.get(key), current_machine.get(key))
        for key in sorted(set(baseline.machine) | set(current_machine))
    ]
    if baseline.parameter_count is not None and run.parameter_count is not None:
        pairs.append(("parameter_count", baseline.parameter_count, run.parameter_count))
    pairs += [
        ("config_digest", baseline.config_digest, run.config_digest),
        ("torch_version", baseline.torch_version, run.torch_version),
        ("figure", baseline.figure, run.figure),
    ]
    if baseline.threads is not None:
        pairs.append(("threads", baseline.threads, run.threads))
    return tuple(f"{what}: baseline {old!r}, current {new!r}" for what, old, new in pairs if old != new)


def pooled_machine_spread(entries: Iterable[BaselineEntry], identity: Mapping[str, str]) -> Spread | None:
    """The pooled between-run spread of the entries recorded on the machine `identity` (a baseline file's cases)."""
    return within_spread([e.run_medians_s for e in entries if dict(e.machine) == dict(identity)])


def judge(
    current: Measurement,
    baseline: BaselineEntry | None,
    current_machine: Mapping[str, str],
    tolerance: float = DEFAULT_TOLERANCE,
    memory_tolerance: float = DEFAULT_MEMORY_TOLERANCE,
    machine_spread: Spread | None = None,
    config: DecisionConfig = DEFAULT_DECISION,
    baseline_source: str = "the baseline directory",
    current_memory_bytes: int | None = None,
    change_fails: bool = True,
) -> Verdict:
    """Judge `current` against its stored `baseline` entry (None when there is none).

    `tolerance` and `memory_tolerance` are fractions (0.10: 10%); `machine_spread` is the pooled between-run
    spread of this machine's other cases; `baseline_source` (e.g. the file's path) is named in hints;
    `current_memory_bytes` is the memory figure that belongs to the case (None: not gated); `change_fails` whether a
    case changed against its history (`incompatible`) fails the gate (else it is a warning).
    """
    benchmark_id = current.case.benchmark_id
    check_band(tolerance, f"{benchmark_id}: tolerance")
    check_band(memory_tolerance, f"{benchmark_id}: memory tolerance")
    run = current.last
    common: dict[str, Any] = {
        "benchmark_id": benchmark_id,
        "current_median_s": current.median_s,
        "tolerance": tolerance,
        "current_runs": len(current.runs),
        "samples_per_s": current.samples_per_s,
        "tflops_per_s": run.tflops_per_s,
        "gpu_busy_fraction": run.gpu_busy_fraction,
        "memory_figure": run.memory_figure,
        "current_memory_bytes": current_memory_bytes,
        "memory_tolerance": memory_tolerance,
        "baseline_source": baseline_source,
    }
    no_memory: dict[str, Any] = {"memory_status": "not-compared", "baseline_memory_bytes": None, "memory_ratio": None}
    undecided: dict[str, Any] = {
        "ci_low": None, "ci_high": None, "p_value": None, "detectable_slowdown": None, "processes_needed": None,
    }
    if baseline is None:
        return Verdict(
            **common, **no_memory, **undecided, status="no-baseline", baseline_median_s=None, ratio=None,
            baseline_runs=None,
        )
    reasons = incompatibility_reasons(current, baseline, current_machine)
    if reasons:
        return Verdict(
            **common, **no_memory, **undecided, status="incompatible", baseline_median_s=baseline.median_s,
            ratio=current.median_s / baseline.median_s, baseline_runs=len(baseline.runs), reasons=reasons,
            change_fails=change_fails,
        )
    comparison = compare_runs(
        current.run_medians_s, baseline.run_medians_s, tolerance, machine_spread, config,
        baseline_sessions=len({run.recorded_at for run in baseline.runs}),
    )
    notes: list[str] = []
    memory_status: MemoryOutcome = "not-compared"
    memory_ratio = None
    if baseline.memory_figure != run.memory_figure:
        notes.append(f"memory figures differ: baseline {baseline.memory_figure}, current {run.memory_figure}")
    else:
        memory_status, memory_ratio = compare_memory(current_memory_bytes, baseline.memory_bytes, memory_tolerance)
    p_value = comparison.p_value_slower if comparison.ratio >= 1 else comparison.p_value_faster
    return Verdict(
        **common,
        status=comparison.outcome,
        baseline_median_s=baseline.median_s,
        ratio=comparison.ratio,
        ci_low=comparison.ci_low,
        ci_high=comparison.ci_high,
        p_value=p_value,
        baseline_runs=len(baseline.runs),
        detectable_slowdown=comparison.detectable_slowdown,
        processes_needed=comparison.processes_needed,
        memory_status=memory_status,
        baseline_memory_bytes=baseline.memory_bytes,
        memory_ratio=memory_ratio,
        comparison=comparison,
        config=config,
        notes=tuple(notes),
    )
