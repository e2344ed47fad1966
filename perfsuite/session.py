"""One pytest session of benchmarks: its plan, made once the cases are collected, the measuring of each case, what
its outcomes make (a measurement, or the failure to report, the same way with one process or K), the gate's
verdicts, and the files and reports at the end.

With one process the pytest process measures each case when its test runs (`perfsuite.run.measure.measure`, with
pytest-benchmark's fixture). With K, the first case's test measures the whole plan in worker processes
(`perfsuite.run.processes`), and each test then takes its case's outcomes. An interrupt keeps the outcomes reported
before it, so the cases every process finished are still judged and recorded at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.ab import AbJob, prepare_ab
from perfsuite.errors import BadFileError
from perfsuite.gate import Gate
from perfsuite.judge.verdicts import Verdict
from perfsuite.matrix.cases import sweep_key, sweep_skip_reason
from perfsuite.records import Case, Failure, Measurement, Outcome, Run, measurement_of
from perfsuite.render import summary
from perfsuite.render.ab import ab_message
from perfsuite.render.progress import process_progress_line, progress_line
from perfsuite.render.results import render_results
from perfsuite.render.verdicts import verdict_message
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan
from perfsuite.settings import Settings


class CaseFailed(Exception):
    """A case's test must fail with this message (a failure to measure, a regression, an unreadable baseline)."""


class CaseSkipped(Exception):
    """A case's test must be skipped with this message (out of memory, impossible here)."""


@dataclass
class Session:
    """A session's plan, gate and outcomes so far; `show` writes a line to the terminal while tests run."""

    plan: SessionPlan
    gate: Gate
    show: Callable[[str], None] = print
    benchmarks: int = 0
    outcomes: dict[str, list[Outcome]] | None = None
    judged: set[str] = field(default_factory=set)
    out_of_memory: dict[tuple[str, ...], int] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    ab: AbJob | None = None
    _done: int = 0

    def run(self, case: Case, fixture: Any) -> Measurement | None:
        """Measure and judge `case` (None when no round was timed). Raises CaseSkipped or CaseFailed with the message
        its test shows; a case that ran out of memory ends its sweep for the larger batch sizes."""
        if self.ab is not None:
            return self._run_ab(self.ab, case, fixture)
        reason = sweep_skip_reason(case, self.out_of_memory)
        if reason:
            raise CaseSkipped(reason)
        result = measurement_of(case, self._outcomes_of(case, fixture))
        self.judged.add(case.benchmark_id)
        if isinstance(result, Failure):
            if result.kind == "out-of-memory":
                self.out_of_memory[sweep_key(case)] = case.batch_size
            if result.skips:
                raise CaseSkipped(result.message)
            self.gate.errors[case.benchmark_id] = result.message
            raise CaseFailed(result.message + (f"\n{result.details}" if result.details else ""))
        if result is not None:
            if not self.plan.in_pytest_process:
                feed_benchmark(fixture, result)
            self.judge(result)
        return result

    def _run_ab(self, job: AbJob, case: Case, fixture: Any) -> Measurement | None:
        """An A/B case: the first one measures every case on both sides; each case's test shows its head side's
        rounds and fails when its verdict fails the job (`AbVerdict.fails_job`)."""
        if not job.measured:
            job.measure(self.show)
        self.judged.add(case.benchmark_id)
        outcomes = job.head_outcomes(case)
        result = measurement_of(case, outcomes) if outcomes else None
        if isinstance(result, Measurement):
            feed_benchmark(fixture, result)
        verdict = job.verdicts[case.benchmark_id]
        fails = job.settings.inconclusive_fails, job.settings.no_base_fails
        if verdict.fails_job(*fails):
            raise CaseFailed(ab_message(verdict, *fails))
        if verdict.status == "no-base":
            raise CaseSkipped(ab_message(verdict, *fails))  # not judged: neither a pass nor a failure
        return result if isinstance(result, Measurement) else None

    def judge(self, measurement: Measurement) -> Verdict | None:
        """Judge one measurement; raises CaseFailed on a regression (unless this session records baselines) and on
        an unreadable baseline."""
        from perfsuite.run.measure import warn_of_memory_growth

        any(warn_of_memory_growth(run) for run in measurement.runs)  # one warning per case at most
        benchmark_id = measurement.case.benchmark_id
        try:
            verdict = self.gate.check(measurement)
        except BadFileError as error:
            self.gate.errors[benchmark_id] = str(error)
            raise CaseFailed(f"{benchmark_id}: {error}") from None
        if verdict is not None and verdict.gate_failed and not self.gate.records:
            raise CaseFailed(verdict_message(verdict))
        return verdict

    def _outcomes_of(self, case: Case, fixture: Any) -> list[Outcome]:
        from perfsuite.run.measure import measure

        if self.plan.in_pytest_process:
            return [measure(case, self.plan.measure, self.plan.rounds, fixture)]
        if self.outcomes is None:
            from perfsuite.run.processes import Interrupted, measure_in_processes

            try:
                self.outcomes = measure_in_processes(self.plan, lambda p: self.show(process_progress_line(p)))
            except Interrupted as stop:
                self.outcomes = stop.outcomes
                raise KeyboardInterrupt from None
        return self.outcomes.get(case.benchmark_id, [])

    def benchmark_done(self, elapsed_s: float) -> None:
        """After each benchmark measured in the pytest process, a line with the cases done, the time so far and an
        estimate of what is left (with K processes the processes' own lines say it instead)."""
        self._done += 1
        if self.plan.in_pytest_process:
            self.show(progress_line(self._done, self.benchmarks, elapsed_s))

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

    def finish(self, summary_dir: Path, interrupted: bool) -> bool:
        """Judge what an interrupt left whole, record when asked, write the summary files; whether every recording
        went through."""
        if self.ab is not None:
            self.written = self.ab.finish(summary_dir)
            return True
        for measurement in self.finished_unjudged():
            try:
                self.judge(measurement)
            except CaseFailed:
                pass  # its verdict is in the summary; no test is left to fail
        self.written, recorded = self.gate.finish(summary_dir, len(self.plan.cases), interrupted)
        return recorded

    def report(self) -> list[tuple[str, str]]:
        """The sections of the terminal report: the results tables and the gate's summary, with the files written."""
        if self.ab is not None:
            return [(title, text + "".join(f"{line}\n" for line in self.written)) for title, text in self.ab.report()]
        gate = self.gate
        if not gate.verdicts and not gate.errors:
            return []
        sections = [("perfsuite results", render_results(gate.measurements, gate.verdict_names()))]
        gate_text = summary.render_terminal(gate.verdicts, gate.errors, gate.explained) + "".join(
            f"{line}\n" for line in self.written)
        return sections[: bool(gate.measurements)] + [("perfsuite regression gate", gate_text)]


def plan_of(settings: Settings, cases: Sequence[Case], rounds: RoundSettings, project_root: Path) -> SessionPlan:
    """The plan of a session that measures `cases` as `settings` say, with pytest-benchmark's `rounds`; workers put
    `project_root` first on their path and find each model where the pytest process found it."""
    sources = {}
    sys_path = [str(project_root)]
    if settings.processes > 1:
        from perfsuite.run.side_code import source_folders
        from perfsuite.workloads import get_workload
        from perfsuite.workloads.sources import workload_sources

        sources = {case.model: workload_sources(get_workload(case.model)) for case in cases}
        # The folders pytest put on the path for them (a conftest's sibling helper module imports in a worker too).
        files = [source["file"] for model_sources in sources.values() for source in model_sources]
        sys_path += [folder for folder in source_folders(files) if folder not in sys_path]
    return SessionPlan(
        tuple(cases), settings.processes,
        MeasureSettings(settings.warmup_steps, settings.ddp_processes, figure=settings.figure,
                        profile_ops=settings.history_explain != "none" and not settings.ab), rounds,
        settings.isolation, settings.threads, sources, tuple(sys_path),
    )


def ab_job(settings: Settings, plan: SessionPlan, project_root: Path) -> AbJob | None:
    """The session's A/B job when its settings ask for one, both sides set up and checked (every selected model found
    on each) before anything is measured; a UsageError says what is wrong."""
    if not settings.ab or not plan.cases:
        return None
    job = prepare_ab(settings, plan, project_root)
    job.check()
    return job


def feed_benchmark(benchmark: Any, measurement: Measurement) -> None:
    """Give pytest-benchmark's fixture the rounds of every run measured in worker processes, so its table and JSON
    show them (its statistics then pool the rounds of all processes; the per-run medians are in extra_info)."""
    from perfsuite.run.measure import extra_info

    if getattr(benchmark, "disabled", False) or not hasattr(benchmark, "_make_stats"):
        return
    benchmark._mode = "perfsuite processes"
    stats = benchmark._make_stats(1)
    for round_time_s in measurement.round_times_s:
        stats.update(round_time_s)
    benchmark.extra_info.update(extra_info(measurement.last))


def thread_warnings(settings: Settings) -> list[str]:
    """The header's warning when each measuring process would run more torch CPU threads than this machine's free
    cores (cores less the load average) give it (`perfsuite.judge.threads.thread_warning`); none off the CPU."""
    import os

    import torch

    from perfsuite.judge.threads import thread_warning

    if "cpu" not in settings.matrix.devices:
        return []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    warning = thread_warning(settings.threads or torch.get_num_threads(), cores, os.getloadavg()[0])
    return [warning] if warning else []


def round_settings(option: Callable[[str, Any], Any]) -> RoundSettings:
    """pytest-benchmark's round options (`option(name, default)` reads one), with its defaults where not given."""
    return RoundSettings(int(option("benchmark_min_rounds", None) or 5),
                         float(option("benchmark_max_time", None) or 1.0),
                         float(option("benchmark_min_time", None) or 5e-6))


def start_session(
    settings: Settings, cases: Sequence[Case], rounds: RoundSettings, project_root: Path, show: Callable[[str], None]
) -> Session:
    """The session of `cases`: its gate on this machine's baselines, its plan, and its A/B job when asked for (set
    up and checked before anything is measured; a UsageError says what is wrong)."""
    from perfsuite.gate import current_commit
    from perfsuite.run.devices import machine_fingerprint

    gate = Gate(settings, project_root / settings.baseline_dir, machine_fingerprint(), current_commit(project_root))
    plan = plan_of(settings, cases, rounds, project_root)
    return Session(plan, gate, show=show, ab=ab_job(settings, plan, project_root))
