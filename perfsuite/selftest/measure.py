"""Measure the measurer: how accurate and how costly perfsuite's timings are, and how often its gate errs.

`perfsuite selftest --device cpu|cuda` measures, on one device:

- accuracy: the suite's median round of a case (pytest-benchmark's round loop around
  `PreparedCase.timed_step`) against independent references for the same step:
  `torch.utils.benchmark.Timer` (single calls, and `blocked_autorange`); on CUDA also CUDA events around
  each step and the GPU time torch.profiler records;
- overhead: what the harness adds to every timed round, on a near-empty step;
- runs for the gate: K separate processes each time the same cheap cases with the one measuring path
  (`perfsuite.run.measure.measure`, as a `--perf-processes` worker does), plus a chain of 20 matmul blocks
  with 1, 2, 3, 5 or 10 extra blocks, a slowdown of known size. `perfsuite.selftest.analysis` then judges
  them through the gate's own decision code.

Measuring runs in subprocesses (`python -m perfsuite.selftest.measure worker|probe`), so every repeat pays the
between-process noise the gate meets in practice. Seconds inside; rates are fractions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from perfsuite.records import Case, Run
from perfsuite.run.devices import backend, machine_fingerprint
from perfsuite.run.plan import MeasureSettings, RoundSettings
from perfsuite.run.profiling import cuda_kernel_times_s
from perfsuite.run.wire import run_to_json
from perfsuite.run.worker import standalone_benchmark
from perfsuite.selftest.analysis import analyse
from perfsuite.selftest.plan import SelftestCase, SelftestPlan, accuracy_cases, plan_from_dict, worker_cases
from perfsuite.store.baselines import machine_identity

SCHEMA = "perfsuite-selftest"
SCHEMA_VERSION = 2
# Rounds are kept at 4 significant figures, as the baseline store keeps them.
STORED_SIGNIFICANT_FIGURES = 4
ONE_MS_S = 1e-3


def measure_cases(
    device: str, cases: Sequence[SelftestCase], max_time_s: float, warmup_steps: int, order_seed: int
) -> list[dict[str, Any]]:
    """Time each case with the one measuring path (`perfsuite.run.measure.measure`), in an order shuffled by
    `order_seed`, so no case always runs first or last in its process. One record per case: its name, the slowdown it
    carries and its run."""
    from perfsuite.run.measure import measure
    from perfsuite.run.plan import MeasureSettings

    order = list(cases)
    random.Random(order_seed).shuffle(order)
    records = []
    for position, selftest_case in enumerate(order):
        rounds = RoundSettings(max_time_s=max_time_s)
        fixture = standalone_benchmark(selftest_case.case.benchmark_id, rounds)
        start_s = time.perf_counter()
        run = measure(selftest_case.case, MeasureSettings(warmup_steps), rounds, fixture)
        if not isinstance(run, Run):
            raise RuntimeError(f"{selftest_case.name}: {'no round was timed' if run is None else run.message}")
        document = run_to_json(run)
        document["round_times_s"] = [float(f"{t:.{STORED_SIGNIFICANT_FIGURES}g}") for t in run.round_times_s]
        records.append({
            "name": selftest_case.name,
            "extra_blocks": selftest_case.extra_blocks,
            "position": position,
            "measure_wall_s": time.perf_counter() - start_s,
            "run": document,
        })
    return records


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


def measure_accuracy(
    selftest_case: SelftestCase, max_time_s: float, warmup_steps: int, alternations: int = 3
) -> dict[str, Any]:
    """The suite's step time and its references for the same warm case, measured in turn `alternations` times (so a
    slow spell of the machine hits all of them); each figure is the median of its turns.

    suite_s: the real measuring code (`WarmCase.time_with`, pipelined rounds timed by pytest-benchmark);
    synced_s: one step and a drain per round, the method before pipelined rounds (and the latency figure);
    timer_blocked_s: torch.utils.benchmark.Timer.blocked_autorange, which drains the device at block edges only;
    timer_per_call_s: Timer's single calls. Where torch.profiler times the device's kernels (CUDA), its GPU times
    (which host noise does not move) are taken once, over 20 steps, after the turns."""
    from perfsuite.run.measure import open_case

    case = selftest_case.case
    rounds = RoundSettings(max_time_s=max_time_s)
    warm = open_case(case, MeasureSettings(warmup_steps, count_flops=False), rounds)
    try:
        turns: dict[str, list[float]] = {"suite_s": [], "synced_s": [], "timer_blocked_s": [], "timer_per_call_s": []}
        for _ in range(alternations):
            fixture = standalone_benchmark(case.benchmark_id, rounds)
            warm.time_with(fixture, rounds)
            turns["suite_s"].append(float(fixture.stats.stats.median))
            calls = max(5, min(200, int(max_time_s / max(turns["suite_s"][-1], 1e-6))))
            turns["synced_s"].append(warm.latency_s(calls))
            turns["timer_blocked_s"].append(timer_blocked_s(warm.prepared.run_step, max_time_s))
            turns["timer_per_call_s"].append(timer_per_call_s(warm.prepared.run_step, calls))
        gpu = cuda_kernel_times_s(warm.prepared.run_step, steps=20) if warm.device.profiles_kernels else {}
        steps_per_round = warm.steps_per_round
    finally:
        warm.close()
    medians = {key: statistics.median(values) for key, values in turns.items()}
    profiled = {f"profiler_{key}": value for key, value in gpu.items()}
    return {"name": selftest_case.name, "benchmark_id": case.benchmark_id, "steps_per_round": steps_per_round,
            **medians, **profiled, "turns": turns}


def measure_overhead(device: str, rounds: int = 2000) -> dict[str, Any]:
    """What the harness adds to each timed round, in seconds, from near-empty steps.

    `harness_round_s` is the median round pytest-benchmark records for `PreparedCase.timed_step` around
    a step that does nothing: its timer pair, its runner's call, perfsuite's wrapper and the device
    synchronize; a real step's round carries the same cost. The parts are timed alone too, and a step of
    one tiny device operation shows the cost of waiting for real (if tiny) device work.
    """
    from perfsuite.run.steps import PreparedCase

    case = Case(device, "fp32", "selftest-empty", 1, "infer", "smoke")
    scalar = torch.zeros(1, device=device)
    # Does nothing: returns an existing tensor, as run_step's type asks.
    empty = PreparedCase(case, run_step=lambda: scalar, parameter_count=0, config_digest="")
    tiny = PreparedCase(case, run_step=lambda: scalar.add_(1), parameter_count=0, config_digest="")

    def rounds_s(step: Callable[[], object]) -> tuple[list[float], float]:
        fixture = standalone_benchmark("overhead")
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
        "synchronize_idle_s": bare_s(backend(device).synchronize),
        "tiny_step_round_s": statistics.median(tiny_rounds_s),
        "rounds": rounds,
    }
    event_times_s = backend(device).event_times_s(tiny.run_step, 200)
    if event_times_s is not None:
        result["tiny_step_event_s"] = statistics.median(event_times_s)
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
        backend(plan.device).free_cached_memory()
    try:
        overhead: dict[str, Any] = measure_overhead(plan.device)
    except Exception as error:
        overhead = {"error": f"{type(error).__name__}: {error}"}
    return {
        "machine": machine_fingerprint(),
        "torch_threads": torch.get_num_threads(),
        "accuracy": accuracy,
        "overhead": overhead,
    }


def worker(plan: SelftestPlan, index: int) -> dict[str, Any]:
    """One process's runs of every worker case."""
    load_before = os.getloadavg()
    records = measure_cases(
        plan.device, worker_cases(plan), plan.max_time_s, plan.warmup_steps, order_seed=plan.seed * 1000 + index,
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
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def run_selftest(plan: SelftestPlan, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure accuracy and overhead in one subprocess, then time the worker cases in up to `plan.processes`
    subprocesses one after another, then analyse. Returns the JSON-ready document.

    No process is started that would end the run past `plan.budget_s`; the document says how many ran.
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
    progress(f"analysing {len(workers)} processes")
    analysis = analyse(workers, machine_identity(machine, plan.device), plan.splits, plan.seed)
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
    for index in range(plan.processes):
        elapsed_s = time.monotonic() - started
        if worker_walls_s and elapsed_s + max(worker_walls_s) * 1.1 > plan.budget_s:
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


def reanalyse(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document with its analysis computed again from its workers' runs."""
    plan = plan_from_dict(document["plan"])
    identity = machine_identity(document.get("machine", {}), document["device"])
    return {**document, "analysis": analyse(document["workers"], identity, plan.splits, plan.seed)}


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
