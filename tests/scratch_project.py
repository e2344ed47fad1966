"""A user's own project, for the tests that run perfsuite as a user runs it: a scratch git repository holding a
conftest.py that registers models, a pyproject.toml with its [tool.perfsuite] table and a test that measures them,
committed on main by a made-up author; and pytest run in it as a user runs it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

PERF_TEST = "def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n"
GITIGNORE = "__pycache__/\n"
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
    """A new git repository at `root` with `conftest` (the models), `pyproject`, a test that measures every case and
    the `.gitignore` of Python's bytecode that a project has (Python writes `__pycache__/` beside conftest.py and the
    test when it imports them, unless PYTHONDONTWRITEBYTECODE is set), committed on main."""
    root.mkdir()
    write(root, {"conftest.py": conftest, "pyproject.toml": pyproject, "test_perf.py": PERF_TEST,
                 ".gitignore": GITIGNORE})
    git(root, "init", "-q", "-b", "main")
    commit_all(root, message)
    return root


def run_pytest(root: Path, *arguments: str, python: str = sys.executable, env: dict[str, str] | None = None,
               timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m pytest -p no:cacheprovider ARGUMENTS` in `root`, with one torch thread unless `env` says."""
    return subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", *arguments], cwd=root,
                          capture_output=True, text=True, timeout=timeout_s,
                          env=env if env is not None else {**os.environ, "OMP_NUM_THREADS": "1"})


@contextlib.contextmanager
def as_a_fresh_process_registers() -> Iterator[None]:
    """While inside: no model registered, as a session in a fresh process starts (the built-in ones load as they
    would there). After: the registered models and their sources, and torch's thread count (a session's
    --perf-threads sets it), as they were."""
    import torch

    from perfsuite import workloads

    registered_in = dict(workloads._REGISTERED_IN)
    registry = workloads.swap_registry_state(({}, False, False))
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        workloads.swap_registry_state(registry)
        workloads._REGISTERED_IN.clear()
        workloads._REGISTERED_IN.update(registered_in)
        torch.set_num_threads(threads)


def run_pytest_in_process(root: Path, *arguments: str, env: dict[str, str] | None = None
                          ) -> subprocess.CompletedProcess[str]:
    """`pytest -p no:cacheprovider ARGUMENTS` in `root`, as `run_pytest` runs it but in this process (`pytest.main`):
    a session saves the seconds of a fresh Python importing torch and perfsuite. The run leaves as it came
    (`in_process_at`). Worker processes (--perf-processes, A/B sides) are fresh processes all the same; a test that
    signals or races the session, or needs its interpreter started differently (PYTHONPATH), keeps `run_pytest`."""
    import pytest

    return in_process_at(root, lambda: int(pytest.main(["-p", "no:cacheprovider", *arguments])), ["pytest", *arguments],
                         env)


def run_perfsuite_in_process(root: Path, *arguments: str, env: dict[str, str] | None = None
                             ) -> subprocess.CompletedProcess[str]:
    """`perfsuite ARGUMENTS` in `root` (`perfsuite.cli.main`), in this process as `run_pytest_in_process` runs pytest:
    the processes the command starts itself (the A/B jobs of `perfsuite bisect`) are fresh processes all the same."""
    from perfsuite.cli import main

    return in_process_at(root, lambda: main(list(arguments)), ["perfsuite", *arguments], env)


def in_process_at(root: Path, program: Callable[[], int], command: list[str], env: dict[str, str] | None
                  ) -> subprocess.CompletedProcess[str]:
    """Run `program` in this process as if it were `command` started in `root`: what it printed and its exit status.
    It leaves as it came: the working folder, the environment (`env`, as `run_pytest` takes it: this one with one
    torch thread unless given), sys.path, the modules it imported from the project (the conftest, its models, the base
    checkout's; those of the environment stay, as in a process that ran them before: torch refuses a second
    registration of its ops), the registered models (it starts with none, as a fresh process does), torch's thread
    count and tempfile's folder."""
    import io
    import tempfile

    out, err = io.StringIO(), io.StringIO()
    saved_modules, saved_path, saved_cwd = dict(sys.modules), list(sys.path), os.getcwd()
    saved_environ = dict(os.environ)
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = None  # found again from the run's TMPDIR, as a fresh process finds it
    os.environ.clear()
    os.environ.update(env if env is not None else {**saved_environ, "OMP_NUM_THREADS": "1"})
    os.chdir(root)
    try:
        with as_a_fresh_process_registers(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = program()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        for name in set(sys.modules) - set(saved_modules):
            if _is_under(sys.modules[name], root):
                del sys.modules[name]
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path
        tempfile.tempdir = saved_tempdir
    return subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())


def _is_under(module: object, root: Path) -> bool:
    """Whether `module` was loaded from a file or folder under `root`."""
    files = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
    return any(file is not None and Path(file).resolve().is_relative_to(root.resolve()) for file in files)
