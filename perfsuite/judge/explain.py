"""Why a verdict changed: the op profiles of two sides (`OpProfile`, a few steps each, profiled after the timed
windows) diffed into the ops whose calls changed, the ops new or gone, the ops that account for most of the change
in time and how much of the measured change they account for. Pure functions: no torch, no files.

The time compared is the host's (each op's self time on the host, and the host time outside every op: Python,
hooks, waits) unless both sides ran on CUDA with the device busy for most of the step, where it is the device's
(each op's own kernels). What cannot be split per op says so instead of guessing: a compiled or CUDA-graph region is
one line of its own, and on MPS, where torch.profiler has no device activity (no `ProfilerActivity.MPS`, pytorch
#99037), the ops that fell back to the CPU (from MPS's own fallback warnings) and the copy ops are shown instead.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfsuite.coverage.runtime import fallback_op_of_warning, kernel_cpu_copy
from perfsuite.records import HOST_TIMES_SUMMED, OpProfile, OpTime

Basis = Literal["host", "device"]
# The host time outside every op, ranked among the ops as one more contributor.
OUTSIDE_OPS = "(host time outside ops)"
# The contributors named: the ops that account for most of the change, at most this many.
TOP_CONTRIBUTORS = 3
# A device busy for at least this share of the step makes the device's time the one compared (CUDA only).
DEVICE_BUSY_SHARE = 0.5
# Ops that copy tensors (on MPS, the host-device copies of a CPU fallback among them: at::_to_cpu, then a copy back).
COPY_OPS = ("aten::_to_cpu", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_", "aten::_to_copy")


@dataclass(frozen=True)
class OpChange:
    """One op on both sides, per step: calls, and time on the explanation's basis (None: not among that side's
    kept ops, so unknown)."""

    name: str
    base_calls: float | None
    head_calls: float | None
    base_s: float | None
    head_s: float | None

    @property
    def change_s(self) -> float:
        return (self.head_s or 0.0) - (self.base_s or 0.0)


@dataclass(frozen=True)
class Explanation:
    """The diff of two op profiles (all figures per step). `against` says what the base profile is (this job's base
    side, or a history's recorded summary); `basis` whether times are the host's or the device's; `measured_change_s`
    the timed figures' change (head - base), `profiled_change_s` the profiles' own; `top` the ops accounting for most
    of the change (in its direction) and `explained_s` their sum; `calls_changed`, `new_ops`, `gone_ops`;
    `host_outside_ops_s` (base, head); on MPS the CPU fallbacks new, gone or changed (op, base calls, head calls) and
    the copy ops' calls; `regions` compiled or CUDA-graph regions (unattributable per op); `limits` what the
    explanation cannot say."""

    against: str
    basis: Basis
    steps: tuple[int, int]
    measured_change_s: float | None
    profiled_change_s: float
    top: tuple[OpChange, ...]
    explained_s: float
    calls_changed: tuple[OpChange, ...]
    new_ops: tuple[str, ...]
    gone_ops: tuple[str, ...]
    host_outside_ops_s: tuple[float, float]
    fallbacks_changed: tuple[tuple[str, float, float], ...] = ()
    copy_calls: tuple[float, float] | None = None
    regions: tuple[OpChange, ...] = ()
    limits: tuple[str, ...] = ()

    @property
    def explained_share(self) -> float | None:
        """The share of the measured change the top ops account for (None where nothing was measured to change)."""
        change = self.measured_change_s
        if change is None or change == 0 or not math.isfinite(change):
            return None
        return self.explained_s / change

    @property
    def profiled_share(self) -> float | None:
        """The share of the profiled steps' own change the top ops account for."""
        change = self.profiled_change_s
        return None if change == 0 or not math.isfinite(change) else self.explained_s / change

    @property
    def new_fallbacks(self) -> tuple[str, ...]:
        return tuple(op for op, base, head in self.fallbacks_changed if base == 0 and head > 0)

    @property
    def gone_fallbacks(self) -> tuple[str, ...]:
        return tuple(op for op, base, head in self.fallbacks_changed if head == 0 and base > 0)

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["explained_share"] = self.explained_share
        document["profiled_share"] = self.profiled_share
        document["new_fallbacks"] = list(self.new_fallbacks)
        document["gone_fallbacks"] = list(self.gone_fallbacks)
        return document


def wants_explanation(mode: str, status: str | None) -> bool:
    """Whether a case with verdict `status` (None: not decided) gets an explanation under `mode` (all, changed or
    none: --perf-ab-explain for an A/B verdict, --perf-history-explain for one against a history)."""
    return mode == "all" or mode == "changed" and status in ("regressed", "improved")


# Where a history holds no op summary of a case yet (recorded before summaries were stored, or with
# --perf-history-explain none): the one line said instead of an explanation.
NO_RECORDED_SUMMARY = ("no op summary of this case is recorded in its history yet, so the change is not explained; "
                       "the next recording session stores one (--perf-update-baseline)")


def recorded_summary(recorded: OpProfile) -> str:
    """What a history's recorded op summary is, for an explanation's `against`: from another session, when and at
    which commit where known."""
    when = recorded.recorded_at or "an unknown time"
    commit = f"commit {recorded.commit}" if recorded.commit else "an unknown commit"
    return f"the op summary recorded in another session ({when}, {commit})"


def explain_against_history(
    mode: str, status: str, recorded: OpProfile | None, current: OpProfile | None, measured_change_s: float | None,
    current_problem: str | None = None,
) -> Explanation | str | None:
    """The explanation of a verdict against a history (`status`) under --perf-history-explain `mode`: this session's
    op profile (`current`) diffed against the history's last recorded summary (`recorded`), with the change per step
    the verdict measured (current - baseline). A line saying why instead where either profile is missing
    (`current_problem`: why this session has none); None where the case gets no explanation."""
    if not wants_explanation(mode, status):
        return None
    if recorded is None:
        return NO_RECORDED_SUMMARY
    if current is None:
        why = current_problem or "its runs carry none"
        return f"this session profiled no ops of the case ({why}), so the change is not explained"
    return explain(recorded, current, measured_change_s, against=recorded_summary(recorded))


def fallback_calls(profile: OpProfile) -> Counter[str]:
    """Calls of each op that fell back to the CPU, from the MPS fallback warnings the profile kept."""
    calls: Counter[str] = Counter()
    for message, count in profile.fallback_warnings:
        op = fallback_op_of_warning(message)
        if op is None:
            copy = kernel_cpu_copy(message)
            op = copy[0] if copy else None
        if op is not None:
            calls[op] += count
    return calls


def busy_device(profile: OpProfile) -> bool:
    """Whether the profile's device was busy for most of its steps (its kernels, where the profiler recorded any,
    against the host's step time)."""
    if not profile.kernels:
        return False
    kernel_s = sum(kernel.device_s or 0.0 for kernel in profile.kernels)
    return kernel_s >= DEVICE_BUSY_SHARE * max(profile.host_s + profile.device_wait_s, 1e-12)


def _per_step(profile: OpProfile, ops: Sequence[OpTime], basis: Basis) -> dict[str, float]:
    """Each op's time a step on the explanation's basis."""
    steps = max(profile.steps, 1)
    return {op.name: ((op.device_s or 0.0) if basis == "device" else op.host_self_s) / steps for op in ops}


def _calls_per_step(profile: OpProfile) -> tuple[dict[str, float], bool]:
    """Each op's calls a step, and whether that holds every op of the steps (so an op not in it ran 0 times): the
    profile's calls of every op where it has them, else its kept ops'."""
    steps = max(profile.steps, 1)
    every = profile.calls_of_every_op()
    if every is not None:
        return {name: calls / steps for name, calls in every.items()}, True
    return {op.name: op.calls / steps for op in profile.ops}, False


def _changes(base_s: Mapping[str, float], head_s: Mapping[str, float], base_times_whole: bool,
             head_times_whole: bool, base_calls: tuple[Mapping[str, float], bool],
             head_calls: tuple[Mapping[str, float], bool]) -> list[OpChange]:
    """Every op either side saw, with its calls and time a step on each side (0 where that side's table holds every
    op and not this one; None where it is unknown)."""
    def known(table: Mapping[str, float], whole: bool, name: str) -> float | None:
        return table.get(name, 0.0 if whole else None)

    names = sorted({*base_s, *head_s, *base_calls[0], *head_calls[0]})
    return [OpChange(name, known(*base_calls, name), known(*head_calls, name),
                     known(base_s, base_times_whole, name), known(head_s, head_times_whole, name))
            for name in names]


def explain(base: OpProfile, head: OpProfile, measured_change_s: float | None,
            against: str = "the base side of this job") -> Explanation:
    """The diff of `head`'s op profile against `base`'s, with the timed figures' change per step (head - base)."""
    basis: Basis = "device" if busy_device(base) and busy_device(head) else "host"
    calls = _calls_per_step(base), _calls_per_step(head)
    changes = _changes(_per_step(base, base.ops, basis), _per_step(head, head.ops, basis), base.other_ops is None,
                       head.other_ops is None, *calls)
    outside = (base.host_outside_ops_s / max(base.steps, 1), head.host_outside_ops_s / max(head.steps, 1))

    def region_calls(profile: OpProfile) -> tuple[dict[str, float], bool]:
        return {region.name: region.calls / max(profile.steps, 1) for region in profile.regions}, True

    regions = _changes(_per_step(base, base.regions, basis), _per_step(head, head.regions, basis), True, True,
                       region_calls(base), region_calls(head))
    contributors = [*changes, *regions]
    if basis == "host":
        contributors.append(OpChange(OUTSIDE_OPS, None, None, outside[0], outside[1]))
    profiled_change_s = sum(change.change_s for change in contributors)
    direction = measured_change_s if measured_change_s else profiled_change_s
    same_way = [c for c in contributors if c.change_s * direction > 0 and c.base_s is not None and c.head_s is not None]
    top = tuple(sorted(same_way, key=lambda c: -abs(c.change_s))[:TOP_CONTRIBUTORS])
    calls_changed = tuple(
        c for c in changes
        if c.base_calls is not None and c.head_calls is not None and round(c.base_calls, 2) != round(c.head_calls, 2)
    )
    limits = []
    if base.regions or head.regions:
        limits.append("compiled or CUDA-graph regions ran here: torch.profiler cannot split their time per op, so "
                      "each region is one line of its own")
    limits += list(dict.fromkeys([*base.limits, *head.limits]))
    if base.host_times != head.host_times and basis == "host":
        older = "base" if base.host_times == HOST_TIMES_SUMMED else "head"
        limits.append(f"the {older} summary was stored by an older perfsuite, which summed host times over every step "
                      "(a step slowed by other work counted in full) where the other takes each op's fastest step: its "
                      "host times read somewhat higher for that alone; calls compare exactly")
    if (base.other_ops is not None or head.other_ops is not None) and not (calls[0][1] and calls[1][1]):
        limits.append("only each side's largest ops are kept: an op below them reads as unknown, not as new or gone")
    elif base.other_ops is not None or head.other_ops is not None:
        limits.append("only each side's largest ops keep their times: an op below them has its calls but no time")
    base_fallbacks, head_fallbacks = fallback_calls(base), fallback_calls(head)
    fallbacks_changed = tuple(
        (op, base_fallbacks[op] / max(base.steps, 1), head_fallbacks[op] / max(head.steps, 1))
        for op in sorted({*base_fallbacks, *head_fallbacks})
        if base_fallbacks[op] / max(base.steps, 1) != head_fallbacks[op] / max(head.steps, 1)
    )
    copy_calls = None
    if base.watches_fallbacks or head.watches_fallbacks:
        copy_calls = tuple(sum(table.get(name, 0.0) for name in COPY_OPS) for table, _ in calls)
    return Explanation(
        against=against, basis=basis, steps=(base.steps, head.steps), measured_change_s=measured_change_s,
        profiled_change_s=profiled_change_s, top=top, explained_s=sum(change.change_s for change in top),
        calls_changed=calls_changed,
        new_ops=tuple(c.name for c in changes if c.base_calls == 0 and (c.head_calls or 0) > 0),
        gone_ops=tuple(c.name for c in changes if c.head_calls == 0 and (c.base_calls or 0) > 0),
        host_outside_ops_s=outside, fallbacks_changed=fallbacks_changed,
        copy_calls=copy_calls,  # type: ignore[arg-type]
        regions=tuple(regions), limits=tuple(limits),
    )
