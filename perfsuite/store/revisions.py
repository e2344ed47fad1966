"""The base side's checkout for A/B: a git revision of the project resolved to a commit and checked out as a worktree
under `<project>/.perfsuite/ab/<commit>` (kept and reused while it stays clean; the folder ignores itself, so the
project's `git status` does not show it).

`merge-base` means the merge base of HEAD with the default branch (origin's HEAD, else main or master).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from perfsuite.errors import UsageError
from perfsuite.store.files import WORK_FOLDER, keep_out_of_git

MERGE_BASE = "merge-base"
CHECKOUTS_FOLDER = Path(WORK_FOLDER) / "ab"
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


def base_checkout(root: Path, commit: str) -> Path:
    """The worktree of `commit` under `root`/.perfsuite/ab, made when missing and reused when clean. A folder there
    with changes, or at another commit, is refused (nothing is measured, nothing removed)."""
    top = Path(_git(root, "rev-parse", "--show-toplevel").stdout.strip() or root)
    folder = top / CHECKOUTS_FOLDER / commit[:12]
    keep_out_of_git(top / WORK_FOLDER)
    if folder.exists():
        at = _git(folder, "rev-parse", "HEAD").stdout.strip()
        changes = "\n".join(line for line in _git(folder, "status", "--porcelain").stdout.splitlines()
                            if not _is_bytecode(line[3:]))
        if at != commit or changes:
            what = f"is at {at[:12] or 'no commit'}, not {commit[:12]}" if at != commit else "has changes"
            raise UsageError(
                f"--perf-ab: the base checkout {folder} {what}; perfsuite will not measure or delete it. Remove it "
                f"with `git worktree remove --force {folder}` (or delete the folder and run `git worktree prune`) "
                "and run again"
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
