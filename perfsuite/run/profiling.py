"""torch.profiler outside the timed rounds: the GPU kernel time of a CUDA step, and the ops of a few steps of a warm
case (what an A/B verdict's explanation and a recorded history compare). torch is imported where it is used, so
merging profiles needs none."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from perfsuite.records import MAX_PROFILE_KERNELS, MAX_PROFILE_OPS, OpProfile, OpTime

if TYPE_CHECKING:
    from perfsuite.run.devices import DeviceBackend

PROFILED_STEPS = 5


def cuda_kernel_times_s(run_step: Callable[[], object], steps: int = PROFILED_STEPS) -> dict[str, float | None]:
    """GPU time of one CUDA step, over `steps` steps each followed by a synchronize.

    `kernel_s`: the summed duration of every GPU activity (kernels, copies, sets) divided by `steps`: the time
    the GPU was busy per step. `span_s`: the median over steps of last GPU end - first GPU start within the step
    (busy time plus the gaps between kernels); None when the steps cannot be told apart in the trace.
    """
    import torch
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


# Events whose inside torch.profiler cannot split per op: torch.compile's regions and generated code, and CUDA graph
# replays (one launch, many kernels). Their time is kept per region and said to be unattributable.
UNATTRIBUTABLE_PREFIXES = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph", "## Call Compiled",
                           "cudaGraphLaunch", "CUDAGraph")
_STEP_MARKER = "perfsuite-profiled-step-"
# The ops beyond a profile's largest, summed.
OTHER_OPS = "(other ops)"


@dataclass
class _ProfiledSteps:
    """What torch.profiler saw of the profiled steps: its events, the CPU-fallback warnings raised meanwhile, and
    how long the drain after the last step waited for the device."""

    events: list[Any]
    warnings: list[str]
    device_wait_s: float


def _profile_steps(run_step: Callable[[], object], device: DeviceBackend, steps: int) -> _ProfiledSteps:
    """Run `steps` steps back to back under torch's profiler, each in a marked range, and drain once after the last;
    on MPS every CPU-fallback warning of the steps is kept (torch.set_warn_always, so each call warns, not only the
    first of the process)."""
    import warnings

    import torch
    from torch.autograd.profiler import profile, record_function

    warned_always = torch.is_warn_always_enabled()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device.falls_back_to_cpu:
            torch.set_warn_always(True)
        try:
            # torch.autograd's profiler, which torch.profiler.profile wraps: the wrapper's start imports
            # torch._inductor (seconds, once per process) to ask about CUDA graphs.
            with profile(use_cpu=True, use_device=device.name if device.profiles_kernels else None,
                         use_kineto=True) as profiler:
                for index in range(steps):
                    with record_function(f"{_STEP_MARKER}{index}"):
                        run_step()
                wait_started_s = time.perf_counter()
                device.synchronize()
                device_wait_s = time.perf_counter() - wait_started_s
        finally:
            torch.set_warn_always(warned_always)
    return _ProfiledSteps(list(profiler.function_events), [str(warning.message) for warning in caught],
                          device_wait_s)


@dataclass
class _HostTables:
    """The host side of the profiled steps: per op name and per unattributable region [calls, host us per step,
    device us], the host time outside ops per step, and each step's whole host time."""

    ops: dict[str, list[Any]]
    regions: dict[str, list[Any]]
    outside_us: list[float]
    step_us: list[float]


def _host_tables(events: Sequence[Any]) -> _HostTables:
    """Each host event of the profiled steps put under the step it ran in (events outside every step are left out)."""
    from torch.autograd import DeviceType

    markers = [e for e in events if e.device_type == DeviceType.CPU and e.name.startswith(_STEP_MARKER)]
    step_of_marker = {id(marker): index for index, marker in enumerate(markers)}
    step_of_event: dict[int, int | None] = {}

    def step_of(event: Any) -> int | None:
        """The index of the profiled step an event ran in, None outside every step."""
        key = id(event)
        if key not in step_of_event:
            parent = event.cpu_parent
            if parent is None:
                step_of_event[key] = None
            elif id(parent) in step_of_marker:
                step_of_event[key] = step_of_marker[id(parent)]
            else:
                step_of_event[key] = step_of(parent)
        return step_of_event[key]

    tables = _HostTables({}, {}, [marker.self_cpu_time_total for marker in markers],
                         [marker.cpu_time_total for marker in markers])
    for event in events:
        if event.device_type != DeviceType.CPU or event.name.startswith(_STEP_MARKER):
            continue
        step = step_of(event)
        if step is None:
            continue
        device_us = float(getattr(event, "self_device_time_total", 0.0) or 0.0)
        if event.name.startswith(UNATTRIBUTABLE_PREFIXES):
            target = tables.regions
        elif getattr(event, "is_user_annotation", False):
            tables.outside_us[step] += event.self_cpu_time_total  # the user's own record_function: Python between ops
            continue
        else:
            target = tables.ops
        totals = target.setdefault(event.name, [0, [0.0] * len(markers), 0.0])
        totals[0] += 1
        totals[1][step] += event.self_cpu_time_total
        totals[2] += device_us
    return tables


def _kernel_table(events: Sequence[Any]) -> dict[str, list[float]]:
    """Per CUDA kernel (or copy, set) name: [calls, 0 host us, device us]."""
    from torch.autograd import DeviceType

    kernels: dict[str, list[float]] = {}
    for event in events:
        if event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False):
            totals = kernels.setdefault(event.name, [0, 0.0, 0.0])
            totals[0] += 1
            totals[2] += event.time_range.end - event.time_range.start
    return kernels


def _fastest_step_total(per_step: Sequence[float]) -> float:
    """The least of per-step values times the number of steps: a total that other work (which only ever adds to a
    step's host time) leaves out unless it hit every step."""
    return min(per_step) * len(per_step) if per_step else 0.0


def _fastest_steps(table: dict[str, list[Any]]) -> dict[str, list[float]]:
    """Each name's [calls, host us (its fastest step's times the steps), device us]."""
    return {name: [calls, _fastest_step_total(host_us), device_us]
            for name, (calls, host_us, device_us) in table.items()}


def _ranked(
    table: dict[str, list[float]], limit: int | None, on_cuda: bool
) -> tuple[tuple[OpTime, ...], OpTime | None]:
    """The `limit` largest of [calls, host us, device us] by host and device time together, and the rest summed
    (None when nothing is left out); device times only where the profile saw the device (`on_cuda`)."""
    ranked = sorted(table.items(), key=lambda item: -(item[1][1] + item[1][2]))
    kept = [OpTime(name, int(calls), host_us / 1e6, device_us / 1e6 if on_cuda else None)
            for name, (calls, host_us, device_us) in ranked[:limit]]
    rest = ranked[limit:] if limit is not None else []
    other = None
    if rest:
        other = OpTime(OTHER_OPS, int(sum(t[0] for _, t in rest)),
                       sum(t[1] for _, t in rest) / 1e6, sum(t[2] for _, t in rest) / 1e6 if on_cuda else None)
    return tuple(kept), other


def profile_ops(run_step: Callable[[], object], device: DeviceBackend, steps: int) -> OpProfile:
    """Profile `steps` steps of a warm case with torch.profiler, back to back as a round runs them and drained once
    after the last (never inside a timed round: the profiler's overhead would enter the figure). On CUDA the
    device activity is profiled too (time per kernel, and per op the kernels it launched); on MPS every CPU-fallback
    warning of the steps is kept.

    Host times are kept per step, and each op's (and the time outside ops) is its fastest step's times the steps:
    other work (the scheduler, another process) only ever adds to a step, and a sum would put a burst on whatever op
    or gap it hit; an op's fastest step is its own cost. Calls are every step's."""
    profiled = _profile_steps(run_step, device, steps)
    host = _host_tables(profiled.events)
    on_cuda = device.profiles_kernels
    kept_ops, other_ops = _ranked(_fastest_steps(host.ops), MAX_PROFILE_OPS, on_cuda)
    fallback_warnings = Counter(message for message in profiled.warnings
                                if device.falls_back_to_cpu and "CPU" in message)
    return OpProfile(
        device=device.name, steps=steps, host_s=_fastest_step_total(host.step_us) / 1e6,
        host_outside_ops_s=_fastest_step_total(host.outside_us) / 1e6, ops=kept_ops, other_ops=other_ops,
        device_wait_s=profiled.device_wait_s,
        kernels=_ranked(_kernel_table(profiled.events), MAX_PROFILE_KERNELS, on_cuda)[0],
        regions=_ranked(_fastest_steps(host.regions), None, on_cuda)[0],
        fallback_warnings=tuple(fallback_warnings.most_common(MAX_PROFILE_KERNELS)),
        watches_fallbacks=device.falls_back_to_cpu,
        limits=(device.op_profile_limit,) if device.op_profile_limit else (),
        op_calls=tuple(sorted((name, int(calls)) for name, (calls, _, _) in host.ops.items())),
    )


def merge_profiles(profiles: Sequence[OpProfile]) -> OpProfile:
    """One profile of the turns of one case on one side: calls summed (every op's, exactly, where each turn kept
    them all), each time the median over the turns of its time per step (so a burst of other work that hit one turn
    weighs little), times the steps of all turns; the largest ops kept. An op below a turn's largest is unknown in
    that turn, not absent: its time comes from the turns that kept it."""
    steps = sum(profile.steps for profile in profiles)
    every_call = [profile.calls_of_every_op() for profile in profiles]
    op_calls: Counter[str] = Counter()
    for calls in every_call:
        op_calls.update(calls or {})
    calls_known = all(calls is not None for calls in every_call)

    def typical(per_turn: Sequence[float | None]) -> float | None:
        known = [value for value in per_turn if value is not None]
        return statistics.median(known) * steps if known else None

    def merged(tables: Sequence[Sequence[OpTime]], limit: int | None,
               complete: Sequence[bool]) -> tuple[tuple[OpTime, ...], list[OpTime]]:
        names = list(dict.fromkeys(op.name for table in tables for op in table))
        found = [{op.name: op for op in table} for table in tables]
        ops = []
        for name in names:
            seen = [(table.get(name), profile.steps, whole)
                    for table, profile, whole in zip(found, profiles, complete, strict=True)]
            # Not among a turn's kept ops: 0 where that turn kept every op, else unknown (left out of the median).
            host = [op.host_self_s / turn_steps if op else (0.0 if whole else None) for op, turn_steps, whole in seen]
            device = [(None if op.device_s is None else op.device_s / turn_steps) if op else (0.0 if whole else None)
                      for op, turn_steps, whole in seen]
            calls = sum(op.calls for op, _, _ in seen if op)
            ops.append(OpTime(name, calls, typical(host) or 0.0,
                              typical(device) if any(op and op.device_s is not None for op, _, _ in seen) else None))
        ranked = sorted(ops, key=lambda op: -(op.host_self_s + (op.device_s or 0.0)))
        return tuple(ranked[:limit]), ranked[limit:] if limit is not None else []

    ops, rest = merged([profile.ops for profile in profiles], MAX_PROFILE_OPS,
                       [profile.other_ops is None for profile in profiles])
    if calls_known:  # an op a turn did not keep among its largest still has its exact calls
        ops = tuple(replace(op, calls=op_calls[op.name]) for op in ops)
    rest += [profile.other_ops for profile in profiles if profile.other_ops is not None]
    other = None
    if rest:
        devices = [op.device_s for op in rest if op.device_s is not None]
        other = OpTime(OTHER_OPS, sum(op.calls for op in rest), sum(op.host_self_s for op in rest),
                       sum(devices) if devices else None)
    warnings: Counter[str] = Counter()
    for profile in profiles:
        warnings.update(dict(profile.fallback_warnings))

    def per_step(value: Callable[[OpProfile], float]) -> float:
        return typical([value(profile) / profile.steps for profile in profiles]) or 0.0

    return replace(
        profiles[0], steps=steps, host_s=per_step(lambda p: p.host_s),
        host_outside_ops_s=per_step(lambda p: p.host_outside_ops_s), ops=ops, other_ops=other,
        device_wait_s=per_step(lambda p: p.device_wait_s),
        kernels=merged([p.kernels for p in profiles], MAX_PROFILE_KERNELS,
                       [len(p.kernels) < MAX_PROFILE_KERNELS for p in profiles])[0],
        regions=merged([p.regions for p in profiles], None, [True] * len(profiles))[0],
        fallback_warnings=tuple(warnings.most_common(MAX_PROFILE_KERNELS)),
        op_calls=tuple(sorted(op_calls.items())) if calls_known else (),
    )
