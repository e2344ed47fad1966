"""A fresh measuring process: `python -m perfsuite.run.worker SPEC.json OUT.jsonl` measures the cases of its spec
in the order given (through `perfsuite.run.measure.measure`, as the pytest process does) and appends one JSON line
per case to OUT as soon as the case ends, so a crash keeps what was measured before it.

A line is `{"benchmark_id": ..., **outcome}` with the outcome as `perfsuite.run.wire` writes it. The spec is a
`SessionPlan`'s measuring settings (`spec_of`), the cases of this process and those whose FLOPs it counts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from perfsuite.benchmark_fixture import standalone_fixture
from perfsuite.records import Case, Outcome
from perfsuite.run.lifetime import watch_parent
from perfsuite.run.plan import RoundSettings, SessionPlan


def standalone_benchmark(name: str, rounds: RoundSettings | None = None) -> Any:
    """pytest-benchmark's `benchmark` fixture outside a pytest session (`perfsuite.benchmark_fixture`), with the
    given round settings."""
    rounds = rounds or RoundSettings()
    return standalone_fixture(name, rounds.min_rounds, rounds.min_time_s, rounds.max_time_s)


def spec_of(plan: SessionPlan, cases: Sequence[Case], count_flops_of: Collection[str] = ()) -> dict[str, Any]:
    """What a worker needs to measure `cases` as `plan` says, as JSON-ready data; the FLOPs are counted for the
    cases whose benchmark ids are in `count_flops_of` (where the plan counts them)."""
    return {
        "cases": [asdict(case) for case in cases], "warmup_steps": plan.measure.warmup_steps,
        "count_flops_of": [case.benchmark_id for case in cases
                           if plan.measure.count_flops and case.benchmark_id in count_flops_of],
        "ddp_processes": plan.measure.ddp_processes, "figure": plan.measure.figure, "threads": plan.threads,
        "rounds": asdict(plan.rounds),
        "workload_sources": {name: list(sources) for name, sources in plan.workload_sources.items()},
        "sys_path": list(plan.sys_path),
    }


def measure_spec(spec: Mapping[str, Any], out: Path) -> int:
    """Measure every case of `spec`, appending a line per case to `out`; returns the exit code (0)."""
    sys.path[:0] = [p for p in spec.get("sys_path", []) if p not in sys.path]
    import torch

    from perfsuite.run.measure import failure_of, measure
    from perfsuite.run.plan import MeasureSettings
    from perfsuite.run.wire import outcome_to_json
    from perfsuite.workloads.sources import find_workload

    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    rounds = RoundSettings(**spec["rounds"])
    settings = MeasureSettings(
        int(spec["warmup_steps"]), spec.get("ddp_processes"), fresh_process=len(spec["cases"]) == 1,
        figure=spec["figure"],
    )
    for values in spec["cases"]:
        case = Case(**values)
        case_settings = replace(settings, count_flops=case.benchmark_id in spec["count_flops_of"])
        outcome: Outcome
        try:
            find_workload(case.model, spec["workload_sources"].get(case.model, []))
        except Exception as error:  # the model cannot be found here: the case fails with that message
            outcome = failure_of(case, error)
        else:
            outcome = measure(case, case_settings, rounds, standalone_benchmark(case.benchmark_id, rounds))
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"benchmark_id": case.benchmark_id, **outcome_to_json(outcome)}) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The process entry: `python -m perfsuite.run.worker SPEC.json OUT.jsonl`."""
    arguments = sys.argv[1:] if argv is None else argv
    spec_path, out_path = Path(arguments[0]), Path(arguments[1])
    watch_parent()
    return measure_spec(json.loads(spec_path.read_text(encoding="utf-8")), out_path)


if __name__ == "__main__":
    sys.exit(main())
