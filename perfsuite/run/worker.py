"""The one measuring process: `python -m perfsuite.run.worker SPEC.json` answers requests, one JSON line each on its
standard input, with one JSON line each on its standard output, until `exit` or the end of its input. The spec
(`perfsuite.run.wire.WorkerSpec`) says how it measures and where its models come from: the gate's project
(`sys_path`, `workload_sources`), or the sides of an A/B job (`perfsuite.run.side_code`: each side's own project code,
the base's taken from the base checkout). `perfsuite.run.workers.Workers` starts and talks to it.

A worker holding both sides of an A/B job fixes its heap's thresholds first (`perfsuite.run.heap`, glibc only).
Its first reply, before any request, says what it runs: interpreter, torch, the heap setting (`heap`: what was fixed,
or null), and per side the models it cannot find
(`absent`: those it does not have at all) and the modules it could not be sure of (`leaks`: a base module taken from
the head's tree; `extensions`: compiled project modules, which one process cannot hold twice; `patches_torch`: what
of torch itself a side's import changed, which the other side would share). Then:

- `{"op": "measure", "case": {...}, "count_flops": B}`: measure the case from start to end as the pytest process
  does (`perfsuite.run.measure.measure`; its FLOPs counted when B); reply `{"ok": true, "outcome": ...}` with its
  Run or Failure (`wire.outcome_to_json`);
- `{"op": "open", "side": S, "case": {...}, "output_path": P}`: build and warm the case on side S
  (`perfsuite.run.measure.open_case`, as every measuring path does); reply its warm-up seconds, the steps of a round
  and the file its model came from; when `output_path` is given, the first warm-up step's output is saved there for
  the numbers check;
- `{"op": "window", "side": S, "duration_s": D, "steps": N}`: time rounds of N steps (default: the case's own
  calibration) of side S's open case for about D seconds; reply each round's time per step;
- `{"op": "profile", "side": S, "steps": N}`: profile N steps of side S's open case with torch.profiler
  (`perfsuite.run.profiling.profile_ops`), never inside a window; reply its op profile (`wire.op_profile_to_json`);
  a failure leaves the case open;
- `{"op": "close", "side": S}`: reply side S's run of the case (every round of its windows, its memory figures; None
  when no window was timed) and release it;
- `{"op": "exit"}`.

Without sides (the gate's worker) a request runs in the process's own code; with sides, every request runs with its
side's code current (its modules, workload registry and checkout), so a module the model imports lazily during a
step is that side's too. A failure replies `{"ok": false, "outcome": ...}` (the same Failure every path gives) and
the process goes on. The model's own prints go to standard error, so they never garble a reply. Ctrl-C is the
starting process's to handle: it stops its workers itself, so a worker never dies mid-reply.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from perfsuite.benchmark_fixture import standalone_fixture
from perfsuite.records import Case, Conditions, Outcome
from perfsuite.run.heap import steady_heap
from perfsuite.run.lifetime import watch_parent
from perfsuite.run.plan import RoundSettings
from perfsuite.run.profiling import profile_ops
from perfsuite.run.side_code import BaseFinder, ProjectFiles, SideCode, source_folders, workload_files
from perfsuite.run.wire import (
    WorkerSpec,
    op_profile_to_json,
    outcome_to_json,
    run_to_json,
    worker_spec_from_json,
)

if TYPE_CHECKING:
    from perfsuite.run.measure import WarmCase


def standalone_benchmark(name: str, rounds: RoundSettings | None = None) -> Any:
    """pytest-benchmark's `benchmark` fixture outside a pytest session (`perfsuite.benchmark_fixture`), with the
    given round settings."""
    rounds = rounds or RoundSettings()
    return standalone_fixture(name, rounds.min_rounds, rounds.min_time_s, rounds.max_time_s)


def make_sides(spec: WorkerSpec) -> dict[str, SideCode]:
    """The sides of `spec`, each with its path entries, and the base's finder where it runs a base checkout."""
    sides: dict[str, SideCode] = {}
    if not spec.sides:
        return sides
    head_root = Path(spec.head_root or spec.sides[-1].root).resolve()
    for side in spec.sides:
        root = Path(side.root).resolve()
        files = ProjectFiles(head_root, root, frozenset(spec.model_modules))
        rebased = root != head_root
        entries = [str(root)] + source_folders(workload_files(side.workload_sources))
        sides[side.name] = SideCode(
            side.name, root, files, BaseFinder(files) if rebased else None,
            registry=({}, False, False), path_entries=tuple(entries),
        )
    return sides


def torch_fingerprint() -> dict[str, int]:
    """The identity of what code most often patches in torch itself: every attribute of torch.nn's classes and of
    torch.Tensor, and the functions of torch.nn.functional. Two sides in one process share torch, so a side whose
    import changes one of these would change it for the other side too."""
    import torch
    import torch.nn.functional

    found: dict[str, int] = {}
    owners = [(f"torch.nn.{name}", value) for name, value in vars(torch.nn).items() if isinstance(value, type)]
    for owner, cls in [*owners, ("torch.Tensor", torch.Tensor)]:
        found.update({f"{owner}.{attribute}": id(value) for attribute, value in vars(cls).items()})
    found.update({f"torch.nn.functional.{name}": id(value) for name, value in vars(torch.nn.functional).items()
                  if callable(value)})
    return found


def hello(spec: WorkerSpec, sides: Mapping[str, SideCode]) -> dict[str, Any]:
    """This process's interpreter and torch; per side the models of `check_models` it cannot find (name: why), the
    base modules it took from the head's tree, compiled project modules, and what of torch its import changed."""
    import torch

    from perfsuite.workloads.sources import find_workload

    reports: dict[str, Any] = {}
    for side_spec in spec.sides:
        side = sides[side_spec.name]
        missing, absent = {}, []
        before = torch_fingerprint()
        with side.active():
            for model in spec.check_models:
                sources = list(side_spec.workload_sources.get(model, ()))
                try:
                    find_workload(model, sources)
                except Exception as error:
                    missing[model] = str(error)
                    # Not registered by its files, or a file of it this side lacks: a model this side does not have
                    # (a failing import is another matter).
                    if isinstance(error, LookupError) or any(s["file"] and not os.path.exists(s["file"])
                                                             for s in sources):
                        absent.append(model)
        patched = sorted(name for name, identity in torch_fingerprint().items() if before.get(name) != identity)
        reports[side.name] = {"missing": missing, "absent": absent, "leaks": side.leaks(),
                              "extensions": side.extension_modules(), "patches_torch": patched}
    return {"ok": True, "python": sys.executable, "python_version": sys.version.split()[0],
            "torch_version": torch.__version__, "sides": reports}


def measure_case(spec: WorkerSpec, case: Case, count_flops: bool) -> Outcome:
    """The outcome of measuring `case` from start to end in this process, as the pytest process measures it, its
    model found where the gate's spec says."""
    from perfsuite.run.measure import failure_of, measure
    from perfsuite.workloads.sources import find_workload

    try:
        find_workload(case.model, list(spec.workload_sources.get(case.model, ())))
    except Exception as error:  # the model cannot be found here: the case fails with that message
        return failure_of(case, error)
    settings = replace(spec.measure, count_flops=count_flops)
    return measure(case, settings, spec.rounds, standalone_benchmark(case.benchmark_id, spec.rounds))


def source_file(case: Case) -> str | None:
    """The file that defines the case's model builder (where this side took the model from)."""
    from perfsuite.workloads import get_workload

    builder: Any = get_workload(case.model).build_module
    while hasattr(builder, "func"):
        builder = builder.func
    try:
        file = inspect.getsourcefile(builder)
    except TypeError:
        return None
    return None if file is None else os.path.realpath(file)


def save_output(output: object, path: str) -> None:
    """Save the tensors of a step's output (a tensor, or a tuple, list or mapping of them) to `path` on the CPU."""
    import torch

    def tensors(value: object) -> list[torch.Tensor]:
        if isinstance(value, torch.Tensor):
            return [value.detach().float().cpu()]
        if isinstance(value, Mapping):
            return [t for item in value.values() for t in tensors(item)]
        if isinstance(value, (tuple, list)):
            return [t for item in value for t in tensors(item)]
        return []

    torch.save(tensors(output), path)


class OpenCases:
    """The cases a worker holds open, one per side (the gate's worker: one, under None), with the rounds each has
    timed; one method per request, each returning its reply."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.settings = replace(spec.measure, count_flops=False)  # a case opened for windows compares times: no FLOPs
        self.warm: dict[str | None, WarmCase] = {}
        self.round_times_s: dict[str | None, list[float]] = {}
        self.conditions_before: dict[str | None, Conditions] = {}

    def measure(self, request: Mapping[str, Any]) -> dict[str, Any]:
        outcome = measure_case(self.spec, Case(**request["case"]), bool(request.get("count_flops")))
        return {"ok": True, "outcome": outcome_to_json(outcome)}

    def open(self, name: str | None, request: Mapping[str, Any]) -> dict[str, Any]:
        from perfsuite.run.measure import open_case

        case = Case(**request["case"])
        started_s = time.perf_counter()
        opened = self.warm[name] = open_case(case, self.settings, self.spec.rounds)
        self.conditions_before[name] = opened.device.conditions()
        opened.device.reset_memory_peak()
        self.round_times_s[name] = []
        if request.get("output_path"):
            save_output(opened.first_output, request["output_path"])
        return {"ok": True, "open_s": time.perf_counter() - started_s, "warmup_s": opened.warmup_total_s,
                "steps_per_round": opened.steps_per_round, "step_s": opened.step_s, "source": source_file(case)}

    def window(self, name: str | None, request: Mapping[str, Any]) -> dict[str, Any]:
        opened = self.warm[name]
        if request.get("steps"):  # the block's steps per round, the same on both sides
            opened.steps_per_round = int(request["steps"])
        times_s = opened.time_rounds(float(request["duration_s"]))
        self.round_times_s[name] += times_s
        return {"ok": True, "times_s": times_s}

    def profile(self, name: str | None, request: Mapping[str, Any]) -> dict[str, Any]:
        from perfsuite.run.measure import failure_of

        opened = self.warm[name]
        try:
            profile = profile_ops(opened.prepared.run_step, opened.device, int(request["steps"]))
        except Exception as error:  # the case stays open: its block's windows are timed already
            return {"ok": False, "outcome": outcome_to_json(failure_of(opened.case, error))}
        return {"ok": True, "profile": op_profile_to_json(profile)}

    def close(self, name: str | None) -> dict[str, Any]:
        times_s = self.round_times_s.pop(name, [])
        before = self.conditions_before.pop(name, None)
        run = None
        if times_s:  # else opened but never timed (the other side did not fit beside it): no run
            self.warm[name].check_no_compilation()
            run = replace(self.warm[name].run_of(times_s, self.settings.fresh_process), conditions_before=before,
                          conditions_after=self.warm[name].device.conditions())
        closing = self.warm.pop(name)
        closing.close()
        device = closing.device
        del closing
        device.free_cached_memory()  # what the case held is freed before the next case or side builds
        return {"ok": True, "run": None if run is None else run_to_json(run)}

    def failed(self, name: str | None, request: Mapping[str, Any], error: Exception) -> dict[str, Any]:
        """The reply to a request that raised: the failure of its case (closed, when it was open); re-raises an
        error that belongs to no case."""
        from perfsuite.run.measure import failure_of
        failing_case = (self.warm[name].case if name in self.warm
                        else Case(**request["case"]) if "case" in request else None)
        if name in self.warm:
            self.warm.pop(name).close()
        if failing_case is None:
            raise error
        return {"ok": False, "outcome": outcome_to_json(failure_of(failing_case, error))}


def serve(spec: WorkerSpec, requests: IO[str], replies: IO[str]) -> int:
    """Answer requests until `exit` or the end of input; returns the exit code."""
    sides = make_sides(spec)
    heap = steady_heap() if len(spec.sides) == 2 else None  # two sides taking turns: perfsuite.run.heap says why
    cases = OpenCases(spec)

    def reply(document: Mapping[str, Any]) -> None:
        replies.write(json.dumps(document) + "\n")
        replies.flush()

    reply({**hello(spec, sides), "heap": heap})
    for line in requests:
        request = json.loads(line)
        op = request["op"]
        if op == "exit":
            break
        name = request.get("side", next(iter(sides), None))
        try:
            with contextlib.nullcontext() if name is None else sides[name].active():
                if op == "measure":
                    reply(cases.measure(request))
                elif op == "open":
                    reply(cases.open(name, request))
                elif op == "window":
                    reply(cases.window(name, request))
                elif op == "profile":
                    reply(cases.profile(name, request))
                elif op == "close":
                    reply(cases.close(name))
                else:
                    raise ValueError(f"unknown request {op!r}")
        except Exception as error:
            reply(cases.failed(name, request, error))
    return 0


def main(argv: list[str] | None = None) -> int:
    """The process entry: `python -m perfsuite.run.worker SPEC.json`."""
    arguments = sys.argv[1:] if argv is None else argv
    spec = worker_spec_from_json(json.loads(Path(arguments[0]).read_text(encoding="utf-8")))
    sys.path[:0] = [entry for entry in spec.sys_path if entry not in sys.path]
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the model's prints go to standard error
    watch_parent()
    # A terminal's Ctrl-C reaches the whole process group: the session stops its workers itself, so a worker never
    # dies mid-reply and turns the interrupt into a failed case.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    if spec.threads:
        torch.set_num_threads(int(spec.threads))
    return serve(spec, sys.stdin, replies)


if __name__ == "__main__":
    sys.exit(main())
