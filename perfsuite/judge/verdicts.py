"""Verdicts: one measurement judged against its baseline entry.

`judge` is pure: it takes a `Measurement`, the stored `BaselineEntry` (or None), this machine's identity
and the bands, and returns a `Verdict`: the decision and every figure behind it, no sentences (perfsuite.render
writes those). `regressed` (time), a regressed memory figure and, unless the user downgrades it to a warning,
`incompatible` (the case changed against its history: model, inputs, torch, threads, figure or machine) fail the
gate; `conditions-differ` (the machine ran in another state than its history was recorded in: on battery against AC,
Low Power against High Power, under thermal pressure or a GPU slowdown; `perfsuite.judge.conditions`) is not judged
and always fails it, since a verdict that cannot judge must never read as a pass; `uncalibrated` and `no-baseline`
are shown and never fail it (except a change beyond the uncalibrated factor, which is `regressed`).

`judge` only sequences its parts: the bands checked (`check_bands`), why the case cannot be compared
(`incompatibility_reasons`), the statistics and band decision on the run medians (`compare_times`), the memory
figure's judgement (`judge_memory`), and the `Verdict` assembled from them (`assemble_verdict`, its status from
`verdict_status`).

The pooled spread of a machine's other cases, which the decision borrows from, is made here too
(`pooled_machine_spread`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfsuite.judge.conditions import ConditionsJudgement, judge_conditions
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
from perfsuite.records import (
    DEFAULT_MEMORY_TOLERANCE,
    DEFAULT_TOLERANCE,
    BaselineEntry,
    Conditions,
    Measurement,
    check_band,
)

VerdictStatus = Literal[
    "regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible", "conditions-differ",
]
VERDICT_STATUSES: tuple[VerdictStatus, ...] = (
    "regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible", "conditions-differ",
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
    `change_fails` says whether an `incompatible` verdict (a case changed against its history) fails the gate;
    `conditions` how this session's conditions compare with its history's (None where no history was compared).
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
    conditions: ConditionsJudgement | None = None

    @property
    def gate_failed(self) -> bool:
        """True when this verdict must fail the run: the time or the memory figure regressed, the case changed
        against its history and changes fail, or it ran under other conditions than its history (never judged)."""
        changed = self.status == "incompatible" and self.change_fails
        unjudged = self.status == "conditions-differ"
        return changed or unjudged or self.status == "regressed" or self.memory_status == "regressed"

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


@dataclass(frozen=True)
class MemoryJudgement:
    """The memory figure judged against the baseline's: `status` and `ratio` (current / baseline, None when not
    compared), the baseline's bytes, and a note where the two figures are not the same kind of figure."""

    status: MemoryOutcome = "not-compared"
    baseline_bytes: int | None = None
    ratio: float | None = None
    notes: tuple[str, ...] = ()


# Where no baseline entry is comparable, no memory figure is compared either.
MEMORY_NOT_COMPARED = MemoryJudgement()


def check_bands(benchmark_id: str, tolerance: float, memory_tolerance: float) -> None:
    """Raise a UsageError naming `benchmark_id` unless both bands are fractions a verdict can use."""
    check_band(tolerance, f"{benchmark_id}: tolerance")
    check_band(memory_tolerance, f"{benchmark_id}: memory tolerance")


def compare_times(
    current: Measurement,
    baseline: BaselineEntry,
    tolerance: float,
    machine_spread: Spread | None,
    config: DecisionConfig,
) -> RunComparison:
    """The statistics of `current`'s run medians against `baseline`'s: ratio, interval, p-values and the band
    decision (`perfsuite.judge.stats.compare_runs`), with the baseline's recording sessions counted."""
    return compare_runs(
        current.run_medians_s, baseline.run_medians_s, tolerance, machine_spread, config,
        baseline_sessions=len({run.recorded_at for run in baseline.runs}),
    )


def p_value_of_change(comparison: RunComparison) -> float | None:
    """The one-sided p-value in the direction the ratio moved (slower at a ratio of 1); None when uncalibrated."""
    return comparison.p_value_slower if comparison.ratio >= 1 else comparison.p_value_faster


def judge_memory(
    current_figure: str, current_memory_bytes: int | None, baseline: BaselineEntry, memory_tolerance: float
) -> MemoryJudgement:
    """The case's memory figure (`current_figure`, in bytes) against the baseline's; not compared, with a note,
    where the baseline recorded another figure."""
    if baseline.memory_figure != current_figure:
        note = f"memory figures differ: baseline {baseline.memory_figure}, current {current_figure}"
        return MemoryJudgement(baseline_bytes=baseline.memory_bytes, notes=(note,))
    status, ratio = compare_memory(current_memory_bytes, baseline.memory_bytes, memory_tolerance)
    return MemoryJudgement(status=status, baseline_bytes=baseline.memory_bytes, ratio=ratio)


def verdict_status(baseline: BaselineEntry | None, comparison: RunComparison | None,
                   conditions: ConditionsJudgement | None = None) -> VerdictStatus:
    """Which verdict a case gets: `no-baseline` without an entry, `conditions-differ` where the session ran under
    conditions its history cannot be compared with, `incompatible` where the entry was not compared otherwise (the
    case changed against it), else the time comparison's band decision."""
    if baseline is None:
        return "no-baseline"
    if conditions is not None and not conditions.comparable:
        return "conditions-differ"
    if comparison is None:
        return "incompatible"
    return comparison.outcome


def history_conditions(baseline: BaselineEntry) -> tuple[Conditions, ...]:
    """Every reading of conditions of a history's runs (none for runs recorded before perfsuite read them)."""
    return tuple(reading for run in baseline.runs for reading in run.conditions)


def measured_conditions(current: Measurement) -> tuple[Conditions, ...]:
    """Every reading of conditions of a measurement's runs."""
    return tuple(reading for run in current.runs for reading in run.conditions)



def assemble_verdict(
    current: Measurement,
    baseline: BaselineEntry | None,
    current_memory_bytes: int | None,
    tolerance: float,
    memory_tolerance: float,
    baseline_source: str,
    reasons: tuple[str, ...] = (),
    change_fails: bool = False,
    compared: tuple[RunComparison, DecisionConfig] | None = None,
    memory: MemoryJudgement = MEMORY_NOT_COMPARED,
    conditions: ConditionsJudgement | None = None,
) -> Verdict:
    """The `Verdict` of `current` from what was decided about it: the baseline entry (None when there is none),
    why the case cannot be compared with it (`reasons`), and, where it was compared, the time comparison with the
    rule that made it (`compared`), the memory judgement and the conditions' (`conditions`). An entry that was not
    compared makes the verdict `incompatible` (or `conditions-differ`), with the plain ratio of medians and the
    default rule."""
    run = current.last
    comparison, config = compared if compared is not None else (None, DEFAULT_DECISION)
    if comparison is not None:
        ratio: float | None = comparison.ratio
    else:
        ratio = None if baseline is None else current.median_s / baseline.median_s
    return Verdict(
        benchmark_id=current.case.benchmark_id,
        status=verdict_status(baseline, comparison, conditions),
        baseline_median_s=None if baseline is None else baseline.median_s,
        current_median_s=current.median_s,
        ratio=ratio,
        ci_low=None if comparison is None else comparison.ci_low,
        ci_high=None if comparison is None else comparison.ci_high,
        p_value=None if comparison is None else p_value_of_change(comparison),
        tolerance=tolerance,
        current_runs=len(current.runs),
        baseline_runs=None if baseline is None else len(baseline.runs),
        detectable_slowdown=None if comparison is None else comparison.detectable_slowdown,
        processes_needed=None if comparison is None else comparison.processes_needed,
        samples_per_s=current.samples_per_s,
        tflops_per_s=run.tflops_per_s,
        gpu_busy_fraction=run.gpu_busy_fraction,
        memory_status=memory.status,
        memory_figure=run.memory_figure,
        baseline_memory_bytes=memory.baseline_bytes,
        current_memory_bytes=current_memory_bytes,
        memory_ratio=memory.ratio,
        memory_tolerance=memory_tolerance,
        comparison=comparison,
        config=config,
        reasons=reasons,
        notes=memory.notes,
        baseline_source=baseline_source,
        change_fails=change_fails,
        conditions=conditions,
    )


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
    check_bands(current.case.benchmark_id, tolerance, memory_tolerance)
    reasons = () if baseline is None else incompatibility_reasons(current, baseline, current_machine)
    compared: tuple[RunComparison, DecisionConfig] | None = None
    memory = MEMORY_NOT_COMPARED
    conditions = None
    if baseline is not None and not reasons:
        conditions = judge_conditions(history_conditions(baseline), measured_conditions(current))
    if baseline is not None and not reasons and conditions is not None and conditions.comparable:
        compared = (compare_times(current, baseline, tolerance, machine_spread, config), config)
        memory = judge_memory(current.last.memory_figure, current_memory_bytes, baseline, memory_tolerance)
    return assemble_verdict(
        current, baseline, current_memory_bytes, tolerance, memory_tolerance, baseline_source,
        reasons=reasons,
        # Recorded on the verdict it applies to, an incompatible one.
        change_fails=change_fails and bool(reasons),
        compared=compared,
        memory=memory,
        conditions=conditions,
    )
