"""The history gate, one of a session's two kinds (`perfsuite.session.pytest_session.SessionJob`; the other is the A/B
job): each case measured as its test runs (in the pytest process, or the whole plan in worker processes by the first
case's test), judged against this machine's baseline history, recorded when asked, and reported.

It holds the session's state (this machine's identity, baseline files read once, outcomes, verdicts and errors so
far, runs to record) and delegates every measurement to `perfsuite.run`, every decision to `perfsuite.judge`,
every file to `perfsuite.store` and every sentence to `perfsuite.render`. An interrupt keeps the outcomes reported
before it, so the cases every process finished are still judged and recorded at the end.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfsuite.benchmark_fixture import feed_rounds
from perfsuite.errors import BadFileError, CaseFailed, CaseSkipped, UsageError
from perfsuite.judge.conditions import degradations
from perfsuite.judge.explain import Explanation, explain_against_history
from perfsuite.judge.verdicts import Verdict, judge, measured_conditions, pooled_machine_spread
from perfsuite.matrix.cases import sweep_key, sweep_skip_reason
from perfsuite.options.settings import Settings, tolerance_for
from perfsuite.records import BaselineEntry, Case, Conditions, Failure, Measurement, Outcome, Run, measurement_of
from perfsuite.render import summary
from perfsuite.render.conditions import case_refused_message
from perfsuite.render.progress import process_progress_line
from perfsuite.render.results import render_results, render_results_markdown
from perfsuite.render.summary import explained_lines
from perfsuite.render.verdicts import verdict_message
from perfsuite.run.measure import extra_info, measure, warn_of_memory_growth
from perfsuite.run.plan import SessionPlan
from perfsuite.run.processes import Interrupted, measure_in_processes
from perfsuite.store import archive, baselines
from perfsuite.store.archive import ArchivedSession, ArchivedVerdict
from perfsuite.store.baselines import BaselineFile, IncompatibleHistory
from perfsuite.store.files import keep_out_of_git, write_text_atomically


@dataclass
class Gate:
    """Measures and judges each case of `plan` against its baseline; records runs when the settings ask for it.

    `baseline_dir` is the settings' baseline folder resolved against the project root; `show` writes a line to the
    terminal while tests run; `explained` holds, by benchmark id, each verdict's explanation by the ops against the
    history's last op summary, or the line saying why there is none (--perf-history-explain); `conditions` the
    machine's conditions by device as the session started; `refused` why each case measured under degraded
    conditions was not recorded (without --perf-record-degraded).
    """

    settings: Settings
    baseline_dir: Path
    fingerprint: Mapping[str, Any]
    commit: str | None
    plan: SessionPlan
    show: Callable[[str], None] = print
    outcomes: dict[str, list[Outcome]] | None = None
    judged: set[str] = field(default_factory=set)
    out_of_memory: dict[tuple[str, ...], int] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    files_written: bool = True
    measurements: list[Measurement] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    explained: dict[str, Explanation | str] = field(default_factory=dict)
    conditions: Mapping[str, Conditions] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    _files: dict[Path, BaselineFile | None] = field(default_factory=dict)
    _unreadable: dict[Path, BadFileError] = field(default_factory=dict)
    _pending: dict[tuple[Path, str], dict[str, BaselineEntry]] = field(default_factory=dict)

    @property
    def records(self) -> bool:
        """Whether this session writes baselines."""
        return self.settings.update_baseline or self.settings.rebaseline

    def take(self, case: Case, fixture: Any) -> Measurement | None:
        """Measure and judge `case` (None when no round was timed). Raises CaseSkipped or CaseFailed with the message
        its test shows; a case that ran out of memory ends its sweep for the larger batch sizes."""
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
            self.errors[case.benchmark_id] = result.message
            raise CaseFailed(result.message + (f"\n{result.details}" if result.details else ""))
        if result is not None:
            if not self.plan.in_pytest_process:  # measured in workers: the fixture shows their rounds
                feed_rounds(fixture, result.round_times_s, extra_info(result.last))
            self._judge(result)
        return result

    def _judge(self, measurement: Measurement) -> Verdict | None:
        """Judge one measurement; raises CaseFailed on a regression (unless this session records baselines) and on
        an unreadable baseline."""
        any(warn_of_memory_growth(run) for run in measurement.runs)  # one warning per case at most
        benchmark_id = measurement.case.benchmark_id
        try:
            verdict = self.check(measurement)
        except BadFileError as error:
            self.errors[benchmark_id] = str(error)
            raise CaseFailed(f"{benchmark_id}: {error}") from None
        if verdict is not None and verdict.gate_failed and not self.records:
            raise CaseFailed(verdict_message(verdict))
        return verdict

    def _outcomes_of(self, case: Case, fixture: Any) -> list[Outcome]:
        """The outcomes of `case`: measured now in the pytest process, or taken from the worker processes (the first
        case's test measures the whole plan in them)."""
        if self.plan.in_pytest_process:
            return [measure(case, self.plan.measure, self.plan.rounds, fixture)]
        if self.outcomes is None:
            try:
                self.outcomes = measure_in_processes(self.plan, lambda p: self.show(process_progress_line(p)))
            except Interrupted as stop:
                self.outcomes = stop.outcomes
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

    def path_for(self, device: str) -> Path:
        """This machine's baseline file for `device`."""
        slug = baselines.machine_slug(self.fingerprint, device, self.settings.machine)
        return baselines.baseline_path(self.baseline_dir, device, slug)

    def _baseline_file(self, path: Path) -> BaselineFile | None:
        if path in self._unreadable:
            raise self._unreadable[path]
        if path not in self._files:
            try:
                self._files[path] = baselines.load_baseline(path)
            except BadFileError as error:
                self._unreadable[path] = error
                raise
        return self._files[path]

    def check(self, measurement: Measurement) -> Verdict | None:
        """Judge `measurement`, remember the verdict and, when recording, the runs to record. Raises BadFileError
        for an unreadable baseline file unless this session starts histories over (then the case is recorded
        into a fresh file and None is returned)."""
        self.measurements.append(measurement)
        case = measurement.case
        path = self.path_for(case.device)
        identity = baselines.machine_identity(self.fingerprint, case.device, self.settings.machine)
        try:
            stored = self._baseline_file(path)
        except BadFileError:
            if not self.settings.rebaseline:
                raise
            stored = None
        tolerance = tolerance_for(case.benchmark_id, case.model, self.settings.tolerance.by_name,
                                  self.settings.tolerance.every_case)
        memory_tolerance = tolerance_for(
            case.benchmark_id, case.model, self.settings.memory_tolerance.by_name,
            self.settings.memory_tolerance.every_case,
            memory=True,
        )
        entries = stored.entries if stored else {}
        verdict = judge(
            measurement, entries.get(case.benchmark_id), identity, tolerance=tolerance,
            memory_tolerance=memory_tolerance, machine_spread=pooled_machine_spread(entries.values(), identity),
            baseline_source=str(path), current_memory_bytes=measurement.own_memory_bytes,
            change_fails=self.settings.change_fails,
        )
        self.verdicts.append(verdict)
        entry = entries.get(case.benchmark_id)
        if entry is not None:
            found = explain_against_history(
                self.settings.history_explain, verdict.status, entry.op_profile,
                baselines.measured_op_profile(measurement), verdict.measured_change_s,
                next((str(run.facts["op_profile_error"]) for run in measurement.runs
                      if "op_profile_error" in run.facts), None),
            )
            if found is not None:
                self.explained[case.benchmark_id] = found
        degraded = degradations(measured_conditions(measurement))
        if self.records and degraded and not self.settings.record_degraded:
            self.refused[case.benchmark_id] = case_refused_message(case.benchmark_id, degraded)
        elif self.records:
            recorded_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._pending.setdefault((path, case.device), {})[case.benchmark_id] = baselines.entry_of(
                measurement, identity, tolerance, memory_tolerance, recorded_at, self.commit,
            )
        return verdict

    @property
    def archive_dir(self) -> Path:
        """Where recorded sessions are archived: `<baseline_dir>/archive`."""
        return self.baseline_dir / archive.ARCHIVE_FOLDER

    def record(self) -> tuple[list[str], list[str]]:
        """Write the pending runs, one locked atomic update per baseline file, and archive each device's session
        beside them (a new file, never a changed one). Returns a line per file written (`recorded PATH`,
        `archived PATH`) and, for each file that could not be written and each case refused for its conditions, a
        message (nothing is half-written; the old file stays)."""
        written, problems = [], list(self.refused.values())
        now = datetime.now(timezone.utc)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        rebaseline = self.settings.rebaseline
        for (path, device), entries in self._pending.items():
            try:
                if rebaseline and path in self._unreadable and path.exists():
                    aside = baselines.move_aside(path, stamp)
                    problems.append(f"{path} could not be read; it was moved aside to {aside.name} and recorded afresh")
                baselines.record_runs(path, device, entries, rebaseline=rebaseline)
                written.append(f"recorded {path}")
            except (BadFileError, IncompatibleHistory) as error:
                problems.append(f"nothing recorded into {path}: {error}")
                continue
            except OSError as error:
                problems.append(
                    f"nothing recorded into {path}: {error.strerror or error} (the old file is unchanged); check the "
                    "folder's permissions and free space"
                )
                continue
            for session in self.archived_sessions(device, entries, now.strftime("%Y-%m-%dT%H:%M:%SZ")):
                try:
                    written.append(f"archived {archive.write_session(self.archive_dir, session)}")
                except OSError as error:
                    problems.append(
                        f"recorded into {path} but not archived under {self.archive_dir}: {error.strerror or error}; "
                        "check the folder's permissions and free space"
                    )
        self._pending.clear()
        return written, problems

    def archived_sessions(
        self, device: str, entries: Mapping[str, BaselineEntry], recorded_at: str
    ) -> list[ArchivedSession]:
        """This session's runs of `device` (`entries`, as given to the baseline store) with the verdicts judged for
        them, as archive sessions recorded at `recorded_at`: one per torch version (one in practice)."""
        verdicts = {verdict.benchmark_id: verdict for verdict in self.verdicts}
        by_torch: dict[str, list[BaselineEntry]] = {}
        for entry in entries.values():
            by_torch.setdefault(entry.torch_version, []).append(entry)
        first = next(iter(entries.values()))
        return [
            ArchivedSession(
                device=device, machine_slug=baselines.machine_slug(self.fingerprint, device, self.settings.machine),
                machine=dict(first.machine), recorded_at=recorded_at, commit=self.commit, torch_version=torch_version,
                kind="rebaseline" if self.settings.rebaseline else "update", conditions=self.conditions.get(device),
                cases=tuple(archive.archived_case(entry, archived_verdict(
                    verdicts.get(entry.case.benchmark_id), self.explained.get(entry.case.benchmark_id)))
                            for entry in group),
            )
            for torch_version, group in by_torch.items()
        ]

    def verdict_names(self) -> dict[str, str]:
        """Each judged case's verdict (`unchanged`, `regressed`, ...) by benchmark id, for the results tables."""
        return {verdict.benchmark_id: verdict.status for verdict in self.verdicts}

    def finish(self, summary_dir: Path, interrupted: bool) -> None:
        """Judge what an interrupt left whole, record the runs when asked, write the summary files and results.md
        into `summary_dir`; `written` then says what was written and `files_written` whether every file was."""
        for measurement in self.finished_unjudged():
            try:
                self._judge(measurement)
            except CaseFailed:
                pass  # its verdict is in the summary; no test is left to fail
        self.written, self.files_written = self._write(summary_dir, len(self.plan.cases), interrupted)

    def _write(self, summary_dir: Path, planned_cases: int, interrupted: bool) -> tuple[list[str], bool]:
        written: list[str] = []
        problems: list[str] = []
        if self.records:
            written, problems = self.record()
        with contextlib.suppress(UsageError, OSError):
            keep_out_of_git(summary_dir)  # where it cannot be made, each file below names the folder's problem
        for path, text in self.report_files(summary_dir):
            try:
                write_text_atomically(path, text)
                written.append(f"wrote {path}")
            except BadFileError as error:
                problems.append(f"nothing written to {path}: {error.problem}; {error.remedy}")
            except OSError as error:
                problems.append(
                    f"nothing written to {path}: {error.strerror or error}; check the folder's permissions and free "
                    "space, or pass another --perf-summary-dir"
                )
        lines = written + problems
        if interrupted:
            lines.append(
                f"interrupted: the files hold the {len(self.measurements)} of {planned_cases} cases measured before "
                "the stop"
            )
        return lines, not problems

    def report(self) -> list[tuple[str, str]]:
        """The sections of the terminal report: the results tables and the gate's summary, with the files written."""
        if not self.verdicts and not self.errors:
            return []
        sections = [("perfsuite results", render_results(self.measurements, self.verdict_names()))]
        gate_text = summary.render_terminal(self.verdicts, self.errors, self.explained) + "".join(
            f"{line}\n" for line in self.written)
        return sections[: bool(self.measurements)] + [("perfsuite regression gate", gate_text)]

    def report_files(self, directory: Path) -> list[tuple[Path, str]]:
        """The files a session leaves in `directory` and their text: the verdicts and errors as summary.json and
        summary.md (for a CI job to post), and the results tables as results.md."""
        return [
            (directory / "summary.json", summary.render_json(self.verdicts, self.errors, self.explained,
                                                             self.conditions)),
            (directory / "summary.md", summary.render_markdown(self.verdicts, self.errors, self.explained,
                                                               self.conditions)),
            (directory / "results.md", render_results_markdown(self.measurements, self.verdict_names())),
        ]


def archived_verdict(verdict: Verdict | None, explained: Explanation | str | None = None) -> ArchivedVerdict | None:
    """What the archive keeps of a verdict: status, ratio and its bounds, floor and band (a figure that is not a
    finite number > 0, such as an infinite floor, is kept as unknown), and the lines of its explanation by the ops
    (`explained`, where there is one)."""
    if verdict is None:
        return None

    def known(value: float | None) -> float | None:
        return value if value is not None and 0 < value < math.inf else None

    return ArchivedVerdict(
        status=verdict.status, ratio=known(verdict.ratio), ci_low=known(verdict.ci_low),
        ci_high=known(verdict.ci_high), floor=known(verdict.detectable_slowdown), tolerance=verdict.tolerance,
        explanation=() if explained is None else tuple(explained_lines(explained)),
    )


def current_commit(directory: Path) -> str | None:
    """The short git commit of `directory`, or None outside a git checkout."""
    try:
        output = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return output.stdout.strip() or None if output.returncode == 0 else None
