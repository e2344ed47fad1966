"""`perfsuite ci checkout-history` and `publish` against local bare repositories, with the failures a flaky CI
brings: a fetch URL that fails beside a push URL that works, two clones publishing the same machine file, git
failing mid-step. A job that cannot keep the history fails loudly with git's own words, pushes nothing but a
history that holds every push, and leaves nothing half-done (no half-made worktree, no rebase in progress).

Not run here: a private GitHub repository's fetch with and without the job's token; a local bare repository with a
failing URL stands in for it, and the token's way into git is tested through git's own environment variables."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.commands import ci

BRANCH = "perf-history"
MACHINE_FILE = "baselines/mps/perf-m2-max.json"
BROKEN_URL = "/nonexistent/perfsuite-origin.git"
GIT_SAYS_BROKEN = "does not appear to be a git repository"


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "--quiet", "-b", "main")
    (seed / "README.md").write_text("project\n")
    git(seed, "add", "README.md")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "start")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(seed), str(bare)], check=True)
    return bare


def clone(tmp_path: Path, name: str, origin: Path) -> Path:
    folder = tmp_path / name
    subprocess.run(["git", "clone", "--quiet", str(origin), str(folder)], check=True, capture_output=True)
    return folder


def record(repository: Path, text: str, name: str = MACHINE_FILE) -> None:
    path = repository / ci.HISTORY_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def break_fetching(repository: Path, origin: Path) -> None:
    """origin's fetch URL fails (as a private repository's does without a token); its push URL still works."""
    git(repository, "remote", "set-url", "origin", BROKEN_URL)
    git(repository, "remote", "set-url", "--push", "origin", str(origin))


def step(repository: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(repository)
    return main(["ci", *args])


def history_files(origin: Path) -> dict[str, str]:
    names = git(origin, "ls-tree", "-r", "--name-only", BRANCH).split()
    return {name: git(origin, "show", f"{BRANCH}:{name}") for name in names}


def rebase_in_progress(history: Path) -> bool:
    return any((history / git(history, "rev-parse", "--git-path", name).strip()).exists()
               for name in ("rebase-merge", "rebase-apply"))


@pytest.fixture
def published(tmp_path: Path, origin: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """origin with a history branch that holds one machine's file, pushed from a first clone (returned)."""
    first = clone(tmp_path, "first", origin)
    assert step(first, monkeypatch, "checkout-history") == 0
    record(first, "first run\n")
    assert step(first, monkeypatch, "publish", "--machine", "perf-m2-max") == 0
    return first


def test_a_fetch_that_fails_is_an_error_with_gits_message_not_a_new_history(tmp_path, origin, published, monkeypatch,
                                                                             capsys):
    second = clone(tmp_path, "second", origin)
    break_fetching(second, origin)
    assert step(second, monkeypatch, "checkout-history") == ci.EXIT_GIT_FAILED
    error = capsys.readouterr().err
    assert error.startswith("perfsuite ci checkout-history: error: cannot tell whether origin has the history branch")
    assert GIT_SAYS_BROKEN in error and "GITHUB_TOKEN" in error and "Traceback" not in error
    assert not (second / ci.HISTORY_DIR).exists()
    assert history_files(origin) == {MACHINE_FILE: "first run\n"}


def test_no_history_branch_yet_is_told_apart_by_asking_origin(tmp_path, origin, monkeypatch):
    """Where origin answers and has no such branch, the history starts empty, with no parent."""
    first = clone(tmp_path, "first", origin)
    assert not ci.remote_has_branch(first, BRANCH)
    assert step(first, monkeypatch, "checkout-history") == 0
    assert list((first / ci.HISTORY_DIR).iterdir()) == [first / ci.HISTORY_DIR / ".git"]
    record(first, "first run\n")
    assert step(first, monkeypatch, "publish", "--machine", "perf-m2-max") == 0
    assert ci.remote_has_branch(first, BRANCH)
    assert git(origin, "rev-list", "--count", BRANCH).strip() == "1"


def test_a_publish_whose_fetch_fails_pushes_nothing_and_says_why(tmp_path, origin, published, monkeypatch, capsys):
    second = clone(tmp_path, "second", origin)
    assert step(second, monkeypatch, "checkout-history") == 0
    record(published, "first run, then another\n")
    assert step(published, monkeypatch, "publish", "--machine", "perf-m2-max") == 0
    tip = git(origin, "rev-parse", BRANCH)
    break_fetching(second, origin)
    record(second, "second machine\n", "baselines/mps/perf-m4-pro.json")
    capsys.readouterr()
    assert step(second, monkeypatch, "publish", "--machine", "perf-m4-pro") == ci.EXIT_GIT_FAILED
    error = capsys.readouterr().err
    assert error.startswith(f"perfsuite ci publish: error: fetching {BRANCH} after the push was refused")
    assert GIT_SAYS_BROKEN in error and "Nothing was pushed" in error
    assert git(origin, "rev-parse", BRANCH) == tip
    assert not rebase_in_progress(second / ci.HISTORY_DIR)


def test_two_clones_publishing_the_same_machine_file_fail_the_second_and_undo_its_rebase(tmp_path, origin, published,
                                                                                       monkeypatch, capsys):
    second = clone(tmp_path, "second", origin)
    assert step(second, monkeypatch, "checkout-history") == 0
    record(published, "first clone's runs\n")
    record(second, "second clone's runs\n")
    assert step(published, monkeypatch, "publish", "--machine", "perf-m2-max") == 0
    tip = git(origin, "rev-parse", BRANCH)
    history = second / ci.HISTORY_DIR
    capsys.readouterr()
    assert step(second, monkeypatch, "publish", "--machine", "perf-m2-max") == ci.EXIT_GIT_FAILED
    error = capsys.readouterr().err
    assert error.startswith(f"perfsuite ci publish: error: another job pushed to {BRANCH}")
    assert MACHINE_FILE in error and "Nothing was pushed and the rebase was undone" in error
    assert "label of its own" in error
    assert git(origin, "rev-parse", BRANCH) == tip
    assert history_files(origin) == {MACHINE_FILE: "first clone's runs\n"}
    assert not rebase_in_progress(history)
    assert git(history, "status", "--porcelain") == ""
    assert git(history, "log", "-1", "--format=%s") == "perfsuite history: perf-m2-max\n"
    assert (history / MACHINE_FILE).read_text() == "second clone's runs\n"


def test_two_clones_starting_the_history_at_once_both_land(tmp_path, origin, monkeypatch):
    first, second = clone(tmp_path, "first", origin), clone(tmp_path, "second", origin)
    assert step(first, monkeypatch, "checkout-history") == 0
    assert step(second, monkeypatch, "checkout-history") == 0
    record(first, "m2\n")
    record(second, "m4\n", "baselines/mps/perf-m4-pro.json")
    assert step(first, monkeypatch, "publish", "--machine", "perf-m2-max") == 0
    assert step(second, monkeypatch, "publish", "--machine", "perf-m4-pro") == 0
    assert history_files(origin) == {MACHINE_FILE: "m2\n", "baselines/mps/perf-m4-pro.json": "m4\n"}


def test_a_checkout_that_git_refuses_leaves_no_worktree_and_no_traceback(tmp_path, origin, published, monkeypatch,
                                                                         capsys):
    second = clone(tmp_path, "second", origin)
    git(second, "fetch", "--quiet", "origin", f"{BRANCH}:{BRANCH}")
    git(second, "checkout", "--quiet", BRANCH)  # the branch is taken by the main worktree: git refuses a second
    assert step(second, monkeypatch, "checkout-history") == ci.EXIT_GIT_FAILED
    error = capsys.readouterr().err
    assert error.startswith(f"perfsuite ci checkout-history: error: checking out the history branch {BRANCH}")
    assert "already" in error and "Nothing was checked out" in error
    assert not (second / ci.HISTORY_DIR).exists()
    assert len(git(second, "worktree", "list").splitlines()) == 1


def test_publishing_without_a_history_worktree_says_to_check_it_out_first(tmp_path, origin, monkeypatch, capsys):
    first = clone(tmp_path, "first", origin)
    assert step(first, monkeypatch, "publish", "--machine", "perf-m2-max") == 2
    assert "run `perfsuite ci checkout-history` first" in capsys.readouterr().err


def test_a_checkout_outside_a_git_repository_is_a_message(tmp_path, monkeypatch, capsys):
    assert step(tmp_path, monkeypatch, "checkout-history") == 2
    assert f"{tmp_path} is not in a git repository; run the step in the repository's root" in capsys.readouterr().err


def test_a_publish_left_mid_rebase_is_refused_with_the_way_out(tmp_path, origin, published, monkeypatch, capsys):
    history = published / ci.HISTORY_DIR
    (history / git(history, "rev-parse", "--git-path", "rebase-merge").strip()).mkdir()
    record(published, "more\n")
    assert step(published, monkeypatch, "publish", "--machine", "perf-m2-max") == 2
    assert f"git -C {history} rebase --abort" in capsys.readouterr().err


def test_the_history_is_read_with_the_environment_git_is_given(tmp_path, origin, published):
    """The token reaches git in checkout-history as in publish: through the environment. Shown with git's own
    GIT_CONFIG_* variables redirecting an unreachable URL to the bare repository: the checkout succeeds only when
    the environment reaches git."""
    second = clone(tmp_path, "second", origin)
    unreachable = "https://perfsuite.invalid/history.git"
    git(second, "remote", "set-url", "origin", unreachable)
    environment = {"PATH": os.environ["PATH"], "GITHUB_TOKEN": "s3cret", "GIT_CONFIG_COUNT": "1",
                   "GIT_CONFIG_KEY_0": f"url.{origin}.insteadOf", "GIT_CONFIG_VALUE_0": unreachable}
    ci.checkout_history(second, BRANCH, environment)
    assert (second / ci.HISTORY_DIR / MACHINE_FILE).read_text() == "first run\n"
    assert "s3cret" not in (second / ".git" / "config").read_text()
