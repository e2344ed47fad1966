"""The regression gate of one session: thin glue between measurements, the baseline store and verdicts.

It holds the session's state (this machine's identity, baseline files read once, verdicts and errors so far,
runs to record) and delegates every decision to `perfsuite.judge` and every file to `perfsuite.store`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.errors import BadFileError
from perfsuite.judge.stats import Spread, within_spread
from perfsuite.judge.tolerances import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE, tolerance_for
from perfsuite.judge.verdicts import Verdict, judge, memory_belongs_to_case
from perfsuite.records import BaselineEntry, Measurement, Run
from perfsuite.render import summary
from perfsuite.store import baselines
from perfsuite.store.baselines import BaselineFile, IncompatibleHistory


@dataclass(frozen=True)
class GateSettings:
    """Where baselines live, what to record and which bands apply.

    `update` appends this session's runs to each entry's history; `rebaseline` starts the histories of the
    cases run over (an unreadable file is moved aside first); `machine` names this machine's files.
    """

    baseline_dir: Path
    update: bool = False
    rebaseline: bool = False
    machine: str | None = None
    tolerance_overrides: Mapping[str, float] = field(default_factory=dict)
    memory_tolerance_overrides: Mapping[str, float] = field(default_factory=dict)
    cli_tolerance: float | None = None
    cli_memory_tolerance: float | None = None

    @property
    def records(self) -> bool:
        """Whether this session writes baselines."""
        return self.update or self.rebaseline


def run_memory_bytes(run: Run) -> int | None:
    """A run's memory figure when it belongs to the case alone (see `memory_belongs_to_case`), else None."""
    fresh_process = run.facts.get("fresh_process") is True
    if run.memory_bytes is None or not memory_belongs_to_case(run.memory_figure, fresh_process):
        return None
    return run.memory_bytes


def current_memory_bytes(measurement: Measurement) -> int | None:
    """The measurement's memory figure, the median of its runs' (as a baseline's is), when every run's figure
    belongs to the case alone; None otherwise."""
    own = [run_memory_bytes(r) for r in measurement.runs]
    figures = [m for m in own if m is not None]
    return int(np.median(figures)) if figures and len(figures) == len(own) else None


@dataclass
class Gate:
    """Judges each measurement against its baseline; records runs when asked to."""

    settings: GateSettings
    fingerprint: Mapping[str, Any]
    commit: str | None
    verdicts: list[Verdict] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    _files: dict[Path, BaselineFile | None] = field(default_factory=dict)
    _unreadable: dict[Path, BadFileError] = field(default_factory=dict)
    _pending: dict[tuple[Path, str], dict[str, BaselineEntry]] = field(default_factory=dict)

    def path_for(self, device: str) -> Path:
        """This machine's baseline file for `device`."""
        slug = baselines.machine_slug(self.fingerprint, device, self.settings.machine)
        return baselines.baseline_path(self.settings.baseline_dir, device, slug)

    def machine_identity(self, device: str) -> dict[str, str]:
        """The facts that identify this machine for `device`'s baselines."""
        return baselines.machine_identity(self.fingerprint, device, self.settings.machine)

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

    def machine_spread(self, stored: BaselineFile | None, identity: Mapping[str, str]) -> Spread | None:
        """The pooled between-run spread of this machine's entries in `stored`."""
        if stored is None:
            return None
        return within_spread([e.run_medians_s for e in stored.entries.values() if dict(e.machine) == dict(identity)])

    def check(self, measurement: Measurement) -> Verdict | None:
        """Judge `measurement`, remember the verdict and, when recording, the runs to record. Raises BadFileError
        for an unreadable baseline file unless this session starts histories over (then the case is recorded
        into a fresh file and None is returned)."""
        case = measurement.case
        path = self.path_for(case.device)
        identity = self.machine_identity(case.device)
        try:
            stored = self._baseline_file(path)
        except BadFileError:
            if not self.settings.rebaseline:
                raise
            stored = None
        tolerance = tolerance_for(
            case.benchmark_id, case.model, self.settings.tolerance_overrides, DEFAULT_TOLERANCE,
            self.settings.cli_tolerance,
        )
        memory_tolerance = tolerance_for(
            case.benchmark_id, case.model, self.settings.memory_tolerance_overrides, DEFAULT_MEMORY_TOLERANCE,
            self.settings.cli_memory_tolerance,
        )
        verdict = judge(
            measurement,
            stored.entries.get(case.benchmark_id) if stored else None,
            identity,
            tolerance=tolerance,
            memory_tolerance=memory_tolerance,
            machine_spread=self.machine_spread(stored, identity),
            baseline_source=str(path),
            current_memory_bytes=current_memory_bytes(measurement),
        )
        self.verdicts.append(verdict)
        if self.settings.records:
            self._pending.setdefault((path, case.device), {})[case.benchmark_id] = self.entry_of(
                measurement, identity, tolerance, memory_tolerance
            )
        return verdict

    def entry_of(
        self, measurement: Measurement, identity: Mapping[str, str], tolerance: float, memory_tolerance: float
    ) -> BaselineEntry:
        """The baseline entry holding this session's runs of `measurement`."""
        recorded_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        last = measurement.last
        return BaselineEntry(
            case=measurement.case, config_digest=last.config_digest, torch_version=last.torch_version,
            threads=last.threads, machine=dict(identity), memory_figure=last.memory_figure,
            samples_per_step=last.samples_per_step, flops_per_step=last.flops_per_step,
            gpu_busy_fraction=last.gpu_busy_fraction, tolerance=tolerance, memory_tolerance=memory_tolerance,
            runs=tuple(
                baselines.stored_run(r.round_times_s, run_memory_bytes(r), recorded_at, self.commit)
                for r in measurement.runs
            ),
        )

    def record(self) -> tuple[list[Path], list[str]]:
        """Write the pending runs, one locked atomic update per baseline file. Returns the files written and, for
        each file that could not be written, a message (nothing is half-written; the old file stays)."""
        written, problems = [], []
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        for (path, device), entries in self._pending.items():
            try:
                if self.settings.rebaseline and path in self._unreadable and path.exists():
                    aside = baselines.move_aside(path, stamp)
                    problems.append(f"{path} could not be read; it was moved aside to {aside.name} and recorded afresh")
                baselines.record_runs(path, device, entries, rebaseline=self.settings.rebaseline)
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

    def write_summary(self, directory: Path) -> list[Path]:
        """The verdicts and errors as summary.json and summary.md in `directory` (for a CI job to post)."""
        directory.mkdir(parents=True, exist_ok=True)
        json_path, markdown_path = directory / "summary.json", directory / "summary.md"
        json_path.write_text(summary.render_json(self.verdicts, self.errors))
        markdown_path.write_text(summary.render_markdown(self.verdicts, self.errors))
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
