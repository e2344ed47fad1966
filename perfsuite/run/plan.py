"""The plan of a session, made once: which cases, in how many fresh processes, in which order, measured how.

Pure data and pure functions: `SessionPlan.passes` makes K passes over the cases, each in its own shuffled order, so
a slow spell of the machine lands on many cases a little rather than on one case wholly; `worker_batches` says which
cases share a process (`isolation="case"`: a fresh process per case and pass, so memory figures are the case's own
and a crash takes one case with it; `"pass"`: one process per pass, torch and the model libraries imported once).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from perfsuite.records import Case, WorkloadSource

Isolation = Literal["case", "pass"]
ISOLATIONS: tuple[Isolation, ...] = ("case", "pass")


@dataclass(frozen=True)
class RoundSettings:
    """pytest-benchmark's round settings: at least `min_rounds` rounds, rounds until `max_time_s` has passed, each
    round at least `min_time_s` long."""

    min_rounds: int = 5
    max_time_s: float = 1.0
    min_time_s: float = 5e-6


@dataclass(frozen=True)
class MeasureSettings:
    """How each case is measured: `warmup_steps` untimed steps first; `ddp_processes` the processes of a train-ddp
    step (None: the device's default); `fresh_process` says the case has its process to itself, which makes the
    process's memory figure the case's own."""

    warmup_steps: int
    ddp_processes: int | None = None
    fresh_process: bool = False


@dataclass(frozen=True)
class SessionPlan:
    """A session's measuring, decided before anything runs.

    `processes` fresh processes measure each case (1: the pytest process measures them, in pytest's order), with
    `isolation`; `threads` is torch's CPU thread count in each (None: torch's default); `workload_sources` names the
    modules a worker imports to find each model (a project's conftest.py, say) and `sys_path` what it puts first on
    its path; `seed` fixes the shuffled orders.
    """

    cases: tuple[Case, ...]
    processes: int
    measure: MeasureSettings
    rounds: RoundSettings
    isolation: Isolation = "case"
    threads: int | None = None
    workload_sources: Mapping[str, Sequence[WorkloadSource]] = field(default_factory=dict)
    sys_path: tuple[str, ...] = ()
    seed: int = 0

    @property
    def in_pytest_process(self) -> bool:
        """Whether the pytest process measures the cases itself (one process per case: its own)."""
        return self.processes == 1

    def passes(self) -> list[list[Case]]:
        """`processes` passes over the cases, each in an order shuffled by the seed and the pass number."""
        passes = []
        for index in range(self.processes):
            order = list(self.cases)
            random.Random(self.seed * 1000 + index).shuffle(order)
            passes.append(order)
        return passes

    def worker_batches(self, pass_cases: Sequence[Case]) -> list[list[Case]]:
        """The processes of one pass: a process per case, or one process for the whole pass."""
        return [[case] for case in pass_cases] if self.isolation == "case" else [list(pass_cases)]
