"""The plan of a session, made once: which cases, in how many fresh processes, in which order, measured how.

Pure data and pure functions: `SessionPlan.passes` makes K passes over the cases, each in its own shuffled order, so
a slow spell of the machine lands on many cases a little rather than on one case wholly; `worker_batches` says which
cases share a process (`isolation="case"`: a fresh process per case and pass, so memory figures are the case's own
and a crash takes one case with it; `"pass"`: one process per pass, torch and the model libraries imported once).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from perfsuite.records import STEP_FIGURE, Case, WorkloadSource

Isolation = Literal["case", "pass"]
ISOLATIONS: tuple[Isolation, ...] = ("case", "pass")


@dataclass(frozen=True)
class RoundSettings:
    """pytest-benchmark's round settings: at least `min_rounds` rounds, rounds until `max_time_s` has passed, each
    round at least `min_time_s` long."""

    min_rounds: int = 5
    max_time_s: float = 1.0
    min_time_s: float = 5e-6


# The share of a round the drain at its end may cost: a loop that never waits sees the time per step without it.
ROUND_SYNC_SHARE = 0.01


def steps_per_round(step_s: float, sync_cost_s: float, rounds: RoundSettings) -> int:
    """The steps of one round: enough that the drain's cost per step `sync_cost_s` (a synced step's time less a
    back-to-back step's `step_s`) is at most ROUND_SYNC_SHARE of the round, and that a round lasts `min_time_s`;
    at most what lets `min_rounds` rounds fit in `max_time_s`; at least one."""
    wanted = math.ceil(max(sync_cost_s, 0.0) / (ROUND_SYNC_SHARE * step_s)) if step_s > 0 else 1
    wanted = max(wanted, math.ceil(rounds.min_time_s / step_s) if step_s > 0 else 1)
    return max(1, min(wanted, most_steps_per_round(step_s, rounds)))


def most_steps_per_round(step_s: float, rounds: RoundSettings) -> int:
    """The most steps of `step_s` a round may hold: what lets `min_rounds` rounds fit in `max_time_s` (at least 1)."""
    return max(1, math.floor(rounds.max_time_s / rounds.min_rounds / step_s) if step_s > 0 else 1)


def rounds_for(round_s: float, rounds: RoundSettings) -> int:
    """How many rounds of `round_s` seconds to time: `min_rounds`, or more until `max_time_s` is spent (as
    pytest-benchmark's own calibration decides)."""
    return max(rounds.min_rounds, math.ceil(rounds.max_time_s / round_s) if round_s > 0 else rounds.min_rounds)


@dataclass(frozen=True)
class MeasureSettings:
    """How each case is measured: `warmup_steps` untimed steps first; `ddp_processes` the processes of a train-ddp
    step (None: the device's default); `fresh_process` says the case has its process to itself, which makes the
    process's memory figure the case's own; `figure` what the rounds time (records.FIGURES); `count_flops` whether
    the step's FLOPs are counted (in a counted step of its own, outside the rounds; a session of worker processes
    counts a case's in the first process that measures it, and an A/B job, comparing times, leaves them out);
    `profile_ops` whether a few steps are profiled after the rounds for the case's op summary (`Run.op_profile`)."""

    warmup_steps: int
    ddp_processes: int | None = None
    fresh_process: bool = False
    figure: str = STEP_FIGURE
    count_flops: bool = True
    profile_ops: bool = False


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
