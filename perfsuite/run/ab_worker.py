"""A warm measuring process of one A/B side: `python -m perfsuite.run.ab_worker SPEC.json` answers requests, one
JSON line each on its standard input, with one JSON line each on its standard output:

- `{"op": "open", "case": {...}, "output_path": P}`: build and warm the case (`perfsuite.run.measure.open_case`, as
  every measuring path does); reply its warm-up seconds, the steps of a round and the file its model came from; when
  `output_path` is given, the first warm-up step's output is saved there for the numbers check;
- `{"op": "window", "duration_s": D}`: time rounds for about D seconds; reply each round's time per step;
- `{"op": "close"}`: reply the case's run (every round of its windows, its memory figures) and release it;
- `{"op": "exit"}`.

A failure replies `{"ok": false, "outcome": ...}` (the same Failure every path gives) and the process goes on. The
model's own prints go to standard error, so they never garble a reply. The spec says which checkout the models come
from: its `sys_path` first on the path, and for perfsuite's own repository (`builtin_models_root`) the built-in
model modules of that checkout while the harness stays this process's perfsuite.
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from perfsuite.records import Case
from perfsuite.run.lifetime import watch_parent
from perfsuite.run.plan import MeasureSettings, RoundSettings


class BuiltinModelsFrom(importlib.abc.MetaPathFinder):
    """Imports the built-in model modules (`perfsuite.workloads.MODEL_MODULES`) from another checkout's
    perfsuite/workloads folder, under their own names; every other perfsuite module stays this process's."""

    def __init__(self, workloads_folder: Path, names: Sequence[str]) -> None:
        self.workloads_folder, self.names = workloads_folder, set(names)

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        if fullname not in self.names:
            return None
        file = self.workloads_folder / f"{fullname.rsplit('.', 1)[1]}.py"
        if not file.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, file)


def hello(spec: Mapping[str, Any]) -> dict[str, Any]:
    """This side's interpreter and torch, and the models of `check_models` it cannot find (name: why)."""
    import torch

    from perfsuite.workloads.sources import find_workload

    missing = {}
    for model in spec.get("check_models", []):
        try:
            find_workload(model, spec["workload_sources"].get(model, []))
        except Exception as error:
            missing[model] = str(error)
    return {"ok": True, "python": sys.executable, "python_version": sys.version.split()[0],
            "torch_version": torch.__version__, "missing": missing}


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


def serve(spec: Mapping[str, Any], requests: IO[str], replies: IO[str]) -> int:
    """Answer requests until `exit` or the end of input; returns the exit code."""
    from perfsuite.run.measure import WarmCase, failure_of, open_case
    from perfsuite.run.wire import outcome_to_json, run_to_json

    settings = MeasureSettings(int(spec["warmup_steps"]), spec.get("ddp_processes"),
                               fresh_process=bool(spec.get("fresh_process")), figure=spec["figure"],
                               count_flops=False)
    rounds = RoundSettings(**spec["rounds"])
    warm: WarmCase | None = None
    round_times_s: list[float] = []

    def reply(document: Mapping[str, Any]) -> None:
        replies.write(json.dumps(document) + "\n")
        replies.flush()

    reply(hello(spec))
    for line in requests:
        request = json.loads(line)
        op = request["op"]
        if op == "exit":
            break
        try:
            if op == "open":
                case = Case(**request["case"])
                started_s = time.perf_counter()
                warm = open_case(case, settings, rounds)
                warm.device.reset_memory_peak()
                round_times_s = []
                if request.get("output_path"):
                    save_output(warm.first_output, request["output_path"])
                reply({"ok": True, "open_s": time.perf_counter() - started_s, "warmup_s": warm.warmup_total_s,
                       "steps_per_round": warm.steps_per_round, "step_s": warm.step_s, "source": source_file(case)})
            elif op == "window":
                assert warm is not None, "window before open"
                times_s = warm.time_rounds(float(request["duration_s"]))
                round_times_s += times_s
                reply({"ok": True, "times_s": times_s})
            elif op == "close":
                assert warm is not None, "close before open"
                warm.check_no_compilation()
                run = warm.run_of(round_times_s, settings.fresh_process)
                device = warm.device
                warm.close()
                warm = None
                gc.collect()  # what the case held is freed before the next case (or the other side) builds
                device.free_cached_memory()
                reply({"ok": True, "run": run_to_json(run)})
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception as error:
            failing = warm.case if warm is not None else Case(**request["case"]) if "case" in request else None
            if warm is not None:
                warm.close()
                warm = None
            if failing is None:
                raise
            reply({"ok": False, "outcome": outcome_to_json(failure_of(failing, error))})
    return 0


def main(argv: list[str] | None = None) -> int:
    """The process entry: `python -m perfsuite.run.ab_worker SPEC.json`."""
    arguments = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(arguments[0]).read_text(encoding="utf-8"))
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the model's prints go to standard error
    watch_parent()
    sys.path[:0] = [p for p in spec.get("sys_path", []) if p not in sys.path]
    if spec.get("builtin_models_root"):
        from perfsuite.workloads import MODEL_MODULES

        folder = Path(spec["builtin_models_root"]) / "perfsuite" / "workloads"
        sys.meta_path.insert(0, BuiltinModelsFrom(folder, MODEL_MODULES))
    import torch

    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    return serve(spec, sys.stdin, replies)


if __name__ == "__main__":
    sys.exit(main())
