"""The base side's checkout for A/B: a git revision of the project resolved to a commit and checked out as a worktree
under `<project>/.perfsuite/ab/<commit>` (kept and reused while it stays clean; the folder ignores itself, so the
project's `git status` does not show it).

`merge-base` means the merge base of HEAD with the default branch (origin's HEAD, else main or master).

One A/B job runs in a project at a time: it holds `.perfsuite/ab.lock` (an flock, which the system releases when the
process ends, killed or not; the file names the holder's pid) from before the base is checked out until it ends, and
keeps its working files (the workers' specs, logs and outputs) in `.perfsuite/ab-job`, which a job that holds the lock
may clear of whatever a killed job left there. A second job is refused, naming the first: it never touches the first
job's checkout or files.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO

from perfsuite.errors import UsageError
from perfsuite.store.files import WORK_FOLDER, keep_out_of_git

MERGE_BASE = "merge-base"
CHECKOUTS_FOLDER = Path(WORK_FOLDER) / "ab"
JOB_LOCK = Path(WORK_FOLDER) / "ab.lock"
JOB_FOLDER = Path(WORK_FOLDER) / "ab-job"
# The lock reason git gives a worktree while `git worktree add` makes it; one still locked so was left by a killed add.
GIT_ADDING_REASON = "initializing"
SHALLOW_HINT = (
    "; this clone is shallow (its history is cut off), so the base may not be in it: fetch the whole history with "
    "`git fetch --unshallow` (in GitHub Actions: `fetch-depth: 0` on actions/checkout)"
)
DEFAULT_BRANCH_GUESSES = ("main", "master", "origin/main", "origin/master")


def _git(root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise UsageError("--perf-ab needs git on the PATH to check out the base revision") from None


def _shallow_hint(root: Path) -> str:
    """SHALLOW_HINT when the clone at `root` is shallow, else ""."""
    return SHALLOW_HINT if _git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true" else ""


def default_branch(root: Path) -> str:
    """The default branch to find a merge base with: origin's HEAD, else the first of main, master, origin/main,
    origin/master that exists."""
    found = _git(root, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if found.returncode == 0 and found.stdout.strip():
        return found.stdout.strip()
    for name in DEFAULT_BRANCH_GUESSES:
        if _git(root, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}").returncode == 0:
            return name
    raise UsageError(
        f"--perf-ab {MERGE_BASE}: {root} has no default branch to take the merge base with (no origin/HEAD, main or "
        f"master); name the base revision instead, e.g. --perf-ab HEAD~1{_shallow_hint(root)}"
    )


def resolve_revision(root: Path, revision: str) -> str:
    """The commit `revision` names in the git repository at `root`; a UsageError saying what is wrong otherwise."""
    inside = _git(root, "rev-parse", "--show-toplevel")
    if inside.returncode != 0:
        raise UsageError(f"--perf-ab {revision}: {root} is not in a git repository, so there is no base revision to "
                         "check out; use --perf-ab-python to compare interpreters on the same code")
    if revision == MERGE_BASE:
        branch = default_branch(root)
        found = _git(root, "merge-base", "HEAD", branch)
        if found.returncode != 0:
            raise UsageError(f"--perf-ab {MERGE_BASE}: HEAD and {branch} have no merge base in {root}"
                             + _shallow_hint(root))
        return found.stdout.strip()
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode != 0 or not found.stdout.strip():
        raise UsageError(
            f"--perf-ab {revision}: no such revision in {root}; give a branch, a tag, a commit or {MERGE_BASE} "
            f"(`git log --oneline` lists commits; fetch a remote branch first){_shallow_hint(root)}"
        )
    return found.stdout.strip()


def head_revision(root: Path) -> str | None:
    """HEAD's commit, with `+dirty` when the working tree has changes; None outside git."""
    found = _git(root, "rev-parse", "HEAD")
    if found.returncode != 0:
        return None
    changed = _git(root, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    return found.stdout.strip() + ("+dirty" if changed else "")


def project_top(root: Path) -> Path:
    """The folder whose .perfsuite holds the A/B checkouts and lock: the git repository's top, else `root`."""
    return Path(_git(root, "rev-parse", "--show-toplevel").stdout.strip() or root)


class AbJobLock:
    """This process's hold on the A/B job of a project (`lock_ab_job`); `release` ends it, and so does this
    process's end."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path, self._handle = path, handle

    @property
    def work_folder(self) -> Path:
        """The job's working folder (`.perfsuite/ab-job`), which only the lock's holder uses."""
        return self.path.parent / JOB_FOLDER.name

    def release(self) -> None:
        """Remove the job's working folder and release the lock (again: nothing)."""
        if self._handle.closed:
            return
        shutil.rmtree(self.work_folder, ignore_errors=True)
        self._handle.close()


def lock_ab_job(root: Path) -> AbJobLock:
    """Take the A/B job lock of the project at `root` and give the job an empty working folder (what a killed job
    left there is removed: no other job can be using it). A UsageError naming the running job when another holds
    the lock."""
    top = project_top(root)
    keep_out_of_git(top / WORK_FOLDER)
    path = top / JOB_LOCK
    handle = open(path, "a+", encoding="utf-8")  # held open for the job's life
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "whose pid is not written yet"
        handle.close()
        raise UsageError(
            f"--perf-ab: another A/B job is running in {top} (process {holder}, holding {path}); perfsuite runs one "
            "A/B job per project at a time (both would use the base checkouts under .perfsuite/ab and measure beside "
            "each other). Wait for it to end, or stop it (Ctrl-C), and run again; do not remove its checkout"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}, started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    handle.flush()
    lock = AbJobLock(path, handle)
    try:
        shutil.rmtree(lock.work_folder, ignore_errors=True)
        lock.work_folder.mkdir()
    except OSError as error:
        lock.release()
        raise UsageError(f"--perf-ab: cannot make the job's working folder {lock.work_folder}: {error}") from None
    return lock


def _worktree_lock_reason(top: Path, folder: Path) -> str | None:
    """The reason git keeps the worktree at `folder` locked ("" when locked without one); None when it is not a
    locked worktree of the repository at `top`."""
    entries = _git(top, "worktree", "list", "--porcelain").stdout.split("\n\n")
    for entry in entries:
        lines = entry.strip().splitlines()
        if not lines or not lines[0].startswith("worktree "):
            continue
        if Path(lines[0].removeprefix("worktree ")).resolve() != folder.resolve():
            continue
        locked = [line for line in lines if line == "locked" or line.startswith("locked ")]
        return locked[0].removeprefix("locked").strip() if locked else None
    return None


def base_checkout(root: Path, commit: str) -> Path:
    """The worktree of `commit` under `root`/.perfsuite/ab, made when missing and reused when clean. A folder there
    with changes, or at another commit, is refused (nothing is measured, nothing removed). A checkout that a killed
    `git worktree add` left locked as still being made is perfsuite's own and half-made: it is removed and made
    again. Call with the job's lock held (`lock_ab_job`), so that no other job is making or using it."""
    top = project_top(root)
    folder = top / CHECKOUTS_FOLDER / commit[:12]
    keep_out_of_git(top / WORK_FOLDER)
    if _worktree_lock_reason(top, folder) == GIT_ADDING_REASON:
        removed = _git(top, "worktree", "remove", "--force", "--force", str(folder))
        if removed.returncode != 0:
            raise UsageError(f"--perf-ab: the base checkout {folder} was left half-made by a stopped `git worktree "
                             f"add`, and git could not remove it: {removed.stderr.strip()}; run `git worktree remove "
                             f"--force --force {folder}` and run again")
    _git(top, "worktree", "prune")  # forgets checkouts whose folder was deleted (never a locked one)
    if folder.exists():
        at = _git(folder, "rev-parse", "HEAD").stdout.strip()
        changes = "\n".join(line for line in _git(folder, "status", "--porcelain").stdout.splitlines()
                            if not _is_bytecode(line[3:]))
        if at != commit or changes:
            what = f"is at {at[:12] or 'no commit'}, not {commit[:12]}" if at != commit else "has changes"
            raise UsageError(
                f"--perf-ab: the base checkout {folder} {what}; perfsuite will not measure or delete it. Remove it "
                f"with `git worktree remove --force --force {folder}` (twice --force: it removes a locked checkout "
                "too) and run again"
            )
        return folder
    made = _git(top, "worktree", "add", "--detach", "--quiet", str(folder), commit)
    if made.returncode != 0:
        raise UsageError(f"--perf-ab: could not check out {commit[:12]} into {folder}: {made.stderr.strip()}")
    return folder


def _is_bytecode(path: str) -> bool:
    """Python's bytecode cache, which the base side's imports write into its checkout (not a change of its code)."""
    return path.rstrip("/").endswith("__pycache__") or path.endswith((".pyc", ".pyo"))


def changed_files(root: Path, commit: str) -> list[str]:
    """The files of the working tree at `root` that differ from `commit`: changed, added or removed since, and new
    files git does not ignore."""
    changed = _git(root, "diff", "--name-only", commit, "--").stdout.splitlines()
    untracked = _git(root, "ls-files", "--others", "--exclude-standard").stdout.splitlines()
    return sorted({name for name in changed + untracked if name and not _is_bytecode(name)})


def deleted_files(root: Path, commit: str) -> list[str]:
    """The files `commit` has that the working tree at `root` no longer has (paths in the repository)."""
    found = _git(root, "diff", "--name-only", "--diff-filter=D", commit, "--")
    return sorted(name for name in found.stdout.splitlines() if name)
