"""A measuring worker's temporary folder does not outlive the session that made it, even a session killed -9.

Nothing in a process killed -9 runs, so its worker folder stays; the next worker any session starts removes
the folders of sessions that are gone, and leaves those of live ones alone.

The tests of this subject that start processes or take long: tests/sessions/test_worker_folders_sessions.py."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from perfsuite.records import Case
from perfsuite.run import processes, workers
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan

CASE = Case("cpu", "fp32", "tiny", 1, "infer", "smoke")
PLAN = SessionPlan((CASE,), processes=2, measure=MeasureSettings(warmup_steps=1), rounds=RoundSettings())


def run_a_quick_worker(monkeypatch: pytest.MonkeyPatch, temporary_root: Path) -> None:
    """This process starts a worker (one that exits at once) in `temporary_root`."""
    monkeypatch.setattr(tempfile, "tempdir", str(temporary_root))
    stops = [sys.executable, "-c", "import sys; sys.stderr.write('stopped'); sys.exit(1)"]
    monkeypatch.setattr(workers, "worker_command", lambda python, spec_path, harness: stops)
    ((case, outcome),) = processes.run_worker(PLAN, [CASE])
    assert case == CASE and outcome.kind == "crashed" and "exited with status 1" in outcome.message


def test_a_worker_removes_its_own_folder_when_it_ends(tmp_path, monkeypatch):
    run_a_quick_worker(monkeypatch, tmp_path)
    assert os.listdir(tmp_path) == []


def test_other_folders_in_the_temporary_folder_are_left_alone(tmp_path, monkeypatch):
    unrelated = [tmp_path / "perfsuite-worker-abc123", tmp_path / "perfsuite-selftest-x1", tmp_path / "pytest-of-me"]
    for folder in unrelated:
        folder.mkdir()
    run_a_quick_worker(monkeypatch, tmp_path)
    assert all(folder.is_dir() for folder in unrelated)
