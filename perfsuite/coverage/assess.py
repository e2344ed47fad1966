"""Join a trace with the MPS support table: each op a model ran, its calls per phase and its verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfsuite.coverage.support import OpSupport, Verdict
from perfsuite.coverage.trace import PHASES, WorkloadTrace


@dataclass(frozen=True)
class OpUsage:
    """One op of one model: how often each phase called it, and what MPS does with it.

    `inside` lists the composite ops whose kernels made (some of) the calls; empty when the model's own
    code called the op.
    """

    op: str
    verdict: Verdict
    calls_by_phase: tuple[tuple[str, int], ...]
    reason: str
    suggestion: str | None = None
    inside: tuple[str, ...] = ()

    @property
    def calls(self) -> int:
        """Calls over all phases."""
        return sum(calls for _, calls in self.calls_by_phase)

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases that called the op, in run order."""
        return tuple(phase for phase, _ in self.calls_by_phase)


@dataclass(frozen=True)
class ModelCoverage:
    """The verdicts for every op one model ran, worst first; `note` warns when the torch version lies
    outside the releases whose MPS facts were checked."""

    model: str
    profile: str
    batch_size: int
    traced_on: str
    torch_version: str
    ops: tuple[OpUsage, ...]
    note: str | None = None

    def with_verdict(self, verdict: Verdict) -> tuple[OpUsage, ...]:
        """The ops with `verdict`."""
        return tuple(usage for usage in self.ops if usage.verdict is verdict)

    @property
    def fallbacks(self) -> tuple[OpUsage, ...]:
        """The ops that would fall back to the CPU on MPS."""
        return self.with_verdict(Verdict.FALLBACK)


def assess_trace(
    trace: WorkloadTrace, lookup: Callable[[str], OpSupport], torch_version: str, note: str | None = None
) -> ModelCoverage:
    """Each op of `trace` with its calls per phase and the verdict `lookup` gives, worst verdict first,
    then most calls first."""
    calls: dict[str, dict[str, int]] = {}
    inside: dict[str, list[str]] = {}
    for count in trace.counts:
        per_phase = calls.setdefault(count.op, {})
        per_phase[count.phase] = per_phase.get(count.phase, 0) + count.calls
        parents = inside.setdefault(count.op, [])
        if count.inside is not None and count.inside not in parents:
            parents.append(count.inside)
    usages = []
    for op, per_phase in calls.items():
        support = lookup(op)
        ordered = tuple((phase, per_phase[phase]) for phase in PHASES if phase in per_phase)
        usages.append(OpUsage(op, support.verdict, ordered, support.reason, support.suggestion, tuple(inside[op])))
    usages.sort(key=lambda usage: (-usage.verdict.rank, -usage.calls, usage.op))
    return ModelCoverage(trace.model, trace.profile, trace.batch_size, trace.device, torch_version, tuple(usages), note)
