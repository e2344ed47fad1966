"""A measuring worker's temporary folder does not outlive the session that made it, even a session killed -9.

Nothing in a process killed -9 runs, so its worker folder stays; the next worker any session starts removes
the folders of sessions that are gone, and leaves those of live ones alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from perfsuite.records import Case
from perfsuite.run import processes, workers
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan

CASE = Case("cpu", "fp32", "tiny", 1, "infer", "smoke")
PLAN = SessionPlan((CASE,), processes=2, measure=MeasureSettings(warmup_steps=1), rounds=RoundSettings())

# A session whose worker hangs: it prints the worker's spec path, then waits to be killed.
HANGING_SESSION = """
import sys, time
import perfsuite.run.processes as processes
import perfsuite.run.workers as workers

def hang(python, spec_path, harness):
    print(spec_path, flush=True)
    time.sleep(600)

workers.worker_command = hang
from perfsuite.records import Case
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan
case = Case("cpu", "fp32", "tiny", 1, "infer", "smoke")
plan = SessionPlan((case,), processes=2, measure=MeasureSettings(warmup_steps=1), rounds=RoundSettings())
processes.run_worker(plan, [case])
"""


def start_session(temporary_root: Path) -> tuple[subprocess.Popen[str], Path]:
    """A session process whose worker is running; returns it and its worker's spec file."""
    session = subprocess.Popen(
        [sys.executable, "-c", HANGING_SESSION], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(temporary_root)},
    )
    assert session.stdout is not None
    spec = Path(session.stdout.readline().strip())
    assert spec.parent.is_dir() and spec.parent.parent == temporary_root
    return session, spec


def run_a_quick_worker(monkeypatch: pytest.MonkeyPatch, temporary_root: Path) -> None:
    """This process starts a worker (one that exits at once) in `temporary_root`."""
    monkeypatch.setattr(tempfile, "tempdir", str(temporary_root))
    stops = [sys.executable, "-c", "import sys; sys.stderr.write('stopped'); sys.exit(1)"]
    monkeypatch.setattr(workers, "worker_command", lambda python, spec_path, harness: stops)
    ((case, outcome),) = processes.run_worker(PLAN, [CASE])
    assert case == CASE and outcome.kind == "crashed" and "exited with status 1" in outcome.message


@pytest.mark.slow  # starts a session process
def test_the_folder_of_a_session_killed_9_goes_with_the_next_worker(tmp_path, monkeypatch):
    session, spec = start_session(tmp_path)
    folder = spec.parent
    session.kill()
    session.wait()
    assert folder.is_dir()  # a process killed -9 cleans up nothing itself
    run_a_quick_worker(monkeypatch, tmp_path)
    assert not folder.exists() and os.listdir(tmp_path) == []


@pytest.mark.slow  # starts a session process
def test_the_folder_of_a_live_session_is_left_alone(tmp_path, monkeypatch):
    session, spec = start_session(tmp_path)
    try:
        run_a_quick_worker(monkeypatch, tmp_path)
        assert spec.parent.is_dir() and spec.is_file()
    finally:
        session.kill()
        session.wait()


def test_a_worker_removes_its_own_folder_when_it_ends(tmp_path, monkeypatch):
    run_a_quick_worker(monkeypatch, tmp_path)
    assert os.listdir(tmp_path) == []


def test_other_folders_in_the_temporary_folder_are_left_alone(tmp_path, monkeypatch):
    unrelated = [tmp_path / "perfsuite-worker-abc123", tmp_path / "perfsuite-selftest-x1", tmp_path / "pytest-of-me"]
    for folder in unrelated:
        folder.mkdir()
    run_a_quick_worker(monkeypatch, tmp_path)
    assert all(folder.is_dir() for folder in unrelated)
