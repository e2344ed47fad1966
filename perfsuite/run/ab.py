"""A/B measuring: the cases of a plan measured on two sides, base and head, by pairs of warm worker processes
(`perfsuite.run.ab_worker`) in alternating windows.

For each of the plan's K passes (in its shuffled order) a pair of processes starts, one per side, both alive at once;
each case is built and warmed on both sides (compilation included, its seconds kept per side), then the sides take
turns running short windows of rounds, in ABBA order (AB, BA, AB, ...), so that both see the machine of the same
moment; only one side computes at a time. The window pairs, each side's rounds and memory figures, and (in the first
pair) the two sides' first outputs for the numbers check come back. With `isolation="case"` each case has a fresh
pair of its own; with `"pass"` one pair measures a whole pass.

Before anything is measured the first pair says what each side runs (interpreter, torch) and whether each side finds
every model; a side that cannot is an `AbUnusable` error naming what is missing.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import perfsuite
from perfsuite.records import AbMeasurement, AbPair, Case, Run, WorkloadSource
from perfsuite.run.plan import SessionPlan
from perfsuite.run.wire import outcome_from_json, run_from_json

# Each side's measuring time per case and pair is the rounds' max_time_s (pytest-benchmark's --benchmark-max-time),
# cut into about WINDOWS windows per side; a window holds at least MIN_ROUNDS_PER_WINDOW rounds.
WINDOWS = 8
MIN_WINDOWS = 4
MIN_ROUNDS_PER_WINDOW = 2
# How long a request may take before the side is declared stuck (a build with compilation included).
REQUEST_TIMEOUT_S = 1800
_ERROR_TAIL_CHARACTERS = 1500


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
    """What an A/B job measured: per case its measurement (pairs that measured it) and the failures of the others;
    what each side reported of itself (interpreter, versions)."""

    measurements: dict[str, AbMeasurement] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)


class SideProcess:
    """One warm worker process of one side, answering one request at a time."""

    def __init__(self, side: SideSpec, spec: Mapping[str, Any], folder: Path) -> None:
        self.side = side
        spec_path = folder / f"{side.name}-spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        self.log_path = folder / f"{side.name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self.log = self.log_path.open("w", encoding="utf-8")
        harness = harness_folder(folder)
        starter = (
            f"import sys; sys.path[0:1] = [{str(harness)!r}]; from perfsuite.run.ab_worker import main; "
            f"sys.exit(main([{str(spec_path)!r}]))"
        )
        self.process = subprocess.Popen(
            [side.python, "-c", starter], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, cwd=side.root, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._hello: dict[str, Any] | None = None

    @property
    def hello(self) -> dict[str, Any]:
        """What the worker said of itself when it was ready (read on first use, so both sides start at once)."""
        if self._hello is None:
            self._hello = self.read()
        return self._hello

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=60)
            raise AbUnusable(
                f"the {self.side.name} side's worker ({self.side.python}, in {self.side.root}) exited with status "
                f"{self.process.returncode}: {self.output_tail() or '(no output)'}"
            )
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, document: Mapping[str, Any]) -> dict[str, Any]:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(json.dumps(document) + "\n")
        stdin.flush()
        return self.read()

    def output_tail(self) -> str:
        self.log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace").strip()[-_ERROR_TAIL_CHARACTERS:]

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.process.kill()
                self.process.wait()
        self.log.close()


def harness_folder(folder: Path) -> Path:
    """A folder holding only this process's perfsuite package (a link), first on each side's path: both sides run
    the same harness, and another interpreter keeps its own torch and libraries."""
    harness = folder / "harness"
    link = harness / "perfsuite"
    if not link.exists():
        harness.mkdir(exist_ok=True)
        link.symlink_to(Path(perfsuite.__file__).resolve().parent, target_is_directory=True)
    return harness


def worker_spec(plan: SessionPlan, side: SideSpec, cases: Sequence[Case], check_models: Sequence[str]) -> dict:
    return {
        "sys_path": [str(side.root)], "threads": plan.threads, "warmup_steps": plan.measure.warmup_steps,
        "ddp_processes": plan.measure.ddp_processes, "figure": plan.measure.figure,
        "rounds": {"min_rounds": plan.rounds.min_rounds, "max_time_s": plan.rounds.max_time_s,
                   "min_time_s": plan.rounds.min_time_s},
        "fresh_process": len(cases) == 1,
        "workload_sources": {name: list(sources) for name, sources in side.workload_sources.items()},
        "builtin_models_root": str(side.root) if side.builtin_models_from_root else None,
        "check_models": list(check_models),
    }


def window_plan(step_s: float, steps_per_round: int, max_time_s: float) -> tuple[float, int]:
    """(seconds of one window, windows per side) for a case whose round lasts step_s * steps_per_round: about
    WINDOWS windows in `max_time_s`, each of at least MIN_ROUNDS_PER_WINDOW rounds, and at least MIN_WINDOWS."""
    round_s = max(step_s * steps_per_round, 1e-6)
    window_s = max(max_time_s / WINDOWS, MIN_ROUNDS_PER_WINDOW * round_s)
    return window_s, max(MIN_WINDOWS, math.ceil(max_time_s / window_s))


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


def measure_ab(
    plan: SessionPlan, base: SideSpec, head: SideSpec, folder: Path, show: Callable[[str], None] = print
) -> AbResults:
    """Measure every case of `plan` on both sides, K = plan.processes pairs; working files go under `folder`."""
    results = AbResults()
    folder.mkdir(parents=True, exist_ok=True)
    started_s = time.perf_counter()
    models = sorted({case.model for case in plan.cases})
    pairs: dict[str, list[AbPair]] = {case.benchmark_id: [] for case in plan.cases}
    differences: dict[str, float | None] = {}
    sources: dict[str, tuple[str | None, str | None]] = {}
    total, done = len(plan.cases) * plan.processes, 0
    for index, pass_cases in enumerate(plan.passes()):
        order = random.Random(plan.seed * 7919 + index)
        for batch in plan.worker_batches(pass_cases):
            check = models if not results.sides else sorted({case.model for case in batch})
            try:
                sides = start_pair(plan, base, head, batch, check, folder, results)
            except AbUnusable as error:
                if not results.sides:
                    raise
                for case in batch:
                    results.failures.setdefault(case.benchmark_id, []).append(str(error))
                continue
            try:
                for case in batch:
                    outcome = measure_case_pair(plan, case, sides, order, folder, first=index == 0)
                    done += 1
                    if isinstance(outcome, str):
                        results.failures.setdefault(case.benchmark_id, []).append(outcome)
                        show(f"perfsuite A/B: pair {index + 1}/{plan.processes} {case.benchmark_id}: {outcome}")
                        continue
                    pair, difference, case_sources = outcome
                    pairs[case.benchmark_id].append(pair)
                    if index == 0:
                        differences[case.benchmark_id], sources[case.benchmark_id] = difference, case_sources
                    ratios = [head_s / base_s for base_s, head_s in pair.windows_s]
                    show(
                        f"perfsuite A/B: pair {index + 1}/{plan.processes} {case.benchmark_id}: head/base "
                        f"{statistics.median(ratios):.3f} over {len(ratios)} window pairs "
                        f"({done}/{total}, {time.perf_counter() - started_s:.0f} s)"
                    )
            finally:
                for side in sides:
                    side.stop()
    for case in plan.cases:
        key = case.benchmark_id
        results.measurements[key] = AbMeasurement(
            case, tuple(pairs[key]), differences.get(key), sources.get(key, (None, None))
        )
    return results


def start_pair(
    plan: SessionPlan, base: SideSpec, head: SideSpec, batch: Sequence[Case], check_models: Sequence[str],
    folder: Path, results: AbResults,
) -> list[SideProcess]:
    """Start a worker of each side for `batch` (both at once); the first pair also checks every model on both sides
    and records what each side runs. Raises AbUnusable when a side cannot measure."""
    started: list[SideProcess] = []
    try:
        for side in (base, head):
            started.append(SideProcess(side, worker_spec(plan, side, batch, check_models), folder))
        for process in started:
            hello = process.hello
            if hello.get("missing"):
                lines = "; ".join(f"{model}: {why}" for model, why in hello["missing"].items())
                raise AbUnusable(
                    f"the {process.side.name} side ({process.side.root}) does not have every selected model: {lines}; "
                    "choose models both sides have (--perf-model) or another base"
                )
            results.sides.setdefault(process.side.name, hello)
    except BaseException:
        for process in started:
            process.stop()
        raise
    return started


def measure_case_pair(
    plan: SessionPlan, case: Case, sides: Sequence[SideProcess], order: random.Random, folder: Path, first: bool
) -> tuple[AbPair, float | None, tuple[str | None, str | None]] | str:
    """One case on one pair: opened on both sides, windows in ABBA order, closed on both. Returns the pair, the
    largest output difference (first pair only) and each side's model file; or the failure message."""
    base, head = sides
    outputs = {side.side.name: folder / f"{side.side.name}-{case.benchmark_id}.pt" for side in sides}
    opened: list[SideProcess] = []
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
        steps = max(replies[name]["steps_per_round"] for name in replies)
        window_s, windows = window_plan(step_s, steps, plan.rounds.max_time_s)
        start = order.randrange(2)
        windows_s: list[tuple[float, float]] = []
        for index in range(windows):
            turn = (base, head) if (index + start) % 2 == 0 else (head, base)
            times: dict[str, float] = {}
            for side in turn:
                reply = side.request({"op": "window", "duration_s": window_s})
                if not reply["ok"]:
                    return f"{side.side.name} side: {failure_message(reply)}"
                times[side.side.name] = statistics.median(reply["times_s"])
            windows_s.append((times["base"], times["head"]))
        runs: dict[str, Run] = {}
        for side in sides:
            reply = side.request({"op": "close"})
            opened.remove(side)
            if not reply["ok"]:
                return f"{side.side.name} side: {failure_message(reply)}"
            runs[side.side.name] = run_from_json(reply["run"])
    except AbUnusable as died:
        return str(died)
    finally:
        for side in opened:
            if side.process.poll() is None:
                side.request({"op": "close"})
    difference = largest_difference(outputs["base"], outputs["head"]) if first else None
    pair = AbPair(tuple(windows_s), runs["base"], runs["head"], replies["base"]["warmup_s"],
                  replies["head"]["warmup_s"])
    return pair, difference, (replies["base"].get("source"), replies["head"].get("source"))


# Blocks of the one-side-at-a-time fallback, in ABBA order: each builds and warms the case anew.
ONE_SIDE_BLOCKS = 4


def one_side_at_a_time(
    plan: SessionPlan, case: Case, sides: Sequence[SideProcess], order: random.Random
) -> tuple[AbPair, dict[str, dict[str, Any]]] | str:
    """The fallback when the case does not fit in device memory twice: the sides take turns in ABBA blocks, each
    block building and warming the case on one side alone, timing its windows and closing it. A block's value is
    the median of its windows, and block j of base pairs with block j of head; the pair says it was measured so."""
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
            medians = []
            for _ in range(max(2, windows // ONE_SIDE_BLOCKS)):
                window = side.request({"op": "window", "duration_s": window_s})
                if not window["ok"]:
                    side.request({"op": "close"})
                    return f"{name} side: {failure_message(window)}"
                medians.append(statistics.median(window["times_s"]))
                rounds[name] += window["times_s"]
            closed = side.request({"op": "close"})
            if not closed["ok"]:
                return f"{name} side: {failure_message(closed)}"
            runs[name] = run_from_json(closed["run"])
            blocks[name].append(statistics.median(medians))
    whole = {name: replace(run, round_times_s=tuple(rounds[name])) for name, run in runs.items()}
    pair = AbPair(tuple(zip(blocks["base"], blocks["head"], strict=True)), whole["base"], whole["head"],
                  replies["base"]["warmup_s"], replies["head"]["warmup_s"], one_side_at_a_time=True)
    return pair, replies


def failure_message(reply: Mapping[str, Any]) -> str:
    failure = outcome_from_json(reply["outcome"])
    return getattr(failure, "message", str(failure))
