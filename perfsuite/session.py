"""The measuring of one pytest session: its plan, made once the cases are collected, and what each case's outcomes
make (a measurement, or the failure to report), the same way with one process or K.

With one process the pytest process measures each case when its test runs (`perfsuite.run.measure.measure`, with
pytest-benchmark's fixture). With K, the first case's test measures the whole plan in worker processes
(`perfsuite.run.processes`), and each test then takes its case's outcomes. An interrupt keeps the outcomes reported
before it, so the cases every process finished are still judged and recorded at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfsuite.matrix.cases import sweep_key
from perfsuite.records import Case, Failure, Measurement, Outcome, Run, measurement_of
from perfsuite.render.progress import process_progress_line
from perfsuite.run.plan import SessionPlan


@dataclass
class Session:
    """A session's plan and the outcomes so far; `show` writes a line to the terminal while tests run."""

    plan: SessionPlan
    show: Callable[[str], None] = print
    outcomes: dict[str, list[Outcome]] | None = None
    interrupted: bool = False
    judged: set[str] = field(default_factory=set)
    out_of_memory: dict[tuple[str, ...], int] = field(default_factory=dict)

    def take(self, case: Case, fixture: Any) -> Measurement | Failure | None:
        """Measure `case` (or take its outcomes from the processes that measured the plan) and say what they make;
        a case that ran out of memory ends its sweep for the larger batch sizes."""
        result = measurement_of(case, self._outcomes_of(case, fixture))
        if isinstance(result, Failure) and result.kind == "out-of-memory":
            self.out_of_memory[sweep_key(case)] = case.batch_size
        self.judged.add(case.benchmark_id)
        return result

    def _outcomes_of(self, case: Case, fixture: Any) -> list[Outcome]:
        from perfsuite.run.measure import measure

        if self.plan.in_pytest_process:
            return [measure(case, self.plan.measure, fixture)]
        if self.outcomes is None:
            from perfsuite.run.processes import Interrupted, measure_in_processes

            try:
                self.outcomes = measure_in_processes(self.plan, lambda p: self.show(process_progress_line(p)))
            except Interrupted as stop:
                self.outcomes, self.interrupted = stop.outcomes, True
                raise KeyboardInterrupt from None
        return self.outcomes.get(case.benchmark_id, [])

    def finished_unjudged(self) -> list[Measurement]:
        """The measurements of cases that every process finished but no test took (the session was interrupted):
        never a case with fewer runs than processes, so no partial history is ever recorded."""
        finished = []
        for case in self.plan.cases:
            outcomes = (self.outcomes or {}).get(case.benchmark_id, [])
            complete = len(outcomes) == self.plan.processes and all(isinstance(o, Run) for o in outcomes)
            if complete and case.benchmark_id not in self.judged:
                result = measurement_of(case, outcomes)
                if isinstance(result, Measurement):
                    finished.append(result)
        return finished
