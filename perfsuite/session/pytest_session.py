"""One pytest session of benchmarks: its plan, made once the cases are collected, and its kind, chosen once: the
history gate (`perfsuite.session.gate.Gate`: each case judged against this machine's baselines) or the A/B job
(`perfsuite.session.ab.AbJob`: every case measured on head and base and judged head against base). Both take each case
as its test runs, finish (the files written), report (the terminal's sections) and say whether every file was
written (the session's exit status): the steps of `SessionJob`, which the pytest plugin calls through `Session`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from perfsuite.errors import UsageError
from perfsuite.judge.conditions import degradations
from perfsuite.judge.threads import thread_warning
from perfsuite.options.settings import Settings
from perfsuite.records import Case, Conditions, Measurement
from perfsuite.render.conditions import conditions_header, recording_refused_message
from perfsuite.render.progress import progress_line
from perfsuite.run.devices import backend, machine_fingerprint
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan
from perfsuite.run.side_code import source_folders
from perfsuite.session.ab import AbJob, prepare_ab
from perfsuite.session.gate import Gate, current_commit
from perfsuite.workloads import get_workload
from perfsuite.workloads.sources import workload_sources


class SessionJob(Protocol):
    """What a session does with its cases; one kind per session (the history gate or the A/B job)."""

    @property
    def files_written(self) -> bool:
        """Whether every file the session had to write was written (else the session fails)."""

    def take(self, case: Case, fixture: Any) -> Measurement | None:
        """Measure and judge `case` as its test runs, with pytest-benchmark's `fixture` showing its rounds (None
        when no round was timed). Raises CaseSkipped or CaseFailed with the message its test shows."""

    def finish(self, summary_dir: Path, interrupted: bool) -> None:
        """Judge what is left, write the session's files into `summary_dir` and release what the session held."""

    def report(self) -> list[tuple[str, str]]:
        """The sections of the terminal report (title, text), with the files written."""


@dataclass
class Session:
    """A session's plan and job; `show` writes a line to the terminal while tests run, `benchmarks` is how many
    benchmarks the session runs (0: no progress lines)."""

    plan: SessionPlan
    job: SessionJob
    show: Callable[[str], None] = print
    benchmarks: int = 0
    _done: int = 0

    def take(self, case: Case, fixture: Any) -> Measurement | None:
        """Measure and judge `case` (`SessionJob.take`)."""
        return self.job.take(case, fixture)

    def benchmark_done(self, elapsed_s: float) -> None:
        """After each benchmark measured in the pytest process, a line with the cases done, the time so far and an
        estimate of what is left (with K processes the processes' own lines say it instead)."""
        self._done += 1
        if self.plan.in_pytest_process:
            self.show(progress_line(self._done, self.benchmarks, elapsed_s))

    def finish(self, summary_dir: Path, interrupted: bool) -> bool:
        """Finish the job (`SessionJob.finish`); whether every file was written."""
        self.job.finish(summary_dir, interrupted)
        return self.job.files_written

    def report(self) -> list[tuple[str, str]]:
        """The sections of the terminal report (`SessionJob.report`)."""
        return self.job.report()


def plan_of(settings: Settings, cases: Sequence[Case], rounds: RoundSettings, project_root: Path) -> SessionPlan:
    """The plan of a session that measures `cases` as `settings` say, with pytest-benchmark's `rounds`; workers put
    `project_root` first on their path and find each model where the pytest process found it."""
    sources = {}
    sys_path = [str(project_root)]
    if settings.processes > 1:
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


def ab_job(settings: Settings, plan: SessionPlan, project_root: Path, show: Callable[[str], None],
           conditions: Mapping[str, Conditions] | None = None) -> AbJob | None:
    """The session's A/B job when its settings ask for one, both sides set up and checked (every selected model found
    on each) before anything is measured; a UsageError says what is wrong. `conditions`: the machine's, by device,
    as the job starts (each block's are compared with them)."""
    if not settings.ab or not plan.cases:
        return None
    job = prepare_ab(settings, plan, project_root)
    job.show = show
    job.conditions = dict(conditions or {})
    job.check()
    return job


def thread_warnings(settings: Settings) -> list[str]:
    """The header's warning when each measuring process would run more torch CPU threads than this machine's free
    cores (cores less the load average) give it (`perfsuite.judge.threads.thread_warning`); none off the CPU."""
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
    """The session of `cases` and its kind, chosen here once: the A/B job when the settings ask for one (set up and
    checked before anything is measured; a UsageError says what is wrong), else the gate on this machine's
    baselines. The machine's conditions are read first and shown, with what to change before measuring; a
    recording session under degraded conditions is refused (UsageError) unless the settings allow it."""
    plan = plan_of(settings, cases, rounds, project_root)
    conditions = session_conditions(plan)
    for line in conditions_header(conditions):
        show(line)
    check_recording_conditions(settings, conditions)
    job: SessionJob | None = ab_job(settings, plan, project_root, show, conditions)
    if job is None:
        job = Gate(settings, project_root / settings.baseline_dir, machine_fingerprint(), current_commit(project_root),
                   plan, show=show, conditions=conditions)
    return Session(plan, job, show=show)


def session_conditions(plan: SessionPlan) -> dict[str, Conditions]:
    """The machine's conditions as the session starts, by device of its cases (read by each device's backend);
    none where the session measures nothing."""
    return {device: backend(device).conditions() for device in dict.fromkeys(case.device for case in plan.cases)}


def check_recording_conditions(settings: Settings, conditions: Mapping[str, Conditions]) -> None:
    """Refuse (UsageError, before anything is measured) a recording session that starts under degraded conditions
    (on battery, Low Power, thermal pressure, a GPU slowdown) unless --perf-record-degraded allows it."""
    found = degradations(conditions.values())
    if (settings.update_baseline or settings.rebaseline) and found and not settings.record_degraded:
        raise UsageError(recording_refused_message(found))
