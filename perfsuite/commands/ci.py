"""`perfsuite ci STEP`: the steps of the workflow `perfsuite init-ci` writes, so that its logic lives here, tested.

- `judge`: a pull request measured against its merge base, side by side (`pytest --benchmark-only --perf-ab
  merge-base`), the tables posted to the job summary; the exit status is pytest's.
- `checkout-history`: the history branch checked out into .perf-history/ (a git worktree), or started empty.
- `record`: K processes per case appended to this Mac's history in .perf-history/baselines/ (or, with
  `--history-mode rebaseline`, the histories started over); the table posted to the job summary.
- `publish`: the history committed and pushed to its branch, rebased and retried when another Mac pushed first.
- `site`: the history site built from .perf-history/baselines/ into perf-site/.

Pushing uses $GITHUB_TOKEN where set, passed to git through its environment (never on a command line).
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfsuite.errors import UsageError
from perfsuite.render.escape import terminal_text
from perfsuite.settings import AB_DEFAULT_PAIRS

HISTORY_DIR = ".perf-history"
SUMMARY_DIR = "perf-summary"
SITE_DIR = "perf-site"
HISTORY_MODES = ("append", "rebaseline")
RECORD_PROCESSES = 3  # runs a push appends per case: 3 sessions of 3 calibrate the gate
PUSH_ATTEMPTS = 3
AB_SUMMARY = "ab.md"
GATE_SUMMARY = "summary.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite ci`'s arguments to `parser`."""
    parser.add_argument("step", choices=("judge", "checkout-history", "record", "publish", "site"))
    parser.add_argument("--processes", type=int, default=None, help=(
        f"judge: process pairs of the A/B job (default: {AB_DEFAULT_PAIRS}); record: processes per case appended to "
        f"the history (default: {RECORD_PROCESSES})"
    ))
    parser.add_argument("--machine", help="this Mac's name for its history file (record, publish)")
    parser.add_argument("--branch", default="perf-history", help="the history branch (default: %(default)s)")
    parser.add_argument("--history-mode", choices=HISTORY_MODES, default="append", help="record: append or start over")
    # More pytest arguments follow `--` (perfsuite's main hands them over as pytest_args).
    parser.set_defaults(pytest_args=[])


def run(args: argparse.Namespace) -> int:
    """Run one step in the current folder (the repository's root); return its exit status."""
    root = Path.cwd()
    if args.step == "judge":
        pairs = AB_DEFAULT_PAIRS if args.processes is None else args.processes
        status = subprocess.run(judge_command(pairs, args.pytest_args), cwd=root).returncode
        post_job_summary(job_summary(root / SUMMARY_DIR), os.environ)
        return status
    if args.step == "checkout-history":
        checkout_history(root, args.branch)
        return 0
    if args.step == "record":
        machine = _machine(args.machine)
        rebaseline = args.history_mode == "rebaseline"
        processes = RECORD_PROCESSES if args.processes is None else args.processes
        command = record_command(processes, machine, rebaseline, args.pytest_args)
        status = subprocess.run(command, cwd=root).returncode
        post_job_summary(job_summary(root / SUMMARY_DIR), os.environ)
        return status
    if args.step == "publish":
        return publish_history(root / HISTORY_DIR, args.branch, _machine(args.machine), os.environ)
    return subprocess.run(site_command(), cwd=root).returncode


def _machine(name: str | None) -> str:
    if not name:
        raise UsageError("--machine: name this Mac (its runner label), e.g. --machine perfsuite-m2-max")
    return name


def judge_command(processes: int, more: Sequence[str] = ()) -> list[str]:
    """The pytest command that judges a pull request: each case measured at the merge base of HEAD and the default
    branch and at the working tree, side by side in `processes` pairs of processes."""
    return [
        sys.executable, "-m", "pytest", "--benchmark-only", "--perf-ab", "merge-base", "--perf-processes",
        str(processes), f"--perf-summary-dir={SUMMARY_DIR}", *more,
    ]


def record_command(processes: int, machine: str, rebaseline: bool, more: Sequence[str] = ()) -> list[str]:
    """The pytest command that appends `processes` runs of every case to `machine`'s history in the history
    worktree (or starts the histories over)."""
    return [
        sys.executable, "-m", "pytest", "--benchmark-only", "--perf-processes", str(processes),
        f"--perf-machine={machine}", f"--perf-baseline-dir={HISTORY_DIR}/baselines",
        f"--perf-summary-dir={SUMMARY_DIR}", "--perf-rebaseline" if rebaseline else "--perf-update-baseline", *more,
    ]


def site_command() -> list[str]:
    """The command that builds the history site from the history worktree."""
    return [sys.executable, "-m", "perfsuite.cli", "site", f"{HISTORY_DIR}/baselines", "-o", SITE_DIR]


def job_summary(summary_dir: Path) -> str:
    """The markdown a job posts: the A/B table where the session wrote one, the gate's summary where it wrote one,
    or a line saying that the session wrote neither (it failed before measuring: see its log)."""
    parts = [
        (summary_dir / name).read_text(encoding="utf-8") for name in (AB_SUMMARY, GATE_SUMMARY)
        if (summary_dir / name).is_file()
    ]
    return "\n".join(parts) if parts else "No perfsuite summary was written: an earlier step failed (see its log).\n"


def post_job_summary(markdown: str, environment: Mapping[str, str]) -> None:
    """Append `markdown` to the GitHub job summary ($GITHUB_STEP_SUMMARY), or print it outside GitHub Actions."""
    target = environment.get("GITHUB_STEP_SUMMARY")
    if not target:
        print("\n".join(terminal_text(line) for line in markdown.splitlines()))
        return
    with open(target, "a", encoding="utf-8") as summary:
        summary.write(markdown)


def _git(folder: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True) -> int:
    return subprocess.run(["git", "-C", str(folder), *args], env=None if env is None else dict(env),
                          check=check).returncode


def checkout_history(root: Path, branch: str) -> None:
    """Check the history `branch` of the `origin` remote out into .perf-history/ as a git worktree of `root`; where
    the branch does not exist yet, an empty branch of that name (no files, no parent) is started there."""
    history = root / HISTORY_DIR
    if history.exists():
        raise UsageError(f"{history} exists; remove it (git worktree remove {HISTORY_DIR}) and run the step again")
    fetched = subprocess.run(
        ["git", "-C", str(root), "fetch", "--quiet", "origin", f"refs/heads/{branch}"], capture_output=True
    ).returncode == 0
    if fetched:
        _git(root, "worktree", "add", "--quiet", "-B", branch, str(history), "FETCH_HEAD")
        return
    _git(root, "worktree", "add", "--quiet", "--detach", str(history))
    _git(history, "checkout", "--quiet", "--orphan", branch)
    _git(history, "rm", "-r", "-q", "-f", "--ignore-unmatch", ".")


def push_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment git pushes with: where $GITHUB_TOKEN is set, an authorization header for the GitHub server
    given through git's GIT_CONFIG_* variables (as actions/checkout does, but not left on disk)."""
    env = dict(environment)
    token = environment.get("GITHUB_TOKEN")
    if token:
        server = environment.get("GITHUB_SERVER_URL", "https://github.com")
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        count = int(environment.get("GIT_CONFIG_COUNT", "0"))
        env.update({
            "GIT_CONFIG_COUNT": str(count + 1),
            f"GIT_CONFIG_KEY_{count}": f"http.{server}/.extraheader",
            f"GIT_CONFIG_VALUE_{count}": f"AUTHORIZATION: basic {basic}",
        })
    return env


def publish_history(history: Path, branch: str, machine: str, environment: Mapping[str, str]) -> int:
    """Commit the history worktree's baselines and push them to `branch` of `origin`; when another Mac pushed first,
    rebase on its commit and try again (each Mac writes its own file, so the two never conflict). Returns 0 when
    pushed or when nothing changed, 1 when every attempt failed."""
    _git(history, "add", "-A", "baselines")
    if _git(history, "diff", "--cached", "--quiet", check=False) == 0:
        print(f"perfsuite ci publish: nothing new to record in {history}")
        return 0
    identity = ("-c", "user.name=perfsuite", "-c", "user.email=perfsuite@users.noreply.github.com")
    _git(history, *identity, "commit", "--quiet", "-m", f"perfsuite history: {machine}")
    env = push_environment(environment)
    for _ in range(PUSH_ATTEMPTS):
        if _git(history, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}", env=env, check=False) == 0:
            return 0
        _git(history, "fetch", "--quiet", "origin", f"refs/heads/{branch}", env=env, check=False)
        _git(history, *identity, "rebase", "--quiet", "FETCH_HEAD", env=env, check=False)
    print(f"perfsuite ci publish: could not push {branch} after {PUSH_ATTEMPTS} attempts", file=sys.stderr)
    return 1
