"""The regression gate of one session: glue between measurements, the baseline store, the decision and the report.

It holds the session's state (this machine's identity, baseline files read once, verdicts and errors so far, runs
to record) and delegates every decision to `perfsuite.judge`, every file to `perfsuite.store` and every sentence to
`perfsuite.render`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError
from perfsuite.judge.verdicts import Verdict, judge, pooled_machine_spread
from perfsuite.records import BaselineEntry, Measurement
from perfsuite.render import summary
from perfsuite.render.results import render_results_markdown
from perfsuite.settings import Settings, tolerance_for
from perfsuite.store import baselines
from perfsuite.store.baselines import BaselineFile, IncompatibleHistory


@dataclass
class Gate:
    """Judges each measurement against its baseline; records runs when the settings ask for it.

    `baseline_dir` is the settings' baseline folder resolved against the project root.
    """

    settings: Settings
    baseline_dir: Path
    fingerprint: Mapping[str, Any]
    commit: str | None
    measurements: list[Measurement] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    _files: dict[Path, BaselineFile | None] = field(default_factory=dict)
    _unreadable: dict[Path, BadFileError] = field(default_factory=dict)
    _pending: dict[tuple[Path, str], dict[str, BaselineEntry]] = field(default_factory=dict)

    @property
    def records(self) -> bool:
        """Whether this session writes baselines."""
        return self.settings.update_baseline or self.settings.rebaseline

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
        tolerance = tolerance_for(case.benchmark_id, case.model, self.settings.tolerances, self.settings.cli_tolerance)
        memory_tolerance = tolerance_for(
            case.benchmark_id, case.model, self.settings.memory_tolerances, self.settings.cli_memory_tolerance,
            memory=True,
        )
        entries = stored.entries if stored else {}
        verdict = judge(
            measurement, entries.get(case.benchmark_id), identity, tolerance=tolerance,
            memory_tolerance=memory_tolerance, machine_spread=pooled_machine_spread(entries.values(), identity),
            baseline_source=str(path), current_memory_bytes=measurement.own_memory_bytes,
            change_fails=self.settings.changes_fail,
        )
        self.verdicts.append(verdict)
        if self.records:
            recorded_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._pending.setdefault((path, case.device), {})[case.benchmark_id] = baselines.entry_of(
                measurement, identity, tolerance, memory_tolerance, recorded_at, self.commit,
            )
        return verdict

    def record(self) -> tuple[list[Path], list[str]]:
        """Write the pending runs, one locked atomic update per baseline file. Returns the files written and, for
        each file that could not be written, a message (nothing is half-written; the old file stays)."""
        written, problems = [], []
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        rebaseline = self.settings.rebaseline
        for (path, device), entries in self._pending.items():
            try:
                if rebaseline and path in self._unreadable and path.exists():
                    aside = baselines.move_aside(path, stamp)
                    problems.append(f"{path} could not be read; it was moved aside to {aside.name} and recorded afresh")
                baselines.record_runs(path, device, entries, rebaseline=rebaseline)
                written.append(path)
            except (BadFileError, IncompatibleHistory) as error:
                problems.append(f"nothing recorded into {path}: {error}")
            except OSError as error:
                problems.append(
                    f"nothing recorded into {path}: {error.strerror or error} (the old file is unchanged); check the "
                    "folder's permissions and free space"
                )
        self._pending.clear()
        return written, problems

    def verdict_names(self) -> dict[str, str]:
        """Each judged case's verdict (`unchanged`, `regressed`, ...) by benchmark id, for the results tables."""
        return {verdict.benchmark_id: verdict.status for verdict in self.verdicts}

    def finish(self, summary_dir: Path, planned_cases: int, interrupted: bool) -> tuple[list[str], bool]:
        """Record the runs when asked, write the summary files and results.md into `summary_dir`; the lines that say
        what was written, and whether every recording went through."""
        written: list[str] = []
        problems: list[str] = []
        if self.records:
            files, problems = self.record()
            written += [f"recorded {path}" for path in files] + problems
        written += [f"wrote {path}" for path in self.write_summary(summary_dir)]
        results_path = summary_dir / "results.md"
        results_path.write_text(render_results_markdown(self.measurements, self.verdict_names()), encoding="utf-8")
        written.append(f"wrote {results_path}")
        if interrupted:
            written.append(
                f"interrupted: the files hold the {len(self.measurements)} of {planned_cases} cases measured before "
                "the stop"
            )
        return written, not problems

    def write_summary(self, directory: Path) -> list[Path]:
        """The verdicts and errors as summary.json and summary.md in `directory` (for a CI job to post)."""
        directory.mkdir(parents=True, exist_ok=True)
        json_path, markdown_path = directory / "summary.json", directory / "summary.md"
        json_path.write_text(summary.render_json(self.verdicts, self.errors), encoding="utf-8")
        markdown_path.write_text(summary.render_markdown(self.verdicts, self.errors), encoding="utf-8")
        return [json_path, markdown_path]


def current_commit(directory: Path) -> str | None:
    """The short git commit of `directory`, or None outside a git checkout."""
    try:
        output = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return output.stdout.strip() or None if output.returncode == 0 else None
