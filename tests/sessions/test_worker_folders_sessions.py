"""A measuring worker's temporary folder does not outlive the session that made it, even a session killed -9.

Nothing in a process killed -9 runs, so its worker folder stays; the next worker any session starts removes
the folders of sessions that are gone, and leaves those of live ones alone.

The in-process tests of this subject: tests/quick/test_worker_folders.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quick.test_worker_folders import run_a_quick_worker

pytestmark = pytest.mark.slow


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
