"""The A/B selftest: real A/B jobs on this machine, through the real measuring (`perfsuite.run.ab`) and the real
decision (`perfsuite.judge.ab`), with planted slowdowns of known size.

Each side is a folder holding one module that registers the case's model under a selftest name: the built-in model,
followed in every forward by a busy wait of a chosen length (zero on the base side). A head side planted with factor
f waits (f - 1) x the model's step time, measured just before its job, so its step is about f times the base's on a
device that computes on the host (the CPU); on an accelerator the wait is host time, which a launch-bound step pays
and a GPU-busy step may hide (the measured effect is reported beside the planted one). Factor 1.0 is an A/A job: the
two sides run the same code, so any `regressed` or `improved` is a false alarm.

Jobs run in a shuffled order of factors, `repeats` times each; every job is a whole A/B job (fresh worker pairs,
builds, warm-ups, windows) and its seconds are kept.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.judge.ab import MAX_BLOCKS, block_estimate, judge_ab, look
from perfsuite.records import AbMeasurement, Case, WorkloadSource
from perfsuite.run.ab import AbSchedule, SideSpec, measure_ab
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan

SIDE_MODULE = '''"""A selftest side: {model} followed by a busy wait per forward (seconds by mode)."""
import dataclasses
import time

import torch

from perfsuite.workloads import get_workload, register_workload

EXTRA_S = {extra!r}


class Planted(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        output = self.inner(*args, **kwargs)
        end_s = time.perf_counter() + EXTRA_S["train" if self.training else "infer"]
        while time.perf_counter() < end_s:
            pass
        return output


_model = get_workload({model!r})
register_workload(dataclasses.replace(
    _model, name={name!r}, build_module=lambda profile: Planted(_model.build_module(profile)),
))
'''
MODULE_NAME = "perfsuite_ab_selftest_side"


@dataclass(frozen=True)
class AbSelftestPlan:
    """Which cases (one built-in `model` on `device` in each of `modes`), how many A/B jobs per planted `factors`
    (1.0: A/A), and how each job measures (`pairs` process pairs, `max_time_s` per side and case and pair)."""

    device: str
    model: str
    modes: tuple[str, ...]
    batch_size: int
    profile: str
    dtype: str = "fp32"
    factors: tuple[float, ...] = (1.0, 1.05, 1.1)
    repeats: int = 10
    pairs: int = 2
    max_time_s: float = 1.0
    warmup_steps: int = 3
    threads: int | None = 1
    tolerance: float = 0.05
    budget_s: float = 300.0
    in_one_process: bool = True
    seed: int = 0

    @property
    def name(self) -> str:
        return f"ab-selftest-{self.model}"

    def cases(self) -> tuple[Case, ...]:
        return tuple(Case(self.device, self.dtype, self.name, self.batch_size, mode, self.profile)
                     for mode in self.modes)


def write_side(name: str, folder: Path, plan: AbSelftestPlan, extra_s: dict[str, float]) -> SideSpec:
    """A side folder whose module registers the planted model, and the side that runs it."""
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{MODULE_NAME}.py"
    file.write_text(SIDE_MODULE.format(model=plan.model, name=plan.name, extra=extra_s), encoding="utf-8")
    sources = {plan.name: [WorkloadSource(module=MODULE_NAME, file=str(file))]}
    return SideSpec(name, sys.executable, folder, sources)


def step_times_s(plan: AbSelftestPlan) -> dict[str, float]:
    """Each mode's step time of the unplanted model here (median of a few windows), to size the planted waits."""
    import torch

    from perfsuite.run.measure import open_case
    from perfsuite.workloads import get_workload

    if plan.threads:
        torch.set_num_threads(plan.threads)
    model = get_workload(plan.model)
    times = {}
    for mode in plan.modes:
        case = Case(plan.device, plan.dtype, model.name, plan.batch_size, mode, plan.profile)
        warm = open_case(case, MeasureSettings(plan.warmup_steps, count_flops=False), RoundSettings())
        try:
            times[mode] = statistics.median(warm.time_rounds(0.5))
        finally:
            warm.close()
    return times


def run_job(plan: AbSelftestPlan, factor: float, folder: Path, seed: int,
            show: Callable[[str], None]) -> dict[str, Any]:
    """One whole A/B job with the head planted `factor` times slower (its wait sized from the step times measured
    just before, so a machine that got busier since the last job does not skew it); its verdicts and seconds."""
    started_s = time.perf_counter()
    step_s = step_times_s(plan) if factor != 1.0 else {}
    extra = {mode: (factor - 1) * step_s.get(mode, 0.0) for mode in ("infer", "train")}
    base = write_side("base", folder / "base", plan, {"infer": 0.0, "train": 0.0})
    head = write_side("head", folder / "head", plan, extra)
    session = SessionPlan(
        plan.cases(), plan.pairs, MeasureSettings(plan.warmup_steps), RoundSettings(max_time_s=plan.max_time_s),
        isolation="pass", threads=plan.threads, seed=seed,
    )
    family_size = len(session.cases)

    def decided(measurement: AbMeasurement) -> tuple[bool, int]:
        seen = look(measurement, plan.tolerance, family_size)
        return seen.status is not None, seen.next_windows

    schedule = AbSchedule(plan.pairs, plan.budget_s, MAX_BLOCKS, in_one_process=plan.in_one_process,
                          process_pairs_reason=None if plan.in_one_process else "chosen by the selftest's plan")
    results = measure_ab(session, base, head, folder / "work", lambda progress: None, schedule, decided)
    verdicts = []
    for case in session.cases:
        verdict = judge_ab(results.measurements.get(case.benchmark_id, AbMeasurement(case, ())),
                           results.failures.get(case.benchmark_id, []), plan.tolerance, 0.10,
                           family_size=family_size, budget_s=plan.budget_s)
        verdicts.append({"case": case.benchmark_id, "mode": case.mode, "status": verdict.status,
                         "ratio": verdict.ratio, "ci_low": verdict.ci_low, "ci_high": verdict.ci_high,
                         "floor": verdict.floor, "reasons": list(verdict.reasons), "blocks": verdict.pairs,
                         "windows": verdict.windows, "seconds": verdict.seconds,
                         "between_blocks": verdict.between_blocks, "within_block": verdict.within_block,
                         "block_ratios": [math.exp(block_estimate(pair.windows_s).log_ratio) for pair in
                                          results.measurements[case.benchmark_id].pairs if pair.windows_s]})
    seconds = time.perf_counter() - started_s
    show(f"factor {factor}: " + ", ".join(
        f"{v['mode']} {v['status']} x{v['ratio'] or 0:.3f} floor {100 * (v['floor'] or 0):.1f}%" for v in verdicts
    ) + f" ({seconds:.0f} s)")
    return {"factor": factor, "seconds": seconds, "planted_wait_s": extra, "sized_from_step_s": step_s,
            "verdicts": verdicts}


def summarise(jobs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per factor: jobs, verdicts by status, false alarms (A/A) or catches (planted), floors and seconds."""
    summary: dict[str, Any] = {}
    for factor in sorted({job["factor"] for job in jobs}):
        chosen = [job for job in jobs if job["factor"] == factor]
        verdicts = [v for job in chosen for v in job["verdicts"]]
        floors = [v["floor"] for v in verdicts if v["floor"] is not None]
        statuses = {status: sum(v["status"] == status for v in verdicts) for status in
                    ("regressed", "improved", "unchanged", "inconclusive", "errored")}
        summary[str(factor)] = {
            "jobs": len(chosen), "verdicts": len(verdicts), "statuses": statuses,
            "false_alarms": statuses["regressed"] + statuses["improved"] if factor == 1.0 else None,
            "caught": statuses["regressed"] if factor > 1.0 else None,
            "median_ratio": statistics.median(v["ratio"] for v in verdicts if v["ratio"]) if verdicts else None,
            "largest_floor": max(floors, default=None), "median_floor": statistics.median(floors) if floors else None,
            "largest_job_s": max(job["seconds"] for job in chosen), "median_job_s": statistics.median(
                job["seconds"] for job in chosen),
        }
    return summary


def run_ab_selftest(plan: AbSelftestPlan, show: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure the step times, then run `repeats` A/B jobs per factor in a shuffled order; the whole record."""
    import os

    from perfsuite.run.devices import machine_fingerprint

    load_at_start = list(os.getloadavg())
    order = [factor for factor in plan.factors for _ in range(plan.repeats)]
    random.Random(plan.seed).shuffle(order)
    jobs = []
    with tempfile.TemporaryDirectory(prefix="perfsuite-ab-selftest-") as folder:
        for index, factor in enumerate(order):
            jobs.append(run_job(plan, factor, Path(folder) / f"job{index}", plan.seed * 1000 + index, show))
    return {
        "plan": {**plan.__dict__, "modes": list(plan.modes), "factors": list(plan.factors)},
        "machine": machine_fingerprint(), "load_average_at_start": load_at_start,
        "load_average_at_end": list(os.getloadavg()), "jobs": jobs, "summary": summarise(jobs),
    }


def write_record(record: dict[str, Any], path: Path) -> None:
    from perfsuite.store.files import write_text_atomically

    write_text_atomically(path, json.dumps(record, indent=1) + "\n")
