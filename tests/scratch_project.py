"""A user's own project, for the tests that run perfsuite as a user runs it: a scratch git repository holding a
conftest.py that registers models, a pyproject.toml with its [tool.perfsuite] table and a test that measures them,
committed on main by a made-up author; and pytest run in it as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PERF_TEST = "def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n"
AUTHOR = ("-c", "user.email=u@example.com", "-c", "user.name=u")


def git(root: Path, *arguments: str) -> str:
    """git in `root`, committing as the made-up author; what it printed."""
    return subprocess.run(["git", "-C", str(root), *AUTHOR, *arguments], check=True, capture_output=True,
                          text=True).stdout


def write(root: Path, files: dict[str, str]) -> None:
    """Write each file (a path under `root`) with its text, making its folders."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def commit_all(root: Path, message: str) -> None:
    """Commit every file under `root`, new ones included."""
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def commit(root: Path, message: str) -> None:
    """Commit the changes to the files git already tracks (what a run left beside them stays out)."""
    git(root, "commit", "-q", "-am", message)


def make_project(root: Path, conftest: str, pyproject: str, message: str = "a model") -> Path:
    """A new git repository at `root` with `conftest` (the models), `pyproject` and a test that measures every case,
    committed on main."""
    root.mkdir()
    write(root, {"conftest.py": conftest, "pyproject.toml": pyproject, "test_perf.py": PERF_TEST})
    git(root, "init", "-q", "-b", "main")
    commit_all(root, message)
    return root


def run_pytest(root: Path, *arguments: str, python: str = sys.executable, env: dict[str, str] | None = None,
               timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m pytest -p no:cacheprovider ARGUMENTS` in `root`, with one torch thread unless `env` says."""
    return subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", *arguments], cwd=root,
                          capture_output=True, text=True, timeout=timeout_s,
                          env=env if env is not None else {**os.environ, "OMP_NUM_THREADS": "1"})
