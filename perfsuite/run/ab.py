"""A/B measuring: the cases of a plan measured on two sides, base and head, in blocks, until each case is decided
or the job's budget is spent.

A block builds and warms a case on both sides (compilation included, its seconds kept per side), then the sides take
turns running short windows of rounds in ABBA order (AB, BA, AB, ...), so that both see the machine of the same
moment; only one side computes at a time. Where base and head differ only in Python code (no other interpreter, no
compiled project module), one warm worker process holds both sides (`perfsuite.run.side_code` keeps each side's
code its own) and the K workers, started together, take turns at the blocks: a process's placement, allocator and
clocks then touch both sides alike instead of adding to their difference. Otherwise each block runs in a pair of
processes, one per side (`--perf-ab-python`, or a compiled project module), and the table says so.

After each block the caller's `look` says whether the case is decided and how many windows its next block should
take; the cases still open get another block in the next round (each round in its own shuffled order), until every
case is decided, a case has `max_blocks`, or no open case's next block fits in what is left of the budget (a round
takes the cheapest blocks that fit; each case's first K blocks are always measured: no verdict comes from fewer).
Before anything is measured the workers say what each side runs (interpreter, torch) and whether each side finds
every model; a side that cannot, or a base that would run the head's code, is an `AbUnusable` error naming what is
wrong.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.records import (
    AbBlockProgress,
    AbMeasurement,
    AbPair,
    AbProfileFailed,
    AbProgress,
    Case,
    OpProfile,
    Run,
    WorkloadSource,
)
from perfsuite.run.plan import RoundSettings, SessionPlan, most_steps_per_round
from perfsuite.run.profiling import merge_profiles
from perfsuite.run.wire import (
    WorkerSide,
    WorkerSpec,
    op_profile_from_json,
    outcome_from_json,
    run_from_json,
)
from perfsuite.run.workers import Worker, WorkerGone, Workers

# A block's windows per side: about WINDOWS of them in the rounds' max_time_s (pytest-benchmark's
# --benchmark-max-time), each at least MIN_ROUNDS_PER_WINDOW rounds long, and at least MIN_WINDOWS.
WINDOWS = 8
MIN_WINDOWS = 4
MIN_ROUNDS_PER_WINDOW = 2
# A window's time: the WINDOW_QUANTILE of its rounds' times per step, where it holds at least
# MIN_ROUNDS_FOR_QUANTILE rounds (on the CPU a round is one step, so a window of 0.125 s holds tens of them), else
# their median (an accelerator's rounds of many steps, a few a window). Other work on a shared machine only ever adds
# time to a step, so the fast tenth of a window's steps follows the code and much less the neighbours (Chen and
# Revels, "Robust benchmarking in noisy environments", arXiv:1608.04295, 2016, argue for the minimum; a quantile does
# not drift with how many steps a window holds, which differs between sides that run at different speeds). On this
# VM (2 shared cores, load about 1), timelines of 30 s of single steps cut into A/A window pairs of 0.125 s: the
# spread of a pair's log ratio was 4.7% (median) against 2.6% (lower decile) for a small training step, 2.1% against
# 1.6% in bf16, 2.5% against 1.6% (fp32) and 1.4% against 0.25% (bf16) for inference
# (docs/records/ab/window-statistic/quiet.json, tools/ab/window_statistic/run.py). What it cannot see: a change that
# slows only a few steps in ten (a stall every tenth step) moves the lower decile less than the mean; the table's
# ms and samples/s are each side's median step.
WINDOW_QUANTILE = 0.1
MIN_ROUNDS_FOR_QUANTILE = 10


# A block's round holds at most a window's ROUNDS_PER_WINDOW-th of steps (one step, where a step is longer), so that
# a window holds MIN_ROUNDS_FOR_QUANTILE rounds or more (two to spare for rounds slower than the calibration said) and
# its time is their fast tenth: a burst of other work on the host costs a round, not the window. Rounds of at most
# 0.06 s (2 a window of 0.125 s, so the median of two) left the launch-bound bs32 cases on an H100 with window pairs
# 20-48% apart and floors of 4-9% after two blocks (docs/records/gpu/ab-decides/README.md). The drain at a round's
# end (about 1 ms on a launch-bound step) then dilutes a change by up to a tenth, alike on both sides.
ROUNDS_PER_WINDOW = MIN_ROUNDS_FOR_QUANTILE + 2


def most_round_s(max_time_s: float) -> float:
    """The longest round of a block's windows at pytest-benchmark's `max_time_s` (1.0 s: about 10 ms of steps)."""
    return max_time_s / WINDOWS / ROUNDS_PER_WINDOW


# The steps profiled per side to explain a case (after its timed windows, never inside them): about PROFILE_S
# seconds of steps, at least MIN_PROFILE_STEPS and at most MAX_PROFILE_STEPS.
PROFILE_S = 0.1
MIN_PROFILE_STEPS = 4
MAX_PROFILE_STEPS = 8
# The profiled steps of a side come in this many turns, base and head alternating.
PROFILE_TURNS = 4
# How long a request may take before the side is declared stuck (a build with compilation included).
REQUEST_TIMEOUT_S = 1800

# What `look` answers after each block: (decided, windows for the case's next block); not perfsuite.judge.ab.Look,
# the whole look, which the session reduces to this.
LookAnswer = tuple[bool, int]
# Called after a block's windows, the case still open on both sides: (its window pairs, the sides, step_s per side).
AfterWindows = Callable[[Sequence[tuple[float, float]], Sequence["SideHandle"], Mapping[str, float]], None]


class AbUnusable(Exception):
    """A side cannot measure the session's cases (no torch, a model missing, a worker that will not start): the
    message says which side and what to do."""


@dataclass(frozen=True)
class SideSpec:
    """How to start one side: its `name` ("base" or "head"), interpreter, the checkout its models come from
    (`root`, first on its path), the modules that define each model there, and whether the built-in model modules
    come from `root` too (perfsuite's own repository)."""

    name: str
    python: str
    root: Path
    workload_sources: Mapping[str, Sequence[WorkloadSource]]
    builtin_models_from_root: bool = False


@dataclass
class AbResults:
    """What an A/B job measured: per case its measurement (the blocks that measured it) and the failures of the
    others; what each side reported of itself (interpreter, versions); whether the sides shared a process
    (`in_one_process`, else `process_pairs_reason` says why not); the budget and the seconds spent; and, when the job
was stopped (Ctrl-C), the cases not decided by then (`interrupted`); the models the base side does not have, with
why (`no_base`); what a worker holding both sides fixed of its heap (`heap`, `perfsuite.run.heap`; None: nothing)."""

    measurements: dict[str, AbMeasurement] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)
    in_one_process: bool = False
    process_pairs_reason: str | None = None
    budget_s: float | None = None
    spent_s: float = 0.0
    interrupted: tuple[str, ...] = ()
    no_base: dict[str, str] = field(default_factory=dict)
    profiles: dict[str, dict[str, OpProfile]] = field(default_factory=dict)
    profile_failures: dict[str, str] = field(default_factory=dict)
    profiling_s: float = 0.0
    heap: str | None = None


@dataclass(frozen=True)
class AbSchedule:
    """How an A/B job spends its time: `processes` (K) warm workers holding both sides, or K process pairs when
    `in_one_process` is off (`process_pairs_reason` says why); each case gets at least K blocks and at most
    `max_blocks`; further rounds only while they fit in `budget_s`."""

    processes: int
    budget_s: float
    max_blocks: int
    in_one_process: bool = True
    process_pairs_reason: str | None = None


@dataclass
class SideHandle:
    """One side in a worker: its requests name the side."""

    worker: Worker
    side: SideSpec

    def request(self, document: Mapping[str, Any]) -> dict[str, Any]:
        return self.worker.request({**document, "side": self.side.name})

    @property
    def alive(self) -> bool:
        return self.worker.alive


def worker_spec(plan: SessionPlan, sides: Sequence[SideSpec], head_root: Path, cases: Sequence[Case],
                check_models: Sequence[str]) -> WorkerSpec:
    """What a worker holding `sides` is started with to measure `cases` as `plan` says (no FLOPs: A/B compares
    times), checking `check_models` on each side first."""
    from perfsuite.workloads import MODEL_MODULES

    own_repository = any(side.builtin_models_from_root for side in sides)
    return WorkerSpec(
        replace(plan.measure, fresh_process=len(cases) == 1, count_flops=False), plan.rounds, plan.threads,
        sides=tuple(WorkerSide(side.name, str(side.root), side.workload_sources) for side in sides),
        head_root=str(head_root), model_modules=tuple(MODEL_MODULES) if own_repository else (),
        check_models=tuple(check_models),
    )


def window_plan(step_s: float, steps_per_round: int, max_time_s: float) -> tuple[float, int]:
    """(seconds of one window, windows per side) for a case whose round lasts step_s * steps_per_round: about
    WINDOWS windows in `max_time_s`, each of at least MIN_ROUNDS_PER_WINDOW rounds, and at least MIN_WINDOWS."""
    round_s = max(step_s * steps_per_round, 1e-6)
    window_s = max(max_time_s / WINDOWS, MIN_ROUNDS_PER_WINDOW * round_s)
    return window_s, max(MIN_WINDOWS, math.ceil(max_time_s / window_s))


def window_time_s(round_times_s: Sequence[float]) -> float:
    """A window's time per step from its rounds' times per step: their WINDOW_QUANTILE where there are at least
    MIN_ROUNDS_FOR_QUANTILE of them, else their median."""
    if len(round_times_s) < MIN_ROUNDS_FOR_QUANTILE:
        return statistics.median(round_times_s)
    return float(np.quantile(round_times_s, WINDOW_QUANTILE))


def largest_difference(base_path: Path, head_path: Path) -> float | None:
    """The largest absolute difference between the tensors two sides saved (inf when their shapes differ)."""
    import torch

    if not base_path.exists() or not head_path.exists():
        return None
    base, head = torch.load(base_path), torch.load(head_path)
    if len(base) != len(head) or any(b.shape != h.shape for b, h in zip(base, head, strict=True)):
        return math.inf
    differences = [float((b - h).abs().max()) for b, h in zip(base, head, strict=True) if b.numel()]
    return max(differences, default=0.0)


def start_workers(
    workers: Workers, plan: SessionPlan, base: SideSpec, head: SideSpec, schedule: AbSchedule, cases: Sequence[Case],
    check_models: Sequence[str], results: AbResults, first_number: int = 0, warm: Sequence[Worker] = (),
) -> list[Worker]:
    """Start the job's workers at once: K holding both sides, or one pair (base, head) of one side each. Checks what
    each says (every model found, no base module from the head's tree) and records what each side runs; raises
    AbUnusable when a side cannot measure. `warm`: workers already started from the same specs (held by `workers`),
    taken first in place of starting them."""
    groups = [[base, head]] * schedule.processes if schedule.in_one_process else [[base], [head]]
    started: list[tuple[Worker, list[SideSpec]]] = []
    try:
        for offset, sides in enumerate(groups):
            worker = warm[offset] if offset < len(warm) else workers.start(
                worker_spec(plan, sides, head.root, cases, check_models), first_number + offset,
                "+".join(side.name for side in sides), sides[0].python, sides[0].root, harness=True)
            started.append((worker, sides))
        for worker, sides in started:
            check_hello(worker, sides, results)
    except BaseException as error:
        for worker, _ in started:
            workers.stop(worker, at_once=True)
        if isinstance(error, WorkerGone):
            raise AbUnusable(str(error)) from None
        raise
    return [worker for worker, _ in started]


def replaced(workers: Workers, worker: Worker, sides: Sequence[SideSpec], results: AbResults) -> Worker:
    """A fresh worker of `worker`'s spec in its place (it died), checked as `start_workers` checks; AbUnusable when
    it cannot measure."""
    fresh = workers.replace(worker)
    try:
        check_hello(fresh, sides, results)
    except BaseException as error:
        workers.stop(fresh, at_once=True)
        if isinstance(error, WorkerGone):
            raise AbUnusable(str(error)) from None
        raise
    return fresh


def check_hello(worker: Worker, sides: Sequence[SideSpec], results: AbResults) -> None:
    """Check what `worker`, holding `sides`, says it runs (every model found, no base module from the head's tree,
    nothing that cannot share a process) and record it in `results`; AbUnusable (OneProcessRefused) when not."""
    hello = worker.hello
    reports = hello.get("sides")
    if not isinstance(reports, dict) or not all(isinstance(reports.get(side.name), dict) for side in sides):
        raise AbUnusable(f"{worker.describe()} did not say what it runs: its first line was "
                         f"{json.dumps(hello)[:200]!r}, not perfsuite's A/B worker greeting; is it a Python "
                         "interpreter with torch?")
    for side in sides:
        report = reports[side.name]
        missing: dict[str, str] = dict(report.get("missing") or {})
        absent = set(report.get("absent") or ()) if side.name == "base" else set()
        results.no_base.update({model: why for model, why in missing.items() if model in absent})
        cannot = {model: why for model, why in missing.items() if model not in absent}
        if cannot:
            lines = "; ".join(f"{model}: {why}" for model, why in cannot.items())
            raise AbUnusable(
                f"the {side.name} side ({side.root}) cannot load every selected model: {lines}; "
                "fix it, choose models both sides have (--perf-model) or another base"
            )
        if report.get("leaks"):
            raise AbUnusable(
                f"the {side.name} side ({side.root}) would run the head's code, not its own: "
                f"{', '.join(report['leaks'])} came from the head's tree; perfsuite refuses to compare head with head "
                "(report this layout; --perf-ab-python with an environment that has the base installed works)"
            )
        if report.get("extensions") and len(sides) > 1:
            raise OneProcessRefused(
                f"compiled project modules ({', '.join(report['extensions'])}) cannot be loaded twice in one process"
            )
        if report.get("patches_torch") and len(sides) > 1:
            shown = ", ".join(report["patches_torch"][:3]) + (
                f" and {len(report['patches_torch']) - 3} more" if len(report["patches_torch"]) > 3 else "")
            raise OneProcessRefused(
                f"the {side.name} side's code changes torch itself when imported ({shown}), which one process would "
                "share between the sides"
            )
        results.sides.setdefault(side.name, {key: hello.get(key) for key in ("python", "python_version",
                                                                           "torch_version")})
    if len(sides) > 1:
        results.heap = hello.get("heap")


class OneProcessRefused(AbUnusable):
    """The sides cannot share a process (compiled project modules): the job measures in process pairs instead."""


class AbInterrupted(Exception):
    """The job was stopped (Ctrl-C) while it measured: `results` holds every block measured before, and names the
    cases not decided by then (`AbResults.interrupted`)."""

    def __init__(self, results: AbResults) -> None:
        super().__init__("interrupted")
        self.results = results


@dataclass
class CaseBlocks:
    """One case's blocks so far: the blocks, the seconds they took (profiling left out), the windows and the seconds
    its next block should take, and what its first block found (the sides' largest output difference, each side's
    model file)."""

    case: Case
    blocks: list[AbPair] = field(default_factory=list)
    seconds: float = 0.0
    next_windows: int | None = None
    next_block_s: float = 0.0
    difference: float | None = None
    sources: tuple[str | None, str | None] = (None, None)

    def measurement(self) -> AbMeasurement:
        return AbMeasurement(self.case, tuple(self.blocks), self.difference, self.sources, self.seconds)

    def add(self, outcome: tuple[AbPair, float | None, tuple[str | None, str | None]], block_s: float,
            look: Callable[[AbMeasurement], LookAnswer]) -> bool:
        """Add a block that measured (`measure_case_pair`'s outcome) and took `block_s`; whether `look` calls the
        case decided. Its next block takes this one's seconds, scaled to the next block's windows."""
        block, difference, sources = outcome
        if not self.blocks:
            self.difference, self.sources = difference, sources
        self.blocks.append(block)
        decided, self.next_windows = look(self.measurement())
        self.next_block_s = block_s * max(1.0, (self.next_windows or 0) / max(len(block.windows_s), 1))
        return decided


def round_order(plan: SessionPlan, schedule: AbSchedule, open_cases: Sequence[Case], round_index: int,
                next_block_s: Mapping[str, float], left_s: float) -> list[Case]:
    """The open cases a round measures, in a shuffled order of its own: from round K on, only those whose next block
    fits in the `left_s` seconds of the budget (`cases_that_fit`)."""
    order = list(open_cases)
    random.Random(plan.seed * 7919 + round_index).shuffle(order)
    if round_index >= schedule.processes:
        order = cases_that_fit(order, next_block_s, left_s)
    return order


def measure_ab(
    plan: SessionPlan, base: SideSpec, head: SideSpec, folder: Path, show: Callable[[AbProgress], None],
    schedule: AbSchedule, look: Callable[[AbMeasurement], LookAnswer],
    explain: Callable[[AbMeasurement], bool] | None = None, warm: Worker | None = None,
) -> AbResults:
    """Measure the cases of `plan` on both sides in blocks until `look` calls each decided, or `schedule`'s budget
    or block limit ends it; working files go under `folder`; `show` gets a record of each block as it ends (and of
    each case whose ops could not be profiled). A worker found dead before a case (killed while idle)
    is replaced, so it costs no case; one that dies during a case's block costs that block. An interrupt (Ctrl-C)
    kills the workers at once and raises `AbInterrupted` with what was measured before it. Each case `explain`
    chooses has its ops profiled on both sides after its timed windows: in the block that decides it, before the case
    closes (`ExplainWhenDecided`), else once every block is done (`profile_cases`). `warm`: a worker holding both
    sides, already started with the spec of the first of the K (the job's check worker, `AbJob.check`), taken as that
    one; it is stopped with the others."""
    return AbRun(plan, base, head, folder, show, schedule, look, explain).measure(warm)


class AbRun:
    """One A/B job's measuring (`measure_ab`): its workers, its cases' blocks, and what it found."""

    def __init__(self, plan: SessionPlan, base: SideSpec, head: SideSpec, folder: Path,
                 show: Callable[[AbProgress], None], schedule: AbSchedule, look: Callable[[AbMeasurement], LookAnswer],
                 explain: Callable[[AbMeasurement], bool] | None) -> None:
        self.plan, self.base, self.head, self.folder, self.show = plan, base, head, folder, show
        self.schedule, self.look, self.explain = schedule, look, explain
        self.results = AbResults(budget_s=schedule.budget_s)
        self.models = sorted({case.model for case in plan.cases})
        self.pool = Workers(folder, REQUEST_TIMEOUT_S)
        self.workers: list[Worker] = []
        self.cases = {case.benchmark_id: CaseBlocks(case) for case in plan.cases}
        self.open_cases = list(plan.cases)
        self.started_s = time.perf_counter()

    def measure(self, warm: Worker | None) -> AbResults:
        """Start the workers (`warm` taken as the first), measure round after round, profile what is left to
        explain; stop the workers however it ends."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if warm is not None:
            self.pool.adopt(warm)
        stopping = interrupted = False  # stopping: the workers are killed at once, not asked to exit
        try:
            self.start(warm)
            for round_index in range(self.schedule.max_blocks):
                order = round_order(self.plan, self.schedule, self.open_cases, round_index,
                                    {key: entry.next_block_s for key, entry in self.cases.items()},
                                    self.schedule.budget_s - (time.perf_counter() - self.started_s))
                if not order:
                    break
                pair_workers: list[Worker] = []
                try:
                    self.measure_round(round_index, order, pair_workers)
                except BaseException:
                    stopping = True
                    raise
                finally:
                    for worker in pair_workers:
                        self.pool.stop(worker, at_once=stopping)
            self.profile_the_rest()
        except KeyboardInterrupt:
            stopping = interrupted = True
            self.results.interrupted = tuple(case.benchmark_id for case in self.open_cases)
        except BaseException:
            stopping = True
            raise
        finally:
            self.pool.stop_all(at_once=stopping)
            self.results.spent_s = time.perf_counter() - self.started_s
            self.results.measurements.update({key: entry.measurement() for key, entry in self.cases.items()})
        if interrupted:
            raise AbInterrupted(self.results)
        return self.results

    def start(self, warm: Worker | None) -> None:
        """The K warm workers holding both sides; where the sides cannot share a process, the job measures in
        process pairs instead, started round by round."""
        if self.schedule.in_one_process:
            try:
                self.workers = start_workers(self.pool, self.plan, self.base, self.head, self.schedule,
                                             self.plan.cases, self.models, self.results,
                                             warm=() if warm is None else (warm,))
            except OneProcessRefused as refused:
                self.results.sides.clear()
                self.schedule = replace(self.schedule, in_one_process=False, process_pairs_reason=str(refused))
        self.results.in_one_process = self.schedule.in_one_process
        self.results.process_pairs_reason = self.schedule.process_pairs_reason

    def live_worker(self, number: int) -> Worker:
        """The round's warm worker, replaced first when it has died since its last case."""
        if not self.workers[number].alive:
            self.workers[number] = replaced(self.pool, self.workers[number], [self.base, self.head], self.results)
        return self.workers[number]

    def live_pair(self, pair: list[Worker], order: Sequence[Case], first_number: int) -> list[Worker]:
        """The round's process pair, started (again) when it has not been yet or one of it has died."""
        if pair and all(worker.alive for worker in pair):
            return pair
        for worker in pair:
            self.pool.stop(worker, at_once=True)
        pair.clear()
        return start_workers(self.pool, self.plan, self.base, self.head, self.schedule, order, self.models,
                             self.results, first_number=first_number)

    def handles(
        self, round_index: int, order: Sequence[Case], pair_workers: list[Worker]
    ) -> tuple[int, list[SideHandle]]:
        """The process number and the two sides a round's case is measured on: the round's warm worker holding
        both, or the round's process pair (kept in `pair_workers`)."""
        if self.schedule.in_one_process:
            worker = self.live_worker(round_index % len(self.workers))
            return round_index % len(self.workers), [SideHandle(worker, self.base), SideHandle(worker, self.head)]
        pair_workers[:] = self.live_pair(pair_workers, order, first_number=2 * round_index)
        return round_index, [SideHandle(pair_workers[0], self.base), SideHandle(pair_workers[1], self.head)]

    def measure_round(self, round_index: int, order: Sequence[Case], pair_workers: list[Worker]) -> None:
        """One block of each case of `order`; a worker that cannot be started fails the round's cases left."""
        rng = random.Random(self.plan.seed * 104729 + round_index)
        for position, case in enumerate(order):
            try:
                number, handles = self.handles(round_index, order, pair_workers)
            except AbUnusable as error:
                if not self.results.sides:
                    raise
                for unmeasured in order[position:]:
                    self.results.failures.setdefault(unmeasured.benchmark_id, []).append(str(error))
                return
            self.measure_block(self.cases[case.benchmark_id], number, handles, rng)

    def measure_block(self, entry: CaseBlocks, number: int, handles: Sequence[SideHandle],
                      rng: random.Random) -> None:
        """One block of a case on `handles`, added to its blocks (or its failure recorded), and shown."""
        case, key = entry.case, entry.case.benchmark_id
        case_started_s, profiling_before_s = time.perf_counter(), self.results.profiling_s
        outcome = measure_case_pair(
            self.plan, case, handles, rng, self.folder, first=not entry.blocks, windows=entry.next_windows,
            after_windows=None if self.explain is None else ExplainWhenDecided(
                case, entry.blocks, self.explain, self.schedule.processes, self.results, self.show),
        )
        block_s = time.perf_counter() - case_started_s - (self.results.profiling_s - profiling_before_s)
        entry.seconds += block_s
        if isinstance(outcome, str):
            self.results.failures.setdefault(key, []).append(outcome)
            self.open_cases.remove(case)
            self.show(AbBlockProgress(key, len(entry.blocks) + 1, time.perf_counter() - self.started_s,
                                      self.schedule.budget_s, failure=outcome))
            return
        block = replace(outcome[0], process=number, in_one_process=self.schedule.in_one_process)
        decided = entry.add((block, *outcome[1:]), block_s, self.look)
        if decided and len(entry.blocks) >= self.schedule.processes:
            self.open_cases.remove(case)
        ratios = [head_s / base_s for base_s, head_s in block.windows_s]
        self.show(AbBlockProgress(key, len(entry.blocks), time.perf_counter() - self.started_s,
                                  self.schedule.budget_s, statistics.median(ratios), len(ratios), decided))

    def profile_the_rest(self) -> None:
        """Profile the cases to explain that no block profiled (not decided, or a failed block)."""
        if self.explain is None:
            return
        chosen = [entry.case for entry in self.cases.values()
                  if self.explain(AbMeasurement(entry.case, tuple(entry.blocks)))
                  and entry.case.benchmark_id not in self.results.profiles]
        self.workers = profile_cases(self.pool, self.plan, self.base, self.head, self.schedule, self.workers, chosen,
                                     self.results, self.show)


def cases_that_fit(order: Sequence[Case], next_block_s: Mapping[str, float], left_s: float) -> list[Case]:
    """The cases of `order` that get a block in a round that must fit in `left_s` seconds, each case's next block
    taking `next_block_s[its id]`: the cheapest first, as many as fit, in `order`'s order. A case too costly for
    what is left does not stop the cheaper ones (a launch-bound case needs more blocks than a large one)."""
    chosen: set[str] = set()
    for case in sorted(order, key=lambda case: next_block_s[case.benchmark_id]):
        if next_block_s[case.benchmark_id] > left_s:
            break
        left_s -= next_block_s[case.benchmark_id]
        chosen.add(case.benchmark_id)
    return [case for case in order if case.benchmark_id in chosen]


@dataclass
class ExplainWhenDecided:
    """`measure_case_pair`'s `after_windows` for one case: where the block just timed decides it as `explain` wants
    explained (and the case has the K blocks it must have, so it stops here), profile it before it closes."""

    case: Case
    blocks: Sequence[AbPair]
    explain: Callable[[AbMeasurement], bool]
    processes: int
    results: AbResults
    show: Callable[[AbProgress], None]

    def __call__(self, windows_s: Sequence[tuple[float, float]], sides: Sequence[SideHandle],
                 step_s: Mapping[str, float]) -> None:
        key = self.case.benchmark_id
        if not self.blocks or key in self.results.profiles or len(self.blocks) + 1 < self.processes:
            return
        block = replace(self.blocks[-1], windows_s=tuple(windows_s))
        if not self.explain(AbMeasurement(self.case, (*self.blocks, block))):
            return
        started_s = time.perf_counter()
        profiled = profile_open_case(sides, step_s)
        self.results.profiling_s += time.perf_counter() - started_s
        if isinstance(profiled, str):
            self.results.profile_failures[key] = profiled
            self.show(AbProfileFailed(key, profiled))
        else:
            self.results.profiles[key] = profiled
            self.results.profile_failures.pop(key, None)


def profile_steps(step_s: float) -> int:
    """The steps to profile per side of a case whose step takes `step_s`: about PROFILE_S seconds, within the
    bounds."""
    return min(MAX_PROFILE_STEPS, max(MIN_PROFILE_STEPS, math.ceil(PROFILE_S / max(step_s, 1e-6))))


def profile_cases(
    pool: Workers, plan: SessionPlan, base: SideSpec, head: SideSpec, schedule: AbSchedule, workers: list[Worker],
    cases: Sequence[Case], results: AbResults, show: Callable[[AbProgress], None],
) -> list[Worker]:
    """After every timed window of the job: profile each of `cases` on both sides (`profile_case_pair`: opened and
    warmed again), in the job's first warm worker (or a new process pair), into `results.profiles`; a case that
    fails leaves its message in `results.profile_failures`. Returns the workers to stop at the end."""
    if not cases:
        return workers
    started_s = time.perf_counter()
    models = sorted({case.model for case in cases})
    pair_workers: list[Worker] = []
    try:
        if schedule.in_one_process:
            if not workers[0].alive:
                pool.stop(workers[0], at_once=True)
                workers[0] = start_workers(pool, plan, base, head, replace(schedule, processes=1), cases, models,
                                           results)[0]
            handles = [SideHandle(workers[0], base), SideHandle(workers[0], head)]
        else:
            pair_workers = start_workers(pool, plan, base, head, schedule, cases, models, results, first_number=1000)
            handles = [SideHandle(pair_workers[0], base), SideHandle(pair_workers[1], head)]
        for case in cases:
            profiled = profile_case_pair(case, handles)
            if isinstance(profiled, str):
                results.profile_failures[case.benchmark_id] = profiled
                show(AbProfileFailed(case.benchmark_id, profiled))
            else:
                results.profiles[case.benchmark_id] = profiled
    except (AbUnusable, WorkerGone) as error:
        for case in cases:
            results.profile_failures.setdefault(case.benchmark_id, str(error))
    finally:
        for worker in pair_workers:
            pool.stop(worker)
        results.profiling_s += time.perf_counter() - started_s
    return workers


def profile_open_case(sides: Sequence[SideHandle], step_s: Mapping[str, float]) -> dict[str, OpProfile] | str:
    """The op profile of the case open on each of `sides` (whose step takes `step_s[name]`): PROFILE_TURNS turns of
    a few profiled steps each, the sides alternating (ABBA), so that a slow spell of the machine lands on both; the
    case stays open. Or the failure message."""
    turns: dict[str, list[OpProfile]] = {side.side.name: [] for side in sides}
    for turn in range(PROFILE_TURNS):
        for side in sides if turn % 2 == 0 else list(reversed(sides)):
            name = side.side.name
            reply = side.request({"op": "profile", "steps": max(1, profile_steps(step_s[name]) // PROFILE_TURNS)})
            if not reply["ok"]:
                return f"{name} side: {failure_message(reply)}"
            turns[name].append(op_profile_from_json(reply["profile"]))
    return {name: merge_profiles(profiles) for name, profiles in turns.items()}


def profile_case_pair(case: Case, sides: Sequence[SideHandle]) -> dict[str, OpProfile] | str:
    """The op profile of `case` on each side, opened for it (`profile_open_case`); where both do not fit in device
    memory together, one side after the other. Or the failure message."""
    opened: list[SideHandle] = []
    step_s: dict[str, float] = {}
    try:
        for side in sides:
            reply = side.request({"op": "open", "case": case.__dict__, "output_path": None})
            if not reply["ok"] and opened and reply["outcome"]["failure"]["kind"] == "out-of-memory":
                opened.pop().request({"op": "close"})  # both do not fit together: one side at a time
                profiles: dict[str, OpProfile] = {}
                for alone in sides:
                    reply = alone.request({"op": "open", "case": case.__dict__, "output_path": None})
                    if not reply["ok"]:
                        return f"{alone.side.name} side, alone on the device: {failure_message(reply)}"
                    profiled = profile_open_case([alone], {alone.side.name: reply["step_s"]})
                    alone.request({"op": "close"})
                    if isinstance(profiled, str):
                        return profiled
                    profiles.update(profiled)
                return profiles
            if not reply["ok"]:
                return f"{side.side.name} side: {failure_message(reply)}"
            opened.append(side)
            step_s[side.side.name] = reply["step_s"]
        return profile_open_case(sides, step_s)
    finally:
        for side in opened:
            if side.alive:
                side.request({"op": "close"})


def measure_case_pair(
    plan: SessionPlan, case: Case, sides: Sequence[SideHandle], order: random.Random, folder: Path, first: bool,
    windows: int | None = None, after_windows: AfterWindows | None = None,
) -> tuple[AbPair, float | None, tuple[str | None, str | None]] | str:
    """One block of a case: opened on both sides, `windows` window pairs (default: the window plan's) in ABBA order,
    `after_windows` called with them while the case is still open on both (to profile it), closed on both. Returns
    the block, the largest output difference (first block only) and each side's model file; or the failure
    message."""
    base, head = sides
    outputs = {side.side.name: folder / f"{side.side.name}-{case.benchmark_id}.pt" for side in sides}
    opened: list[SideHandle] = []
    replies: dict[str, dict[str, Any]] = {}
    try:
        for side in order.sample(list(sides), 2):
            reply = side.request({"op": "open", "case": case.__dict__,
                                  "output_path": str(outputs[side.side.name]) if first else None})
            if not reply["ok"] and opened and reply["outcome"]["failure"]["kind"] == "out-of-memory":
                opened.pop().request({"op": "close"})  # both do not fit together: one side at a time
                measured = one_side_at_a_time(plan, case, sides, order)
                if isinstance(measured, str):
                    return measured
                pair, replies = measured
                difference = largest_difference(outputs["base"], outputs["head"]) if first else None
                return pair, difference, (replies["base"].get("source"), replies["head"].get("source"))
            if not reply["ok"]:
                return f"{side.side.name} side: {failure_message(reply)}"
            opened.append(side)
            replies[side.side.name] = reply
        step_s = max(replies[name]["step_s"] for name in replies)
        # Both sides run rounds of the same steps: a round's drain adds its cost / steps to each step's time, so
        # rounds of 1 step on one side against 12 on the other (each side's own calibration, a noisy figure on a
        # launch-bound step) would read as a difference of the sides. At most most_round_s of steps a round.
        steps = min(max(replies[name]["steps_per_round"] for name in replies),
                    most_steps_per_round(step_s, RoundSettings(min_rounds=1,
                                                               max_time_s=most_round_s(plan.rounds.max_time_s))))
        window_s, planned = window_plan(step_s, steps, plan.rounds.max_time_s)
        windows = windows or planned
        start = order.randrange(2)
        windows_s: list[tuple[float, float]] = []
        for index in range(windows):
            turn = (base, head) if (index + start) % 2 == 0 else (head, base)
            times: dict[str, float] = {}
            for side in turn:
                reply = side.request({"op": "window", "duration_s": window_s, "steps": steps})
                if not reply["ok"]:
                    return f"{side.side.name} side: {failure_message(reply)}"
                times[side.side.name] = window_time_s(reply["times_s"])
            windows_s.append((times["base"], times["head"]))
        if after_windows is not None:
            after_windows(windows_s, sides, {name: reply["step_s"] for name, reply in replies.items()})
        runs: dict[str, Run] = {}
        for side in sides:
            reply = side.request({"op": "close"})
            opened.remove(side)
            if not reply["ok"]:
                return f"{side.side.name} side: {failure_message(reply)}"
            runs[side.side.name] = run_from_json(reply["run"])
    except (AbUnusable, WorkerGone) as died:
        return str(died)
    except KeyboardInterrupt:
        opened.clear()  # stopping: the workers are killed, not asked to close
        raise
    finally:
        for side in opened:
            with contextlib.suppress(AbUnusable, WorkerGone):  # a side gone meanwhile has nothing left to close
                side.request({"op": "close"})
    difference = largest_difference(outputs["base"], outputs["head"]) if first else None
    pair = AbPair(tuple(windows_s), runs["base"], runs["head"], replies["base"]["warmup_s"],
                  replies["head"]["warmup_s"])
    return pair, difference, (replies["base"].get("source"), replies["head"].get("source"))


# Blocks of the one-side-at-a-time fallback, in ABBA order: each builds and warms the case anew.
ONE_SIDE_BLOCKS = 4


def one_side_at_a_time(
    plan: SessionPlan, case: Case, sides: Sequence[SideHandle], order: random.Random
) -> tuple[AbPair, dict[str, dict[str, Any]]] | str:
    """The fallback when the case does not fit in device memory twice: the sides take turns in ABBA blocks, each
    block building and warming the case on one side alone, timing its windows and closing it. A block's value is
    the median of its windows' times (`window_time_s`), and block j of base pairs with block j of head; the pair
    says it was measured so."""
    base, head = sides
    start = order.randrange(2)
    blocks: dict[str, list[float]] = {"base": [], "head": []}
    rounds: dict[str, list[float]] = {"base": [], "head": []}
    replies: dict[str, dict[str, Any]] = {}
    runs: dict[str, Run] = {}
    for index in range(ONE_SIDE_BLOCKS):
        for side in (base, head) if (index + start) % 2 == 0 else (head, base):
            name = side.side.name
            reply = side.request({"op": "open", "case": case.__dict__, "output_path": None})
            if not reply["ok"]:
                return f"{name} side, alone on the device: {failure_message(reply)}"
            replies[name] = reply
            window_s, windows = window_plan(reply["step_s"], reply["steps_per_round"], plan.rounds.max_time_s)
            window_times_s = []
            for _ in range(max(2, windows // ONE_SIDE_BLOCKS)):
                window = side.request({"op": "window", "duration_s": window_s})
                if not window["ok"]:
                    side.request({"op": "close"})
                    return f"{name} side: {failure_message(window)}"
                window_times_s.append(window_time_s(window["times_s"]))
                rounds[name] += window["times_s"]
            closed = side.request({"op": "close"})
            if not closed["ok"]:
                return f"{name} side: {failure_message(closed)}"
            runs[name] = run_from_json(closed["run"])
            blocks[name].append(statistics.median(window_times_s))
    whole = {name: replace(run, round_times_s=tuple(rounds[name])) for name, run in runs.items()}
    pair = AbPair(tuple(zip(blocks["base"], blocks["head"], strict=True)), whole["base"], whole["head"],
                  replies["base"]["warmup_s"], replies["head"]["warmup_s"], one_side_at_a_time=True)
    return pair, replies


def failure_message(reply: Mapping[str, Any]) -> str:
    failure = outcome_from_json(reply["outcome"])
    return getattr(failure, "message", str(failure))
