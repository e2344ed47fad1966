"""GPU kernel time of a CUDA step from torch.profiler, outside the timed rounds."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

PROFILED_STEPS = 5


def cuda_kernel_times_s(run_step: Callable[[], object], steps: int = PROFILED_STEPS) -> dict[str, float | None]:
    """GPU time of one CUDA step, over `steps` steps each followed by a synchronize.

    `kernel_s`: the summed duration of every GPU activity (kernels, copies, sets) divided by `steps`: the time
    the GPU was busy per step. `span_s`: the median over steps of last GPU end - first GPU start within the step
    (busy time plus the gaps between kernels); None when the steps cannot be told apart in the trace.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    prefix = "perfsuite-step-"
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


def gpu_busy_fraction(kernel_s: float | None, step_s: float) -> float | None:
    """GPU kernel time over step time, at most 1; None when the kernel time is unknown."""
    if kernel_s is None or step_s <= 0:
        return None
    return min(1.0, kernel_s / step_s)
