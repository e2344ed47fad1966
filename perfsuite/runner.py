"""A timed run of one case through pytest-benchmark's `benchmark` fixture.

pytest-benchmark does the rounds, statistics and storage, so its flags keep working. What this adds:
the device is drained at the end of every round, warm-up steps run before any round is timed, FLOPs
are counted once outside the timed rounds, and the case's figures land in `benchmark.extra_info`.
"""

from __future__ import annotations

import statistics
from typing import Any

from perfsuite import devices
from perfsuite.cases import Case
from perfsuite.steps import count_flops, prepare_case
from perfsuite.workloads import get_workload

DEFAULT_WARMUP_STEPS = 3
EVENT_TIMED_STEPS = 5


def run_case(benchmark: Any, case: Case, warmup_steps: int = DEFAULT_WARMUP_STEPS) -> dict[str, Any]:
    """Benchmark `case` with the pytest-benchmark fixture; return the extra_info it recorded plus
    `round_times_s`, every timed round in seconds (kept out of the JSON, which has its own `data`).

    Warm-up steps absorb first-call costs (cuDNN autotuning, MPS graph and shader compilation, lazy
    allocator growth) and are not timed.
    """
    workload = get_workload(case.model)
    devices.free_cached_memory(case.device)
    prepared = prepare_case(case, workload)
    for _ in range(warmup_steps):
        prepared.timed_step()
    flops_per_step = count_flops(prepared.run_step)
    devices.synchronize(case.device)
    devices.reset_memory_peak(case.device)

    benchmark(prepared.timed_step)

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
    }
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None under --benchmark-disable, where the step ran once, untimed
        median_s = stats.stats.median
        extra_info["samples_per_s"] = case.batch_size / median_s
        extra_info["tflops_per_s"] = flops_per_step / median_s / 1e12 if flops_per_step else None
    if devices.has_events(case.device):
        event_times_s = devices.time_with_events_s(prepared.run_step, case.device, EVENT_TIMED_STEPS)
        extra_info["event_median_s"] = statistics.median(event_times_s)
    benchmark.extra_info.update(extra_info)
    del prepared
    devices.free_cached_memory(case.device)
    round_times_s = list(stats.stats.data) if stats is not None else []
    return {**extra_info, "round_times_s": round_times_s}
