"""A timed run of one case through pytest-benchmark's `benchmark` fixture.

pytest-benchmark does the rounds, statistics and storage, so its flags keep working. What this adds:
the device is drained at the end of every round, warm-up steps run before any round is timed, FLOPs
are counted once outside the timed rounds, and the case's figures land in `benchmark.extra_info`.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import torch

from perfsuite.matrix.cases import Case, DeviceFacts, skip_reason
from perfsuite.records import CaseResult
from perfsuite.run import devices
from perfsuite.run.steps import count_flops, prepare_case
from perfsuite.workloads import get_workload

DEFAULT_WARMUP_STEPS = 3
EVENT_TIMED_STEPS = 5
REFERENCE_ROUNDS = 10
REFERENCE_MATMULS = 8
REFERENCE_SIDE = 256


def case_skip_reason(case: Case, facts: DeviceFacts) -> str | None:
    """Why `case` cannot run here: the matrix's rules, and for train-ddp the processes it needs."""
    reason = skip_reason(case, facts)
    if reason is None and case.mode == "train-ddp":
        from perfsuite.run import ddp as distributed
        device_count = devices.device_count(case.device)
        configured = os.environ.get(distributed.PROCESSES_ENV)
        processes = distributed.ddp_processes(case.device, device_count, configured)
        reason = distributed.ddp_skip_reason(case.device, processes, device_count)
    return reason


class CaseOutOfMemory(Exception):
    """The device ran out of memory while the case was built, warmed up or timed."""


def run_case(benchmark: Any, case: Case, warmup_steps: int = DEFAULT_WARMUP_STEPS) -> dict[str, Any]:
    """Benchmark `case` with the pytest-benchmark fixture; return the extra_info it recorded plus
    `round_times_s`, every timed round in seconds (kept out of the JSON, which has its own `data`), and
    `reference_round_times_s`, the reference workload's rounds just before and after.

    Warm-up steps absorb first-call costs (cuDNN autotuning, MPS graph and shader compilation, lazy
    allocator growth) and are not timed.
    """
    workload = get_workload(case.model)
    devices.free_cached_memory(case.device)
    prepared = None
    try:
        prepared = prepare_case(case, workload)
        for _ in range(warmup_steps):
            prepared.timed_step()
        flops_per_step = count_flops(prepared.run_step)
        devices.synchronize(case.device)
        reference_round_times_s = time_reference_s(case.device, REFERENCE_ROUNDS)
        devices.reset_memory_peak(case.device)
        benchmark(prepared.timed_step)
        reference_round_times_s += time_reference_s(case.device, REFERENCE_ROUNDS)
    except Exception as error:
        if prepared is not None:
            prepared.close()
        del prepared
        devices.free_cached_memory(case.device)
        if devices.is_out_of_memory(error):
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise CaseOutOfMemory(
                f"{case.benchmark_id}: out of memory at batch size {case.batch_size} ({first_line})"
            ) from None
        raise

    memory_bytes = devices.memory_figures_bytes(case.device)
    memory_figure = devices.memory_figure_name(case.device)
    extra_info: dict[str, Any] = {
        "device": case.device,
        "dtype": case.dtype,
        "model": case.model,
        "batch_size": case.batch_size,
        "mode": case.mode,
        "profile": case.profile,
        "parameter_count": prepared.parameter_count,
        "config_digest": prepared.config_digest,
        "flops_per_step": flops_per_step,
        "memory_figure": memory_figure,
        "memory_bytes": memory_bytes[memory_figure],
        **memory_bytes,
        **workload.extra_facts,
        **prepared.extra_facts,
    }
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None under --benchmark-disable, where the step ran once, untimed
        median_s = stats.stats.median
        extra_info["samples_per_s"] = prepared.samples / median_s
        # flops_per_step is one process's; a train-ddp step runs it in every process.
        processes = prepared.samples // case.batch_size
        extra_info["tflops_per_s"] = flops_per_step * processes / median_s / 1e12 if flops_per_step else None
    if devices.has_events(case.device):
        event_times_s = devices.time_with_events_s(prepared.run_step, case.device, EVENT_TIMED_STEPS)
        extra_info["event_median_s"] = statistics.median(event_times_s)
    benchmark.extra_info.update(extra_info)
    prepared.close()
    del prepared
    devices.free_cached_memory(case.device)
    round_times_s = list(stats.stats.data) if stats is not None else []
    return {**extra_info, "round_times_s": round_times_s, "reference_round_times_s": reference_round_times_s}


def time_reference_s(device: str, rounds: int) -> list[float]:
    """Seconds per round of a small fixed workload (chained 256x256 fp32 matmuls) on `device`.

    Timed just before and just after each case, it tracks how fast the machine is at that moment, so
    the gate can tell a slower model from a slower machine (thermal throttling, a busy neighbour).
    """
    generator = torch.Generator().manual_seed(0)
    matrix = (torch.randn(REFERENCE_SIDE, REFERENCE_SIDE, generator=generator) / REFERENCE_SIDE**0.5).to(device)
    times_s = []
    for _ in range(rounds):
        devices.synchronize(device)
        start_s = time.perf_counter()
        product = matrix
        for _ in range(REFERENCE_MATMULS):
            product = product @ matrix
        devices.synchronize(device)
        times_s.append(time.perf_counter() - start_s)
    return times_s


def case_result(case: Case, figures: dict[str, Any]) -> CaseResult | None:
    """The gate's view of a run's figures (from `run_case`); None when no round was timed."""
    if not figures["round_times_s"]:
        return None
    return CaseResult(
        benchmark_id=case.benchmark_id, device=case.device, dtype=case.dtype, model=case.model,
        batch_size=case.batch_size, mode=case.mode, profile=case.profile,
        round_times_s=tuple(figures["round_times_s"]), samples_per_s=figures["samples_per_s"],
        memory_figure=figures["memory_figure"], memory_bytes=figures["memory_bytes"],
        flops_per_step=figures["flops_per_step"], tflops_per_s=figures["tflops_per_s"],
        config_digest=figures["config_digest"], torch_version=torch.__version__,
        reference_round_times_s=tuple(figures["reference_round_times_s"]),
    )
