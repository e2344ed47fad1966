"""A fresh measuring process: `python -m perfsuite.run.worker SPEC.json OUT.jsonl` times the cases of its spec
in the order given and appends one JSON line per case to OUT as soon as the case ends, so a crash keeps what
was measured before it.

A line is `{"benchmark_id": ..., "run": {...}}`, or `"out_of_memory"` / `"error"` with a message instead of
`"run"`. The spec names the cases, the warm-up, torch's threads, the train-ddp processes, pytest-benchmark's
round settings, and where each workload is defined (a user's conftest.py is imported here too).
"""

from __future__ import annotations

import inspect
import json
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from perfsuite.run.lifetime import watch_parent

ERROR_TAIL_CHARACTERS = 2000


class _SilentLogger:
    """pytest-benchmark's fixture logs calibration details; outside pytest nobody reads them."""

    def debug(self, *args: Any, **kwargs: Any) -> None:
        pass

    info = warning = error = debug


def standalone_benchmark(name: str, min_rounds: int = 5, max_time_s: float = 1.0, min_time_s: float = 5e-6) -> Any:
    """pytest-benchmark's `benchmark` fixture outside a pytest session, with its command-line defaults
    (perf_counter, no warm-up on CPython) and the given round settings."""
    from pytest_benchmark.fixture import BenchmarkFixture
    from pytest_benchmark.timers import default_timer
    from pytest_benchmark.utils import NameWrapper

    node = SimpleNamespace(name=name, nodeid=f"perfsuite::{name}", _nodeid=f"perfsuite::{name}")
    options = {
        # Releases before 5.2 read the node id from `_nodeid` (as pytest items have it), later ones from `nodeid`.
        "node": node, "disable_gc": False, "timer": NameWrapper(default_timer), "min_rounds": min_rounds,
        "min_time": min_time_s, "max_time": max_time_s, "precision": None, "confidence": 0.99, "warmup": False,
        "warmup_iterations": 100000, "calibration_precision": 10, "add_stats": lambda stats: None,
        "logger": _SilentLogger(), "warner": lambda *args, **kwargs: None, "disabled": False, "cprofile": False,
        "cprofile_loops": None, "cprofile_dump": None,
    }
    # The constructor's arguments differ between pytest-benchmark releases; pass the ones this one takes.
    accepted = inspect.signature(BenchmarkFixture).parameters
    return BenchmarkFixture(**{key: value for key, value in options.items() if key in accepted})


def measure(spec: Mapping[str, Any], out: Path) -> int:
    """Time every case of `spec`, appending a line per case to `out`; returns the exit code (0)."""
    sys.path[:0] = [p for p in spec.get("sys_path", []) if p not in sys.path]
    import torch

    from perfsuite.records import Case
    from perfsuite.run.compiled import CaptureImpossible
    from perfsuite.run.runner import CaseOutOfMemory, run_case
    from perfsuite.store.runs import run_to_json
    from perfsuite.workloads.sources import find_workload

    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    rounds = spec["benchmark"]
    for case_values in spec["cases"]:
        case = Case(**case_values)
        line: dict[str, Any] = {"benchmark_id": case.benchmark_id}
        try:
            find_workload(case.model, spec["workload_sources"].get(case.model, []))
            fixture = standalone_benchmark(
                case.benchmark_id, int(rounds["min_rounds"]), float(rounds["max_time_s"]), float(rounds["min_time_s"])
            )
            run = run_case(
                fixture, case, int(spec["warmup_steps"]), spec.get("ddp_processes"),
                fresh_process=len(spec["cases"]) == 1,
            )
            line["run"] = None if run is None else run_to_json(run)
        except CaseOutOfMemory as error:
            line["out_of_memory"] = str(error)
        except CaptureImpossible as error:
            line["skipped"] = f"{case.benchmark_id}: {error}"
        except Exception as error:  # reported to the pytest process, which fails that case with it
            line["error"] = (f"{type(error).__name__}: {error}\n" + traceback.format_exc())[-ERROR_TAIL_CHARACTERS:]
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The process entry: `python -m perfsuite.run.worker SPEC.json OUT.jsonl`."""
    arguments = sys.argv[1:] if argv is None else argv
    spec_path, out_path = Path(arguments[0]), Path(arguments[1])
    watch_parent()
    return measure(json.loads(spec_path.read_text(encoding="utf-8")), out_path)


if __name__ == "__main__":
    sys.exit(main())
