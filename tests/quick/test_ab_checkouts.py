"""The A/B job's base checkouts, lock and base interpreter against real git repositories and fake interpreters: a
checkout a killed `git worktree add` left locked is made again; the advice for a changed checkout works on a locked
one; bytecode the base side wrote is no change; one job per project at a time, the second refused naming the first
and touching nothing; what a killed job left in its working folder is removed by the next; an interpreter that
hangs, is killed or answers something else is a usage error naming it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.errors import UsageError
from perfsuite.session.ab import check_interpreter, deleted_conftest_problem, interpreter_torch_version
from perfsuite.store.revisions import JOB_FOLDER, base_checkout, lock_ab_job


def git(root: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=u@example.com", "-c", "user.name=u",
                           *arguments], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repository(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "conftest.py").write_text("import pkg.models  # noqa: F401\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "models.py").write_text("BLOCKS = 1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def worktrees(root: Path) -> str:
    return git(root, "worktree", "list", "--porcelain")


def half_made_checkout(root: Path, commit: str) -> Path:
    """The state a kill during `git worktree add` leaves: registered, locked 'initializing', nothing checked out
    (git writes that lock before the checkout and removes it after)."""
    folder = root / ".perfsuite" / "ab" / commit[:12]
    git(root, "worktree", "add", "--detach", "--no-checkout", "--lock", "--reason", "initializing", str(folder), commit)
    return folder


def test_a_checkout_a_killed_worktree_add_left_locked_is_made_again(repository):
    root, commit = repository
    folder = half_made_checkout(root, commit)
    assert "locked initializing" in worktrees(root)
    assert base_checkout(root, commit) == folder
    assert (folder / "pkg" / "models.py").read_text() == "BLOCKS = 1\n" and "locked" not in worktrees(root)


def test_a_half_made_checkout_whose_folder_was_deleted_is_made_again(repository):
    """Following the old advice (delete the folder, `git worktree prune`) left it registered and locked."""
    root, commit = repository
    folder = half_made_checkout(root, commit)
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    git(root, "worktree", "prune")
    assert "locked initializing" in worktrees(root)
    assert base_checkout(root, commit) == folder and (folder / "conftest.py").exists()


def test_the_advice_for_a_changed_checkout_removes_it_even_when_locked(repository):
    root, commit = repository
    folder = root / ".perfsuite" / "ab" / commit[:12]
    git(root, "worktree", "add", "--detach", "--lock", "--reason", "kept by hand", str(folder), commit)
    (folder / "pkg" / "models.py").write_text("BLOCKS = 8\n")
    with pytest.raises(UsageError, match="has changes; perfsuite will not measure or delete it") as refused:
        base_checkout(root, commit)
    assert (folder / "pkg" / "models.py").read_text() == "BLOCKS = 8\n"  # nothing removed
    advice = str(refused.value).split("`")[1]
    assert advice.startswith("git worktree remove")
    subprocess.run(shlex.split(advice), cwd=root, check=True, capture_output=True)  # the advice works as given
    assert base_checkout(root, commit) == folder and (folder / "pkg" / "models.py").read_text() == "BLOCKS = 1\n"


def test_bytecode_the_base_side_wrote_into_its_checkout_is_no_change(repository):
    """Each local A/B job imports the base's modules from its checkout, which writes __pycache__ there: the next
    job against the same base reuses the checkout instead of refusing it as changed."""
    root, commit = repository
    folder = base_checkout(root, commit)
    for cache in (folder / "__pycache__", folder / "pkg" / "__pycache__"):
        cache.mkdir()
        (cache / f"models.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc").write_bytes(b"\0" * 16)
    assert git(folder, "status", "--porcelain").strip()  # git itself sees them
    assert base_checkout(root, commit) == folder


def test_a_second_job_in_the_project_is_refused_naming_the_first_and_touches_nothing(repository):
    root, _ = repository
    first = lock_ab_job(root)
    (first.work_folder / "worker-0.log").write_text("the first job's")
    try:
        with pytest.raises(UsageError, match=f"another A/B job is running in {root} \\(process {os.getpid()}, "):
            lock_ab_job(root)
        assert (first.work_folder / "worker-0.log").read_text() == "the first job's"
    finally:
        first.release()
    assert not first.work_folder.exists()
    lock_ab_job(root).release()  # free again once the first has ended


def test_what_a_killed_job_left_in_the_working_folder_is_removed_by_the_next(repository):
    root, _ = repository
    left = root / JOB_FOLDER
    left.mkdir(parents=True)
    (left / "worker-0-base+head-123.log").write_text("a killed job's")
    # The kernel released the killed job's flock: the next job takes the lock and starts from an empty folder.
    lock = lock_ab_job(root)
    try:
        assert lock.work_folder == left and list(left.iterdir()) == []
    finally:
        lock.release()


def fake_interpreter(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("body, message", [
    ("echo 'not json'", "printed 'not json' when asked for its torch version as JSON"),
    ("echo '[1,2,3]'", "printed '[1,2,3]' when asked for its torch version as JSON"),
    ("echo '{\"missing\":\"str\"}'", "printed '{\"missing\":\"str\"}' when asked"),
    ("exec sleep 30", "gave no answer within 1 s when asked for its torch version"),
    ("echo started; kill -9 $$", "was killed by signal 9 when asked for its torch version (it printed 'started')"),
])
def test_a_base_interpreter_that_is_not_one_is_a_usage_error_naming_it(tmp_path: Path, body: str, message: str):
    python = fake_interpreter(tmp_path, body)
    with pytest.raises(UsageError) as refused:
        check_interpreter(python, timeout_s=1)
    assert str(refused.value).startswith(f"--perf-ab-python {python}: ") and message in str(refused.value)


def test_the_torch_version_is_read_from_the_probes_last_line():
    assert interpreter_torch_version('a warning\n{"torch_version": "2.13.0+cpu"}\n') == "2.13.0+cpu"
    assert interpreter_torch_version('{"torch_version": 2}') is None
    assert interpreter_torch_version("") is None


def test_a_deleted_conftest_is_a_problem_only_when_the_session_fell_back_to_the_built_in_models():
    problem = deleted_conftest_problem(["tests/conftest.py"], "main", models_named=False, builtin_models_only=True)
    assert problem is not None and "the head deleted tests/conftest.py" in problem and "--perf-model" in problem
    assert deleted_conftest_problem(["tests/conftest.py"], "main", models_named=True, builtin_models_only=True) is None
    assert deleted_conftest_problem(["tests/conftest.py"], "main", models_named=False,
                                    builtin_models_only=False) is None
    assert deleted_conftest_problem(["tests/helpers.py"], "main", models_named=False, builtin_models_only=True) is None
