"""Verdicts: one measurement judged against its baseline entry.

`judge` is pure: it takes a `Measurement`, the stored `BaselineEntry` (or None), this machine's identity
and the bands, and returns a `Verdict`. Only `regressed` (time) and a regressed memory figure fail the gate;
`uncalibrated`, `no-baseline` and `incompatible` are shown and never fail it (except a change beyond the
uncalibrated factor, which is `regressed`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfsuite.judge.stats import (
    DEFAULT_DECISION,
    RECOMMENDED_PROCESSES,
    DecisionConfig,
    MemoryOutcome,
    RunComparison,
    Spread,
    baseline_runs_needed,
    compare_memory,
    compare_runs,
    smallest_p_value,
)
from perfsuite.judge.tolerances import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE, check_tolerance
from perfsuite.records import BaselineEntry, Measurement
from perfsuite.render.units import format_bytes, format_ratio, format_seconds

VerdictStatus = Literal["regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible"]
VERDICT_STATUSES: tuple[VerdictStatus, ...] = (
    "regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible",
)
RECORD_COMMAND = "pytest --benchmark-only --perf-update-baseline"
REBASELINE_COMMAND = "pytest --benchmark-only --perf-rebaseline"
# Below this share of the step spent in GPU kernels, a CUDA step measures the host as much as the GPU.
LAUNCH_BOUND_BELOW = 0.5
# Memory figures that belong to the case wherever it ran; the others only when it had its process to itself.
CASE_OWN_MEMORY_FIGURES = ("cuda_max_allocated_bytes",)


@dataclass(frozen=True)
class Verdict:
    """How one benchmark compares with its baseline.

    Times in seconds, memory in bytes, bands and floors as fractions. `ratio` is the median of the
    current run medians over the baseline's; `ci_low`/`ci_high` bound it; `p_value` is the one-sided p-value
    in the direction of the change; `detectable_slowdown` the smallest slowdown the rule would call with
    95% power here; `processes_needed` the fewest processes with which the test can reach p < 0.01 here (None
    when the noise floor is above the band: no process count lowers it).
    `message` is one line for people.
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
    message: str
    notes: tuple[str, ...] = ()

    @property
    def gate_failed(self) -> bool:
        """True when this verdict must fail the run: the time or the memory figure regressed."""
        return self.status == "regressed" or self.memory_status == "regressed"

    @property
    def launch_bound(self) -> bool:
        """Whether the step spends under half its time in GPU kernels: it measures the host CPU and Python as
        much as the GPU."""
        return self.gpu_busy_fraction is not None and self.gpu_busy_fraction < LAUNCH_BOUND_BELOW

    def to_dict(self) -> dict[str, Any]:
        """The verdict as plain JSON-ready data, with `gate_failed` and `launch_bound` included."""
        return {
            **asdict(self), "notes": list(self.notes), "gate_failed": self.gate_failed,
            "launch_bound": self.launch_bound,
        }


def incompatibility_reasons(
    current: Measurement, baseline: BaselineEntry, current_machine: Mapping[str, str]
) -> tuple[str, ...]:
    """Why `current` may not be compared with `baseline` at all: another machine, model configuration
    (config_digest), torch version or thread count. Empty when they are comparable."""
    run = current.last
    pairs: list[tuple[str, object, object]] = [
        (f"machine {key}", baseline.machine.get(key), current_machine.get(key))
        for key in sorted(set(baseline.machine) | set(current_machine))
    ]
    pairs += [
        ("config_digest", baseline.config_digest, run.config_digest),
        ("torch_version", baseline.torch_version, run.torch_version),
    ]
    if baseline.threads is not None:
        pairs.append(("threads", baseline.threads, run.threads))
    return tuple(f"{what}: baseline {old!r}, current {new!r}" for what, old, new in pairs if old != new)


def memory_belongs_to_case(figure: str, fresh_process: bool) -> bool:
    """Whether a memory figure measures the case alone: CUDA's peak after a reset always does; the process's
    peak RSS and the MPS driver's allocation only when the case had a fresh process to itself."""
    return figure in CASE_OWN_MEMORY_FIGURES or fresh_process


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
) -> Verdict:
    """Judge `current` against its stored `baseline` entry (None when there is none).

    `tolerance` and `memory_tolerance` are fractions (0.10: 10%); `machine_spread` is the pooled between-run
    spread of this machine's other cases; `baseline_source` (e.g. the file's path) is named in hints;
    `current_memory_bytes` is the memory figure that belongs to the case (None: not gated).
    """
    benchmark_id = current.case.benchmark_id
    check_tolerance(tolerance, f"{benchmark_id}: tolerance")
    check_tolerance(memory_tolerance, f"{benchmark_id}: memory tolerance")
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
    }
    no_memory: dict[str, Any] = {"memory_status": "not-compared", "baseline_memory_bytes": None, "memory_ratio": None}
    undecided: dict[str, Any] = {
        "ci_low": None, "ci_high": None, "p_value": None, "detectable_slowdown": None, "processes_needed": None,
    }
    if baseline is None:
        return Verdict(
            **common, **no_memory, **undecided, status="no-baseline", baseline_median_s=None, ratio=None,
            baseline_runs=None,
            message=f"{benchmark_id}: no baseline in {baseline_source}; record one with `{RECORD_COMMAND}`",
        )
    reasons = incompatibility_reasons(current, baseline, current_machine)
    if reasons:
        ratio = current.median_s / baseline.median_s
        return Verdict(
            **common, **no_memory, **undecided, status="incompatible", baseline_median_s=baseline.median_s,
            ratio=ratio, baseline_runs=len(baseline.runs),
            message=(
                f"{benchmark_id}: not compared with its baseline ({'; '.join(reasons)}); median "
                f"{format_seconds(baseline.median_s)} -> {format_seconds(current.median_s)} ({format_ratio(ratio)}) "
                f"shown only. Once reviewed, start its history over with `{REBASELINE_COMMAND}`"
            ),
            notes=reasons,
        )
    comparison = compare_runs(
        current.run_medians_s, baseline.run_medians_s, tolerance, machine_spread, config,
        baseline_sessions=len({run.recorded_at for run in baseline.runs}),
    )
    message = time_message(benchmark_id, comparison, baseline.median_s, current.median_s, tolerance, config)
    notes: list[str] = []
    memory_status: MemoryOutcome = "not-compared"
    memory_ratio = None
    if baseline.memory_figure != run.memory_figure:
        notes.append(f"memory figures differ: baseline {baseline.memory_figure}, current {run.memory_figure}")
    else:
        memory_status, memory_ratio = compare_memory(current_memory_bytes, baseline.memory_bytes, memory_tolerance)
    if memory_status in ("regressed", "improved"):
        direction = "above" if memory_status == "regressed" else "below"
        limit = 1 + memory_tolerance if memory_status == "regressed" else 1 - memory_tolerance
        message += (
            f"; memory {memory_status}: {run.memory_figure} {format_bytes(baseline.memory_bytes)} -> "
            f"{format_bytes(current_memory_bytes)} ({format_ratio(memory_ratio)}, {direction} the band {limit:.3g})"
        )
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
        message=message,
        notes=tuple(notes),
    )


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def floor_text(comparison: RunComparison, tolerance: float) -> str:
    """What the runs at hand can detect, e.g. `detects >= 12% here` and, when noise puts the floor above the
    band, what would bring it under."""
    text = f"detects >= {_percent(comparison.detectable_slowdown)} here"
    if comparison.noise_slowdown is not None and comparison.noise_slowdown > tolerance:
        text += f"; the noise floor is above the {_percent(tolerance)} band: " + _more_runs_text(comparison)
    return text


def _more_runs_text(comparison: RunComparison) -> str:
    spread = "" if comparison.log_sd is None else f"this machine's runs scatter by {_percent(comparison.log_sd)} (sd); "
    return (
        f"{spread}no process count lowers it, since one session's runs share the machine's state: judge on a "
        "quieter runner, with --perf-threads 1 or longer runs (--benchmark-max-time 5), or give this case a wider "
        "band"
    )


def time_message(
    benchmark_id: str,
    comparison: RunComparison,
    baseline_median_s: float,
    current_median_s: float,
    tolerance: float,
    config: DecisionConfig,
) -> str:
    """One line that says the outcome and why."""
    runs = f"{comparison.current_runs} run(s) vs {comparison.baseline_runs} baseline run(s)"
    head = (
        f"{benchmark_id} {comparison.outcome}: median {format_seconds(baseline_median_s)} -> "
        f"{format_seconds(current_median_s)} ({format_ratio(comparison.ratio)}, {runs})"
    )
    if not comparison.calibrated:
        factor = config.uncalibrated_factor
        if comparison.outcome != "uncalibrated":
            past = "beyond the baseline's slowest run" if comparison.outcome == "regressed" else (
                "below the baseline's fastest run"
            )
            return f"{head}; x{factor:g} {past}, called although the runs are too few to calibrate the test"
        smallest = smallest_p_value(comparison.current_runs, comparison.baseline_runs)
        processes = max(comparison.current_runs, RECOMMENDED_PROCESSES)
        needed = baseline_runs_needed(processes, config.false_alarm_rate)
        recordings = math.ceil(needed / RECOMMENDED_PROCESSES)
        return (
            f"{head}; uncalibrated: with these runs no p below {smallest:.2g} is possible, not the "
            f"{config.false_alarm_rate:g} the gate needs, so only a change x{factor:g} beyond the baseline's slowest "
            "run (and beyond the noise) is called; judge with "
            f"--perf-processes {processes} against >= {needed} baseline runs "
            f"(`{RECORD_COMMAND} --perf-processes {RECOMMENDED_PROCESSES}`, recorded {recordings} times)"
        )
    interval = f"CI [{comparison.ci_low:.3f}, {comparison.ci_high:.3f}]"
    floor = floor_text(comparison, tolerance)
    if comparison.outcome == "regressed":
        return (
            f"{head}; slower beyond the band {1 + tolerance:.3g} with p = {comparison.p_value_slower:.2g} "
            f"< {config.false_alarm_rate:g} ({interval}); {floor}"
        )
    if comparison.outcome == "improved":
        return (
            f"{head}; faster beyond the band {1 - tolerance:.3g} with p = {comparison.p_value_faster:.2g} "
            f"< {config.false_alarm_rate:g} ({interval}); {floor}"
        )
    return f"{head}; within the band +-{_percent(tolerance)} or within the noise ({interval}); {floor}"
