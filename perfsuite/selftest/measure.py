"""Measure the measurer: how accurate and how costly perfsuite's timings are, and how often its gate errs.

`perfsuite selftest --device cpu|cuda` measures, on one device:

- accuracy: the suite's median round of a case (pytest-benchmark's round loop around
  `PreparedCase.timed_step`) against independent references for the same step:
  `torch.utils.benchmark.Timer` (single calls, and `blocked_autorange`); on CUDA also CUDA events
  around each step and the GPU time torch.profiler records (summed, and from a step's first GPU
  activity to its last);
- overhead: what the harness adds to every timed round, on a near-empty step;
- false alarms and detection: K separate processes each time the same cheap cases the way the runner
  does (`perfsuite.run.runner.run_case`: warm-up, reference workload before and after, pytest-benchmark's
  rounds), plus a chain of 20 matmul blocks with 1, 2, 3, 5 or 10 extra blocks, a slowdown of known
  size. Every ordered pair of processes (i as baseline, j as current) is judged by the gate
  (`perfsuite.judge.verdicts.judge` on the entry `perfsuite.store.baselines.entry_from_result` stores) and by
  pytest-benchmark's `--benchmark-compare-fail=median:10%` rule; the same pairs are judged again at
  other bands, without the reference workload, and with 2 or 3 processes pooled per side;
- an experiment the runner does not do: some cases timed with a reference round before every round.

Measuring runs in subprocesses (`python -m perfsuite.selftest.measure worker|probe`), so every repeat pays the
between-process noise the gate meets in practice. The analysis below the measuring code is pure: it
takes the workers' records and returns counts, so a JSON file can be re-analysed and rendered anywhere.
Seconds inside; rates are fractions.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from perfsuite.judge.stats import (
    DEFAULT_DECISION,
    DecisionConfig,
    TimeOutcome,
    compare_times,
    drift_factor,
    p_value_beyond,
)
from perfsuite.judge.verdicts import DEFAULT_TOLERANCE, judge
from perfsuite.matrix.cases import Case
from perfsuite.records import CaseResult
from perfsuite.run import devices
from perfsuite.store.baselines import MAX_STORED_ROUNDS, entry_from_result
from perfsuite.workloads import Workload, get_workload, register_workload

SCHEMA = "perfsuite-selftest"
SCHEMA_VERSION = 1

CHAIN_BASE_BLOCKS = 20
SLOWDOWN_EXTRA_BLOCKS = (1, 2, 3, 5, 10)
# Side of the square matmuls: about 1 ms for the 20 blocks (50 µs a block) on each device (CPU: one thread).
CHAIN_SIDE = {"cpu": 128, "cuda": 1024}
CHAIN_NAME = "matmul-chain"
BANDS = (0.05, 0.10, 0.15, 0.20, 0.25, 0.30)
PROCESS_REPEATS = (2, 3)
# Rounds are stored like the baseline store does (4 significant figures): the gate sees the same numbers.
STORED_SIGNIFICANT_FIGURES = 4
ONE_MS_S = 1e-3


@dataclass(frozen=True)
class SelftestPlan:
    """What one selftest run measures and within which limits.

    `processes` is K, the separate processes that each time every case; `max_time_s` is
    pytest-benchmark's --benchmark-max-time for every case (its default is 1.0); `budget_s` bounds the
    whole run: no further process is started when it would not finish in time. `threads` sets
    torch.set_num_threads in every process (None: torch's default, as the suite runs); `cases` keeps
    only the named cases (None: all of them). `interleaved` names cases also timed in a variant with a
    reference round before every round (an experiment, see `measure_interleaved`). `contention` starts
    that many bursty busy processes beside the measurement, a busy machine made on purpose.
    """

    device: str
    processes: int
    max_time_s: float
    budget_s: float
    chain_side: int
    warmup_steps: int = 3
    repeat_pairs: int = 110
    seed: int = 0
    threads: int | None = None
    cases: tuple[str, ...] | None = None
    interleaved: tuple[str, ...] = ()
    contention: int = 0

    @property
    def file_name(self) -> str:
        """`selftest-<device>.json`, with `-threads<N>` when the thread count was set and `-contended<N>`
        with busy processes added."""
        suffix = "" if self.threads is None else f"-threads{self.threads}"
        suffix += f"-contended{self.contention}" if self.contention else ""
        return f"selftest-{self.device}{suffix}.json"

    def keeps(self, name: str) -> bool:
        """Whether the plan measures the case called `name`."""
        return self.cases is None or name in self.cases


def plan_from_dict(values: Mapping[str, Any]) -> SelftestPlan:
    """The plan stored in a selftest document (JSON lists back to tuples)."""
    cases = values.get("cases")
    return SelftestPlan(**{
        **values, "cases": None if cases is None else tuple(cases), "interleaved": tuple(values.get("interleaved", ())),
    })


def default_plan(device: str) -> SelftestPlan:
    """The plan `perfsuite selftest --device DEVICE` runs: up to 15 processes within 11 minutes on the
    CPU, with the interleaved-reference experiment; 11 processes and 0.25 s of rounds per case on CUDA,
    to finish within 150 s on one GPU."""
    if device == "cuda":
        return SelftestPlan("cuda", processes=11, max_time_s=0.25, budget_s=140.0, chain_side=CHAIN_SIDE["cuda"])
    if device == "cpu":
        return SelftestPlan(
            "cpu", processes=15, max_time_s=1.0, budget_s=660.0, chain_side=CHAIN_SIDE["cpu"], repeat_pairs=60,
            interleaved=(CHAIN_NAME, f"{CHAIN_NAME}+3", "resnet18-infer-bs4-smoke", "resnet18-train-bs4-smoke"),
        )
    raise ValueError(f"perfsuite selftest measures cpu or cuda, not {device!r}")


# --- the workloads: a matmul chain with a known amount of extra work ---------------------------------


class MatmulChain(torch.nn.Module):
    """`blocks` identical blocks `x = x @ weight`, `weight` a fixed orthogonal side x side matrix.

    Each block is the same work (2 * rows * side**2 FLOPs), so 20 + k blocks take (20 + k) / 20 as long as
    20 blocks: a slowdown of known size. The orthogonal weight keeps the values' norm constant, so no
    block slows down on overflow or denormals.
    """

    def __init__(self, side: int, blocks: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(_orthogonal(side).clone(), requires_grad=False)
        self.blocks = blocks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.blocks):
            x = x @ self.weight
        return x


@functools.cache
def _orthogonal(side: int) -> torch.Tensor:
    # One QR per process and side: a 1024x1024 QR costs a noticeable part of a second on the host.
    orthogonal, _ = torch.linalg.qr(torch.randn(side, side, generator=torch.Generator().manual_seed(0)))
    return orthogonal


_CHAIN_WORKLOADS: dict[tuple[int, int], Workload] = {}


def chain_workload(blocks: int, side: int) -> Workload:
    """The registered workload `selftest-chain<blocks>x<side>`: one infer step is `blocks` matmul blocks on
    inputs of `side` rows (its batch size)."""
    key = (blocks, side)
    if key not in _CHAIN_WORKLOADS:
        _CHAIN_WORKLOADS[key] = register_workload(Workload(
            name=f"selftest-chain{blocks}x{side}",
            build_module=lambda profile: MatmulChain(side, blocks),
            make_inputs=lambda profile, batch_size: torch.randn(
                batch_size, side, generator=torch.Generator().manual_seed(1)
            ),
            batch_sizes={"smoke": (side,), "standard": (side,)},
            description=f"{blocks} blocks of a {side}x{side} matmul (perfsuite selftest)",
        ))
    return _CHAIN_WORKLOADS[key]


@dataclass(frozen=True)
class SelftestCase:
    """One case the selftest times: `name` is how the report calls it; `extra_blocks` > 0 marks the chain
    slowed by that many blocks, judged against the plain chain as if a change had made it slower;
    `interleaved` times it with a reference round before every round instead of the runner's way."""

    name: str
    case: Case
    extra_blocks: int = 0
    interleaved: bool = False

    @property
    def nominal_slowdown(self) -> float:
        """The extra work as a fraction of the plain chain's: 3 extra blocks on 20 are 0.15."""
        return self.extra_blocks / CHAIN_BASE_BLOCKS


def chain_case(device: str, side: int, extra_blocks: int = 0) -> SelftestCase:
    """The plain matmul chain (`extra_blocks` = 0) or the chain slowed by `extra_blocks` blocks."""
    blocks = CHAIN_BASE_BLOCKS + extra_blocks
    name = CHAIN_NAME if extra_blocks == 0 else f"{CHAIN_NAME}+{extra_blocks}"
    workload = chain_workload(blocks, side)
    return SelftestCase(name, Case(device, "fp32", workload.name, side, "infer", "smoke"), extra_blocks)


def model_case(device: str, mode: str, batch_size: int = 4, profile: str = "smoke") -> SelftestCase:
    """ResNet18 from perfsuite.workloads in `mode`, e.g. `resnet18-infer-smoke`."""
    suffix = "" if profile == "standard" else f"-{profile}"
    return SelftestCase(f"resnet18-{mode}-bs{batch_size}{suffix}", Case(device, "fp32", "resnet18", batch_size, mode,
                                                                         profile))


INTERLEAVED_SUFFIX = "~interleaved"


def worker_cases(plan: SelftestPlan) -> tuple[SelftestCase, ...]:
    """What every process times: the unchanged cheap cases, then the slowed chains (those the plan keeps),
    then the interleaved variants the plan names."""
    device, side = plan.device, plan.chain_side
    cases = (chain_case(device, side), model_case(device, "infer"), model_case(device, "train"))
    cases += tuple(chain_case(device, side, k) for k in SLOWDOWN_EXTRA_BLOCKS)
    kept = tuple(c for c in cases if plan.keeps(c.name))
    return kept + tuple(
        SelftestCase(c.name + INTERLEAVED_SUFFIX, c.case, c.extra_blocks, interleaved=True)
        for c in kept if c.name in plan.interleaved
    )


def accuracy_cases(plan: SelftestPlan) -> tuple[SelftestCase, ...]:
    """The cases whose timing is checked against a reference (those the plan keeps); on CUDA also a
    standard-size ResNet18, which keeps the GPU busy where the smoke sizes wait on kernel launches."""
    device, side = plan.device, plan.chain_side
    cases = (chain_case(device, side), model_case(device, "infer"), model_case(device, "train"))
    if device == "cuda":
        cases += (model_case(device, "infer", 32, "standard"),)
    return tuple(c for c in cases if plan.keeps(c.name))


# --- measuring inside one process -------------------------------------------------------------------


class _SilentLogger:
    """pytest-benchmark's fixture logs calibration details; outside pytest nobody reads them."""

    def debug(self, *args: Any, **kwargs: Any) -> None:
        pass

    info = warning = error = debug


def benchmark_fixture(name: str, max_time_s: float) -> Any:
    """pytest-benchmark's `benchmark` fixture outside a pytest session, with its command-line defaults
    (perf_counter, at least 5 rounds, 5 µs minimum round, no warm-up on CPython) except `max_time_s`."""
    from pytest_benchmark.fixture import BenchmarkFixture
    from pytest_benchmark.timers import default_timer
    from pytest_benchmark.utils import NameWrapper

    options = {
        # Releases before 5.2 read the node id from `_nodeid` (as pytest items have it), later ones from `nodeid`.
        "node": SimpleNamespace(name=name, nodeid=f"perfsuite-selftest::{name}", _nodeid=f"perfsuite-selftest::{name}"),
        "disable_gc": False, "timer": NameWrapper(default_timer), "min_rounds": 5, "min_time": 0.000005,
        "max_time": max_time_s, "precision": None, "confidence": 0.99, "warmup": False,
        "warmup_iterations": 100000, "calibration_precision": 10, "add_stats": lambda stats: None,
        "logger": _SilentLogger(), "warner": lambda *args, **kwargs: None, "disabled": False, "cprofile": False,
        "cprofile_loops": None, "cprofile_dump": None,
    }
    # The constructor's arguments differ between pytest-benchmark releases; pass the ones this one takes.
    accepted = inspect.signature(BenchmarkFixture).parameters
    return BenchmarkFixture(**{key: value for key, value in options.items() if key in accepted})


def _significant(values: Sequence[float], figures: int = STORED_SIGNIFICANT_FIGURES) -> list[float]:
    return [float(f"{v:.{figures}g}") for v in values]


def measure_cases(
    device: str, cases: Sequence[SelftestCase], max_time_s: float, warmup_steps: int, order_seed: int
) -> list[dict[str, Any]]:
    """Time each case the way the runner does (`perfsuite.run.runner.run_case`), in an order shuffled by
    `order_seed`, so no case always runs first or last in its process. One record per case."""
    from perfsuite.run.runner import run_case

    order = list(cases)
    random.Random(order_seed).shuffle(order)
    records = []
    for position, selftest_case in enumerate(order):
        fixture = benchmark_fixture(selftest_case.case.benchmark_id, max_time_s)
        start_s = time.perf_counter()
        if selftest_case.interleaved:
            figures = measure_interleaved(fixture, selftest_case.case, max_time_s, warmup_steps)
        else:
            figures = run_case(fixture, selftest_case.case, warmup_steps=warmup_steps)
        measure_wall_s = time.perf_counter() - start_s
        records.append({
            "name": selftest_case.name,
            "benchmark_id": selftest_case.case.benchmark_id,
            "extra_blocks": selftest_case.extra_blocks,
            "position": position,
            "batch_size": selftest_case.case.batch_size,
            "mode": selftest_case.case.mode,
            "profile": selftest_case.case.profile,
            "model": selftest_case.case.model,
            "round_times_s": _significant(figures["round_times_s"]),
            "reference_round_times_s": _significant(figures["reference_round_times_s"]),
            "pytest_benchmark_iterations": fixture.stats.iterations,
            "measure_wall_s": measure_wall_s,
            "config_digest": figures["config_digest"],
            "memory_figure": figures["memory_figure"],
            "memory_bytes": figures["memory_bytes"],
            "flops_per_step": figures["flops_per_step"],
            "event_median_s": figures.get("event_median_s"),
            "reference_interleaved": selftest_case.interleaved,
        })
    return records


INTERLEAVED_REFERENCE_MATMULS = 1


def measure_interleaved(fixture: Any, case: Case, max_time_s: float, warmup_steps: int) -> dict[str, Any]:
    """An experiment the runner does not do: time `case` with one reference round (a single 256x256
    matmul, cheap beside a 1 ms step) right before every timed round, through pytest-benchmark's
    pedantic mode and its untimed `setup`. The reference then sees the same moments of the machine as
    the rounds, where the runner's 10 rounds before and after see others. Rounds: as many as fit in
    `max_time_s`, at least 5. Returns the figures `measure_cases` stores; memory is not measured."""
    from perfsuite.run.runner import REFERENCE_SIDE
    from perfsuite.run.steps import prepare_case

    prepared = prepare_case(case, get_workload(case.model))
    try:
        step_times_s = []
        for _ in range(max(warmup_steps, 1)):
            start_s = time.perf_counter()
            prepared.timed_step()
            step_times_s.append(time.perf_counter() - start_s)
        generator = torch.Generator().manual_seed(0)
        matrix = (torch.randn(REFERENCE_SIDE, REFERENCE_SIDE, generator=generator) / REFERENCE_SIDE**0.5)
        matrix = matrix.to(case.device)
        reference_times_s: list[float] = []

        def reference_round() -> None:
            devices.synchronize(case.device)
            start_s = time.perf_counter()
            product = matrix
            for _ in range(INTERLEAVED_REFERENCE_MATMULS):
                product = product @ matrix
            devices.synchronize(case.device)
            reference_times_s.append(time.perf_counter() - start_s)

        rounds = max(5, math.ceil(max_time_s / min(step_times_s)))
        fixture.pedantic(prepared.timed_step, setup=reference_round, rounds=rounds, iterations=1)
        return {
            "round_times_s": list(fixture.stats.stats.data), "reference_round_times_s": reference_times_s,
            "config_digest": prepared.config_digest, "memory_figure": devices.memory_figure_name(case.device),
            "memory_bytes": None, "flops_per_step": None,
        }
    finally:
        prepared.close()


def _torch_timer(run_step: Callable[[], object]) -> Any:
    from torch.utils.benchmark import Timer

    # As many threads as the suite runs with: the Timer's own default is one thread.
    return Timer(stmt="run_step()", globals={"run_step": run_step}, num_threads=torch.get_num_threads())


def timer_blocked_s(run_step: Callable[[], object], min_run_time_s: float) -> float:
    """torch.utils.benchmark.Timer.blocked_autorange's median: the median over blocks of each block's
    mean time per call (a block runs the step many times back to back)."""
    return float(_torch_timer(run_step).blocked_autorange(min_run_time=min_run_time_s).median)


def timer_per_call_s(run_step: Callable[[], object], calls: int) -> float:
    """The median over `calls` single calls timed by torch.utils.benchmark.Timer (`timeit(number=1)`): an
    independent timer with the suite's statistic, the median of single steps."""
    timer = _torch_timer(run_step)
    return statistics.median(float(timer.timeit(number=1).median) for _ in range(calls))


def profiler_gpu_times_s(run_step: Callable[[], object], steps: int) -> dict[str, float | None]:
    """GPU time of one CUDA step from torch.profiler, over `steps` steps each followed by a synchronize.

    `kernel_s`: the summed duration of every GPU activity (kernels, copies, sets) divided by `steps`: the
    time the GPU was busy. `span_s`: the median over steps of last GPU end - first GPU start within the
    step (busy time plus the gaps between kernels); None when steps cannot be told apart in the trace.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    prefix = "perfsuite-selftest-step-"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for index in range(steps):
            with record_function(f"{prefix}{index}"):
                run_step()
                torch.cuda.synchronize()
    events = list(profiler.events())
    gpu = [
        e for e in events
        if e.device_type == DeviceType.CUDA and not e.name.startswith(prefix)
        and not getattr(e, "is_user_annotation", False)
    ]
    windows = [e.time_range for e in events if e.device_type == DeviceType.CPU and e.name.startswith(prefix)]
    kernel_s = sum(e.time_range.end - e.time_range.start for e in gpu) / 1e6 / steps
    spans_s = []
    for window in windows:
        inside = [e.time_range for e in gpu if window.start <= e.time_range.start <= window.end]
        if inside:
            spans_s.append((max(r.end for r in inside) - min(r.start for r in inside)) / 1e6)
    span_s = statistics.median(spans_s) if len(spans_s) == steps else None
    return {"kernel_s": kernel_s if gpu else None, "span_s": span_s}


def measure_accuracy(
    selftest_case: SelftestCase, max_time_s: float, warmup_steps: int, alternations: int = 3
) -> dict[str, Any]:
    """The suite's median round of one case and the references for the same prepared step, measured in
    turn `alternations` times (so a slow spell of the machine hits both); each figure is the median of its
    turns. On CUDA, CUDA events replace blocked_autorange in each turn, and torch.profiler's GPU times
    (which host noise does not move) are taken once, over 20 steps, after the turns."""
    from perfsuite.run.steps import prepare_case

    case = selftest_case.case
    prepared = prepare_case(case, get_workload(case.model))
    try:
        for _ in range(warmup_steps):
            prepared.timed_step()
        cuda = case.device == "cuda"
        third = "events_s" if cuda else "timer_blocked_s"
        turns: dict[str, list[float]] = {"suite_s": [], "timer_per_call_s": [], third: []}
        for _ in range(alternations):
            fixture = benchmark_fixture(case.benchmark_id, max_time_s)
            fixture(prepared.timed_step)
            turns["suite_s"].append(float(fixture.stats.stats.median))
            calls = max(5, min(200, int(max_time_s / max(turns["suite_s"][-1], 1e-6))))
            turns["timer_per_call_s"].append(timer_per_call_s(prepared.run_step, calls))
            if cuda:
                times_s = devices.time_with_events_s(prepared.run_step, "cuda", min(calls, 100))
                turns["events_s"].append(statistics.median(times_s))
            else:
                turns["timer_blocked_s"].append(timer_blocked_s(prepared.run_step, max_time_s))
        gpu = profiler_gpu_times_s(prepared.run_step, steps=20) if cuda else {}
    finally:
        prepared.close()
    medians = {key: statistics.median(values) for key, values in turns.items()}
    profiled = {f"profiler_{key}": value for key, value in gpu.items()}
    return {"name": selftest_case.name, "benchmark_id": case.benchmark_id, **medians, **profiled, "turns": turns}


def measure_overhead(device: str, rounds: int = 2000) -> dict[str, Any]:
    """What the harness adds to each timed round, in seconds, from near-empty steps.

    `harness_round_s` is the median round pytest-benchmark records for `PreparedCase.timed_step` around
    a step that does nothing: its timer pair, its runner's call, perfsuite's wrapper and the device
    synchronize; a real step's round carries the same cost. The parts are timed alone too, and a step of
    one tiny device operation shows the cost of waiting for real (if tiny) device work.
    """
    from perfsuite.run.steps import PreparedCase

    case = Case(device, "fp32", "selftest-empty", 1, "infer", "smoke")
    empty = PreparedCase(case, run_step=lambda: None, parameter_count=0, config_digest="")
    scalar = torch.zeros(1, device=device)
    tiny = PreparedCase(case, run_step=lambda: scalar.add_(1), parameter_count=0, config_digest="")

    def rounds_s(step: Callable[[], object]) -> tuple[list[float], float]:
        fixture = benchmark_fixture("overhead", 1.0)
        start_s = time.perf_counter()
        fixture.pedantic(step, rounds=rounds, iterations=1, warmup_rounds=50)
        return list(fixture.stats.stats.data), (time.perf_counter() - start_s) / (rounds + 50)

    def bare_s(step: Callable[[], object]) -> float:
        times = []
        for _ in range(rounds):
            start_s = time.perf_counter()
            step()
            times.append(time.perf_counter() - start_s)
        return statistics.median(times)

    empty_rounds_s, empty_wall_per_round_s = rounds_s(empty.timed_step)
    tiny_rounds_s, _ = rounds_s(tiny.timed_step)
    result = {
        "harness_round_s": statistics.median(empty_rounds_s),
        "harness_round_p90_s": float(np.quantile(empty_rounds_s, 0.9)),
        "harness_wall_per_round_s": empty_wall_per_round_s,
        "timer_pair_s": bare_s(lambda: None),
        "synchronize_idle_s": bare_s(lambda: devices.synchronize(device)),
        "tiny_step_round_s": statistics.median(tiny_rounds_s),
        "rounds": rounds,
    }
    if devices.has_events(device):
        result["tiny_step_event_s"] = statistics.median(devices.time_with_events_s(tiny.run_step, device, 200))
    result["harness_fraction_of_1ms"] = result["harness_round_s"] / ONE_MS_S
    return result


def probe(plan: SelftestPlan) -> dict[str, Any]:
    """Accuracy and overhead, in this process; a case that fails is recorded with its error, not raised."""
    accuracy = []
    for selftest_case in accuracy_cases(plan):
        try:
            accuracy.append(measure_accuracy(selftest_case, plan.max_time_s, plan.warmup_steps))
        except Exception as error:  # one failing reference must not lose the others' figures
            accuracy.append({"name": selftest_case.name, "error": f"{type(error).__name__}: {error}"})
        devices.free_cached_memory(plan.device)
    try:
        overhead: dict[str, Any] = measure_overhead(plan.device)
    except Exception as error:
        overhead = {"error": f"{type(error).__name__}: {error}"}
    return {
        "machine": devices.machine_fingerprint(),
        "torch_threads": torch.get_num_threads(),
        "accuracy": accuracy,
        "overhead": overhead,
    }


def worker(plan: SelftestPlan, index: int) -> dict[str, Any]:
    """One process's measurements of every worker case."""
    load_before = os.getloadavg()
    records = measure_cases(
        plan.device, worker_cases(plan), plan.max_time_s, plan.warmup_steps,
        order_seed=plan.seed * 1000 + index,
    )
    return {
        "index": index,
        "torch_threads": torch.get_num_threads(),
        "load_average_before": load_before[0],
        "load_average_after": os.getloadavg()[0],
        "records": records,
    }


# --- the whole run: subprocesses within a time budget -----------------------------------------------


class SelftestError(Exception):
    """A selftest subprocess failed; the message holds the end of its output."""


def _run_subprocess(role: str, plan: SelftestPlan, index: int, timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="perfsuite-selftest-") as directory:
        out = Path(directory) / "out.json"
        command = [
            sys.executable, "-m", "perfsuite.selftest.measure", role, "--plan", json.dumps(asdict(plan)),
            "--index", str(index), "--out", str(out),
        ]
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=max(timeout_s, 10.0))
        except subprocess.TimeoutExpired:
            raise SelftestError(f"{role} {index} did not finish within {timeout_s:.0f} s") from None
        if completed.returncode != 0 or not out.exists():
            tail = (completed.stdout + completed.stderr).strip()[-2000:]
            raise SelftestError(f"{role} {index} exited with status {completed.returncode}: {tail}")
        return json.loads(out.read_text())


def run_selftest(plan: SelftestPlan, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure accuracy and overhead in one subprocess, then time the worker cases in up to
    `plan.processes` subprocesses one after another, then analyse. Returns the JSON-ready document.

    No process is started that would end the run past `plan.budget_s` (the analysis's share included);
    the document says how many ran.
    """
    started = time.monotonic()
    started_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_before = os.getloadavg()
    busy = _start_contention(plan.contention, plan.seed)
    try:
        probed, workers, failures = _measure(plan, started, progress)
    finally:
        _stop(busy)
    measured_s = time.monotonic() - started
    machine = probed.get("machine", {})
    time_left_s = plan.budget_s - measured_s
    progress(f"analysing {len(workers)} processes")
    analysis = analyse(
        workers, plan.device, machine_of(machine), torch.__version__, plan.repeat_pairs, plan.seed,
        repeats_time_left_s=time_left_s,
    )
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "device": plan.device,
        "plan": asdict(plan),
        "started_at": started_at,
        "wall_s": time.monotonic() - started,
        "measure_wall_s": measured_s,
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before[0],
        "load_average_after": os.getloadavg()[0],
        "torch_version": torch.__version__,
        "machine": machine,
        "probe": probed,
        "workers": workers,
        "worker_failures": failures,
        "analysis": analysis,
    }


# A busy process of another user: pure-Python work in bursts of 0.2-3 s with pauses as long between them.
_BUSY_PROCESS = """
import random, sys, time
rng = random.Random(int(sys.argv[1]))
while True:
    end_s = time.monotonic() + rng.uniform(0.2, 3.0)
    while time.monotonic() < end_s:
        sum(i * i for i in range(10000))
    time.sleep(rng.uniform(0.2, 3.0))
"""


def _start_contention(count: int, seed: int) -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-c", _BUSY_PROCESS, str(seed * 100 + index)]) for index in range(count)
    ]


def _stop(processes: Sequence[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=30)


def _measure(
    plan: SelftestPlan, started: float, progress: Callable[[str], None]
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The probe, then the workers while the budget allows: (probe, workers, failures)."""
    progress(f"selftest on {plan.device}: accuracy and overhead")
    try:
        probed = _run_subprocess("probe", plan, 0, plan.budget_s)
    except SelftestError as error:
        probed = {"error": str(error)}
        progress(f"  probe failed: {error}")
    workers: list[dict[str, Any]] = []
    failures: list[str] = []
    worker_walls_s: list[float] = []
    # Judging one pair of every case: 10 ms each on a current server core until measured on this machine.
    judge_all_cases_s = 0.01 * len(worker_cases(plan))
    for index in range(plan.processes):
        elapsed_s = time.monotonic() - started
        if len(workers) == 2:
            judge_all_cases_s = _time_judgements_s(workers, plan.device)
        if worker_walls_s:
            expected_s = max(worker_walls_s) * 1.1
            analysis_s = judge_all_cases_s * (len(workers) + 1) * len(workers)
            if elapsed_s + expected_s + analysis_s > plan.budget_s:
                progress(f"  stopping after {len(workers)} processes: the time budget of {plan.budget_s:.0f} s")
                break
        start_s = time.monotonic()
        try:
            workers.append(_run_subprocess("worker", plan, index, plan.budget_s - elapsed_s))
        except SelftestError as error:
            failures.append(str(error))
            progress(f"  process {index} failed: {error}")
        worker_walls_s.append(time.monotonic() - start_s)
        progress(f"  process {index + 1}/{plan.processes}: {worker_walls_s[-1]:.1f} s")
    return probed, workers, failures


def _time_judgements_s(workers: Sequence[Mapping[str, Any]], device: str) -> float:
    """Seconds the analysis spends on one pair of processes: one pair of every case judged, timed on the
    first two processes."""
    table = records_by_name(workers)
    first, second = workers[0]["index"], workers[1]["index"]
    start_s = time.perf_counter()
    for base_name, current_name in comparison_sets(sorted(table)).values():
        if first in table.get(base_name, {}) and second in table[current_name]:
            judge_records(table[base_name][first], table[current_name][second], {}, device, torch.__version__)
    return time.perf_counter() - start_s


def machine_of(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a fingerprint the gate compares (CPU model, accelerator), for judging stored records."""
    return {"cpu_model": fingerprint.get("cpu_model"), "accelerator_name": fingerprint.get("accelerator_name")}


# --- analysis: pure functions on the workers' records -----------------------------------------------


def ordered_pairs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Every (baseline, current) pair of two different processes: K processes give K * (K - 1) pairs."""
    return [(baseline, current) for baseline in indices for current in indices if baseline != current]


def disjoint_group_pairs(
    indices: Sequence[int], group_size: int, count: int, seed: int
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Up to `count` (baseline group, current group) pairs of `group_size` processes each, the two groups
    sharing no process; every such pair when there are no more than `count`, else a seeded sample of
    distinct pairs."""
    groups = list(itertools.combinations(sorted(indices), group_size))
    every = [(b, c) for b in groups for c in groups if not set(b) & set(c)]
    if len(every) <= count:
        return every
    rng = random.Random(seed)
    return sorted(rng.sample(every, count))


def pytest_benchmark_fails(current_median_s: float, baseline_median_s: float, threshold_percent: float) -> bool:
    """pytest-benchmark's `--benchmark-compare-fail=median:N%`: fails when
    current / baseline * 100 - 100 > N (its PercentageRegressionCheck)."""
    return current_median_s / baseline_median_s * 100 - 100 > threshold_percent


def outcome_by_rule(
    interval: tuple[float, float], p_value_slower: float, p_value_faster: float, tolerance: float, alpha: float
) -> TimeOutcome:
    """The gate's rule on one ratio (docs/gate.md): regressed when the interval lies wholly above
    1 + tolerance and the rank test's p-value is below alpha; improved is the mirror image."""
    if interval[0] > 1 + tolerance and p_value_slower < alpha:
        return "regressed"
    if interval[1] < 1 - tolerance and p_value_faster < alpha:
        return "improved"
    return "unchanged"


def outcomes_at_bands(
    current_s: np.ndarray,
    baseline_s: np.ndarray,
    raw_interval: tuple[float, float],
    drift: float | None,
    bands: Sequence[float],
    config: DecisionConfig = DEFAULT_DECISION,
) -> dict[float, dict[str, TimeOutcome | None]]:
    """The gate's outcome at each band, reusing one bootstrap interval of the raw ratio (it does not depend
    on the band; only the rank test does). Per band: `raw` (no normalisation), `normalised` (by `drift`;
    None without one) and `gate` (the configured drift rule's combination, as `compare_times` does)."""
    alpha = config.one_sided_alpha
    outcomes: dict[float, dict[str, TimeOutcome | None]] = {}
    for band in bands:
        raw = outcome_by_rule(
            raw_interval, p_value_beyond(current_s, baseline_s, 1 + band, slower=True),
            p_value_beyond(current_s, baseline_s, 1 - band, slower=False), band, alpha,
        )
        normalised = None
        gate = raw
        if drift is not None:
            normalised_s = current_s / drift
            normalised = outcome_by_rule(
                (raw_interval[0] / drift, raw_interval[1] / drift),
                p_value_beyond(normalised_s, baseline_s, 1 + band, slower=True),
                p_value_beyond(normalised_s, baseline_s, 1 - band, slower=False), band, alpha,
            )
            gate = normalised if config.drift_rule == "normalised" or normalised == raw else "unchanged"
        outcomes[band] = {"gate": gate, "raw": raw, "normalised": normalised}
    return outcomes


def case_result_of(
    record: Mapping[str, Any], device: str, torch_version: str, as_record: Mapping[str, Any]
) -> CaseResult:
    """The gate's view of a stored record, under the identity (id, digest) of `as_record`: a slowed chain is
    judged as the plain chain that became slower."""
    median_s = float(np.median(record["round_times_s"]))
    return CaseResult(
        benchmark_id=as_record["benchmark_id"], device=device, dtype="fp32", model=as_record["model"],
        batch_size=as_record["batch_size"], mode=as_record["mode"], profile=as_record["profile"],
        round_times_s=tuple(record["round_times_s"]), samples_per_s=as_record["batch_size"] / median_s,
        memory_figure=record["memory_figure"], memory_bytes=record["memory_bytes"],
        flops_per_step=as_record["flops_per_step"], tflops_per_s=None, config_digest=as_record["config_digest"],
        torch_version=torch_version, reference_round_times_s=tuple(record["reference_round_times_s"]),
    )


def pooled_record(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One record of several processes' runs of the same case: rounds and reference rounds concatenated in
    process order, memory the largest, walls summed (what running the case in each process costs)."""
    first = records[0]
    memory = [r["memory_bytes"] for r in records if r["memory_bytes"] is not None]
    return {
        **first,
        "round_times_s": [t for r in records for t in r["round_times_s"]],
        "reference_round_times_s": [t for r in records for t in r["reference_round_times_s"]],
        "memory_bytes": max(memory) if memory else None,
        "measure_wall_s": sum(r["measure_wall_s"] for r in records),
    }


_RECORDED_AT = datetime(2000, 1, 1, tzinfo=timezone.utc)


def judge_records(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    machine: Mapping[str, Any],
    device: str,
    torch_version: str,
    bands: Sequence[float] = BANDS,
) -> dict[str, Any]:
    """Judge `current` against `baseline` as the gate would (the baseline stored as the store stores it,
    the default band and rule), and again at every band; with pytest-benchmark's rule beside.

    Returns the verdict's status, memory status, ratios, `judge_s` (the gate's decision time) and
    `bands` -> {band: {gate, raw, normalised, pytest_benchmark}}.
    """
    current_result = case_result_of(current, device, torch_version, baseline)
    baseline_result = case_result_of(baseline, device, torch_version, baseline)
    entry = entry_from_result(
        baseline_result, commit=None, recorded_at=_RECORDED_AT, tolerance=DEFAULT_TOLERANCE,
        memory_tolerance=DEFAULT_TOLERANCE,
    )
    start_s = time.perf_counter()
    verdict = judge(current_result, entry, machine, machine)
    judge_s = time.perf_counter() - start_s
    drift = drift_factor(current_result.reference_median_s, entry.reference_median_s)
    current_median_s = float(np.median(current["round_times_s"]))
    baseline_median_s = float(np.median(baseline["round_times_s"]))
    bands_out: dict[str, dict[str, Any]] = {}
    if verdict.ci_low is not None:
        scale = 1.0 if drift is None else drift  # the verdict's interval is the normalised one when drift is known
        by_band = outcomes_at_bands(
            np.asarray(current_result.round_times_s), np.asarray(entry.round_times_s),
            (verdict.ci_low * scale, verdict.ci_high * scale), drift, bands,
        )
        for band, outcomes in by_band.items():
            bands_out[_band_key(band)] = {
                **outcomes,
                "pytest_benchmark": pytest_benchmark_fails(current_median_s, baseline_median_s, band * 100),
            }
        per_round = per_round_outcomes(baseline, current, bands)
        for band, outcome in per_round.items():
            bands_out[_band_key(band)]["per_round"] = outcome
    return {
        "status": verdict.status,
        "memory_status": verdict.memory_status,
        "ratio": verdict.ratio,
        "normalised_ratio": verdict.normalised_ratio,
        "median_ratio_of_all_rounds": current_median_s / baseline_median_s,
        "judge_s": judge_s,
        "bands": bands_out,
    }


def _band_key(band: float) -> str:
    return f"{band:.2f}"


def per_round_normalised_s(record: Mapping[str, Any]) -> np.ndarray | None:
    """Each round divided by the reference round timed right before it: the rounds in units of the
    machine's speed at that moment. None unless the record's reference was interleaved, one per round."""
    rounds, references = record["round_times_s"], record["reference_round_times_s"]
    if not record.get("reference_interleaved") or len(rounds) != len(references):
        return None
    return np.asarray(rounds, dtype=float) / np.asarray(references, dtype=float)


def per_round_outcomes(
    baseline: Mapping[str, Any], current: Mapping[str, Any], bands: Sequence[float]
) -> dict[float, TimeOutcome | None]:
    """The gate's rule (without drift) on per-round normalised rounds, at each band; the baseline side
    kept as the store would keep it (at most 200 rounds, evenly spaced, 4 significant figures). Empty
    unless both records interleaved their reference."""
    current_s, baseline_s = per_round_normalised_s(current), per_round_normalised_s(baseline)
    if current_s is None or baseline_s is None:
        return {}
    if len(baseline_s) > MAX_STORED_ROUNDS:
        baseline_s = baseline_s[np.linspace(0, len(baseline_s) - 1, MAX_STORED_ROUNDS).round().astype(int)]
    baseline_s = np.asarray(_significant(baseline_s.tolist()))
    at_default = compare_times(current_s, baseline_s, DEFAULT_TOLERANCE)
    if at_default.ci_low is None:
        return {}
    by_band = outcomes_at_bands(current_s, baseline_s, (at_default.ci_low, at_default.ci_high), None, bands)
    return {band: outcomes["raw"] for band, outcomes in by_band.items()}


def count_outcomes(outcomes: Sequence[str | bool | None]) -> dict[str, int]:
    """How many pairs were called regressed, improved, unchanged; `True` (a failing pytest-benchmark check)
    counts as regressed and `False` as unchanged."""
    counts = {"pairs": len(outcomes), "regressed": 0, "improved": 0, "unchanged": 0}
    for outcome in outcomes:
        key = {True: "regressed", False: "unchanged"}.get(outcome, outcome) if isinstance(outcome, bool) else outcome
        if key in counts:
            counts[key] += 1
    return counts


def flagged_fraction(counts: Mapping[str, int]) -> float | None:
    """The fraction of pairs called regressed; None for no pairs."""
    return counts["regressed"] / counts["pairs"] if counts["pairs"] else None


def summarise_judgements(judgements: Sequence[Mapping[str, Any]], bands: Sequence[float] = BANDS) -> dict[str, Any]:
    """Counts per rule and band over a comparison set's judged pairs, the gate's default verdicts counted
    from the verdicts themselves."""
    by_band = {}
    for band in bands:
        key = _band_key(band)
        judged = [j["bands"][key] for j in judgements if key in j["bands"]]
        by_band[key] = {
            rule: count_outcomes([j[rule] for j in judged if j.get(rule) is not None])
            for rule in ("gate", "raw", "normalised", "pytest_benchmark", "per_round")
        }
    ratios = [j["median_ratio_of_all_rounds"] for j in judgements]
    default_key = _band_key(DEFAULT_TOLERANCE)
    mismatches = sum(
        1 for j in judgements if default_key in j["bands"] and j["bands"][default_key]["gate"] != j["status"]
    )
    return {
        "pairs": len(judgements),
        "gate": count_outcomes([j["status"] for j in judgements]),
        "memory": count_outcomes([j["memory_status"] for j in judgements]),
        "by_band": by_band,
        "band_sweep_mismatches_at_default": mismatches,
        "ratio_quantiles": _quantiles(ratios),
        "judge_s_median": statistics.median(j["judge_s"] for j in judgements) if judgements else None,
        "flagged": [
            {"baseline": j["baseline"], "current": j["current"], "ratio": j["ratio"],
             "normalised_ratio": j["normalised_ratio"]}
            for j in judgements if j["status"] == "regressed"
        ],
    }


def _quantiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    q = np.quantile(values, [0.0, 0.05, 0.5, 0.95, 1.0])
    return {"min": float(q[0]), "p5": float(q[1]), "median": float(q[2]), "p95": float(q[3]), "max": float(q[4])}


def records_by_name(workers: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, Mapping[str, Any]]]:
    """name -> process index -> record."""
    table: dict[str, dict[int, Mapping[str, Any]]] = {}
    for process in workers:
        for record in process["records"]:
            table.setdefault(record["name"], {})[process["index"]] = record
    return table


def comparison_sets(names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each comparison set: name -> (baseline case, current case). An unchanged case is compared with
    itself (every flag is a false alarm); a slowed chain `matmul-chain+k` with the plain chain, and
    `matmul-chain+k~interleaved` with `matmul-chain~interleaved`."""
    sets = {}
    for name in names:
        suffix = INTERLEAVED_SUFFIX if name.endswith(INTERLEAVED_SUFFIX) else ""
        base = CHAIN_NAME + suffix if name.startswith(f"{CHAIN_NAME}+") else name
        sets[name] = (base, name)
    return sets


def analyse(
    workers: Sequence[Mapping[str, Any]],
    device: str,
    machine: Mapping[str, Any],
    torch_version: str,
    repeat_pairs: int = 110,
    seed: int = 0,
    repeats_time_left_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Judge every ordered pair of processes for every comparison set, count the outcomes, and estimate
    what pooling the rounds of 2 or 3 processes per side would change.

    The pooled ("process repeats") part is skipped, and marked so, when `repeats_time_left_s` says it
    would not fit (estimated from the time the single pairs took).
    """
    started = clock()
    table = records_by_name(workers)
    if not workers:
        return {"sets": {}, "repeats": None, "processes": 0}
    sets_out: dict[str, Any] = {}
    for set_name, (base_name, current_name) in comparison_sets(sorted(table)).items():
        baselines, currents = table.get(base_name, {}), table[current_name]
        indices = sorted(set(baselines) & set(currents))
        judgements = []
        for b, c in ordered_pairs(indices):
            judged = judge_records(baselines[b], currents[c], machine, device, torch_version)
            judgements.append({"baseline": b, "current": c, **judged})
        sets_out[set_name] = {
            "baseline_case": base_name,
            "extra_blocks": currents[indices[0]]["extra_blocks"] if indices else 0,
            "processes": len(indices),
            **summarise_judgements(judgements),
            "measure_wall_s_median": statistics.median(currents[i]["measure_wall_s"] for i in indices)
            if indices else None,
            "process_medians_s": {str(i): float(np.median(currents[i]["round_times_s"])) for i in indices},
            "within_process_ratio": _within_process_ratios(baselines, currents, indices)
            if base_name != current_name else None,
        }
    pairs_s = clock() - started
    judged_pairs = sum(s["pairs"] for s in sets_out.values())
    repeats = None
    estimate_s = pairs_s / max(judged_pairs, 1) * repeat_pairs * len(sets_out) * len(PROCESS_REPEATS) * 1.5
    if repeats_time_left_s is None or estimate_s <= repeats_time_left_s - pairs_s:
        repeats = analyse_repeats(table, machine, device, torch_version, repeat_pairs, seed)
    return {
        "processes": len(workers),
        "sets": sets_out,
        "repeats": repeats,
        "repeats_skipped_reason": None if repeats is not None else (
            f"not computed within the time budget (estimated {estimate_s:.0f} s); "
            "`perfsuite selftest --analyse FILE` computes it from the file"
        ),
        "analysis_s": clock() - started,
    }


def _within_process_ratios(
    baselines: Mapping[int, Mapping[str, Any]], currents: Mapping[int, Mapping[str, Any]], indices: Sequence[int]
) -> dict[str, float] | None:
    ratios = [
        float(np.median(currents[i]["round_times_s"]) / np.median(baselines[i]["round_times_s"])) for i in indices
    ]
    return _quantiles(ratios)


def analyse_repeats(
    table: Mapping[str, Mapping[int, Mapping[str, Any]]],
    machine: Mapping[str, Any],
    device: str,
    torch_version: str,
    repeat_pairs: int,
    seed: int,
) -> dict[str, Any]:
    """For 2 and 3 processes per side: each set judged on up to `repeat_pairs` pairs of disjoint process
    groups, each side's rounds pooled (the baseline stores the pooled rounds as the store would)."""
    out: dict[str, Any] = {}
    for group_size in PROCESS_REPEATS:
        per_set = {}
        for set_name, (base_name, current_name) in comparison_sets(sorted(table)).items():
            baselines, currents = table.get(base_name, {}), table[current_name]
            indices = sorted(set(baselines) & set(currents))
            judgements = []
            for b_group, c_group in disjoint_group_pairs(indices, group_size, repeat_pairs, seed):
                judged = judge_records(
                    pooled_record([baselines[i] for i in b_group]), pooled_record([currents[i] for i in c_group]),
                    machine, device, torch_version,
                )
                judgements.append({"baseline": list(b_group), "current": list(c_group), **judged})
            summary = summarise_judgements(judgements)
            summary["measure_wall_s_median"] = (
                group_size * statistics.median(currents[i]["measure_wall_s"] for i in indices) if indices else None
            )
            per_set[set_name] = summary
        out[str(group_size)] = per_set
    return out


def reanalyse(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document with its analysis computed again from its workers' records (no time limit)."""
    plan = document["plan"]
    analysis = analyse(
        document["workers"], document["device"], machine_of(document.get("machine", {})), document["torch_version"],
        plan.get("repeat_pairs", 110), plan.get("seed", 0),
    )
    return {**document, "analysis": analysis}


def write_document(document: Mapping[str, Any], path: Path) -> None:
    """Write a selftest document as UTF-8 JSON: indented, with lists of numbers kept on one line."""
    text = json.dumps(document, indent=1, sort_keys=True, allow_nan=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_compact_number_lists(text) + "\n", encoding="utf-8")


def _compact_number_lists(text: str) -> str:
    import re

    return re.sub(
        r"\[\s*(-?[\d.eE+-]+(?:,\s*-?[\d.eE+-]+)*)\s*\]",
        lambda match: "[" + ",".join(part.strip() for part in match.group(1).split(",")) + "]",
        text,
    )


def _main(argv: Sequence[str] | None = None) -> int:
    """The subprocess entry: `python -m perfsuite.selftest.measure worker|probe --plan JSON --index I --out FILE`."""
    parser = argparse.ArgumentParser(prog="python -m perfsuite.selftest.measure", description=_main.__doc__)
    parser.add_argument("role", choices=("worker", "probe"))
    parser.add_argument("--plan", required=True, help="the SelftestPlan as JSON")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    plan = plan_from_dict(json.loads(args.plan))
    if plan.threads is not None:
        torch.set_num_threads(plan.threads)
    result = worker(plan, args.index) if args.role == "worker" else probe(plan)
    Path(args.out).write_text(json.dumps(result, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(_main())

