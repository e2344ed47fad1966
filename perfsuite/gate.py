"""The regression gate of one pytest session: thin glue between results, the baseline store and verdicts.

It holds the session's state (this machine's fingerprint, baseline files read once, verdicts so far,
entries to record) and delegates every decision to `perfsuite.judge.verdicts` and every file to
`perfsuite.store.baselines`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfsuite.judge.verdicts import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE, Verdict, judge, tolerance_for
from perfsuite.records import CaseResult
from perfsuite.render import summary
from perfsuite.store import baselines
from perfsuite.store.baselines import BaselineEntry, BaselineFile, BaselineFileError


@dataclass(frozen=True)
class GateSettings:
    """Where baselines live and which bands apply."""

    baseline_dir: Path
    update: bool = False
    tolerance_overrides: Mapping[str, float] = field(default_factory=dict)
    memory_tolerance_overrides: Mapping[str, float] = field(default_factory=dict)
    cli_tolerance: float | None = None
    cli_memory_tolerance: float | None = None


@dataclass
class Gate:
    """Judges each result against its baseline; records entries when asked to."""

    settings: GateSettings
    fingerprint: Mapping[str, Any]
    commit: str | None
    verdicts: list[Verdict] = field(default_factory=list)
    _files: dict[Path, BaselineFile | None] = field(default_factory=dict)
    _pending: dict[tuple[Path, str], dict[str, BaselineEntry]] = field(default_factory=dict)

    def path_for(self, device: str) -> Path:
        """This machine's baseline file for `device`."""
        slug = baselines.machine_slug(self.fingerprint, device)
        return baselines.baseline_path(self.settings.baseline_dir, device, slug)

    def _baseline_file(self, path: Path) -> BaselineFile | None:
        if path not in self._files:
            self._files[path] = baselines.load_baseline(path)  # raises BaselineFileError on a bad file
        return self._files[path]

    def check(self, result: CaseResult) -> Verdict:
        """Judge `result`, remember the verdict and, when updating, the entry to record."""
        path = self.path_for(result.device)
        tolerance = tolerance_for(
            result.benchmark_id, result.model, self.settings.tolerance_overrides, DEFAULT_TOLERANCE,
            self.settings.cli_tolerance,
        )
        memory_tolerance = tolerance_for(
            result.benchmark_id, result.model, self.settings.memory_tolerance_overrides, DEFAULT_MEMORY_TOLERANCE,
            self.settings.cli_memory_tolerance,
        )
        try:
            stored = self._baseline_file(path)
        except BaselineFileError:
            if not self.settings.update:
                raise
            stored = None  # re-recording replaces the unreadable file's entries for the cases run
        verdict = judge(
            result,
            stored.entries.get(result.benchmark_id) if stored else None,
            stored.machine if stored else None,
            self.fingerprint,
            tolerance=tolerance,
            memory_tolerance=memory_tolerance,
            baseline_source=str(path),
        )
        self.verdicts.append(verdict)
        if self.settings.update:
            entry = baselines.entry_from_result(
                result, commit=self.commit, recorded_at=datetime.now(timezone.utc), tolerance=tolerance,
                memory_tolerance=memory_tolerance,
            )
            self._pending.setdefault((path, result.device), {})[result.benchmark_id] = entry
        return verdict

    def record(self) -> list[Path]:
        """Write the pending entries, one locked atomic update per baseline file; returns the files written."""
        written = []
        for (path, device), entries in self._pending.items():
            machine = {**self.fingerprint, "machine_slug": baselines.machine_slug(self.fingerprint, device)}
            baselines.record_baselines(path, device, machine, entries)
            written.append(path)
        self._pending.clear()
        return written

    def write_summary(self, directory: Path) -> list[Path]:
        """The verdicts as summary.json and summary.md in `directory` (for a CI job to post)."""
        directory.mkdir(parents=True, exist_ok=True)
        json_path, markdown_path = directory / "summary.json", directory / "summary.md"
        json_path.write_text(summary.render_json(self.verdicts))
        markdown_path.write_text(summary.render_markdown(self.verdicts))
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
