"""`perfsuite ci STEP`: the steps of the workflow `perfsuite init-ci` writes, so that its logic lives here, tested.

- `judge`: a pull request measured against its merge base, side by side (`pytest --benchmark-only --perf-ab
  merge-base`), the tables posted to the job summary; the exit status is pytest's.
- `checkout-history`: the history branch checked out into .perf-history/ (a git worktree), or started empty where
  origin has no such branch (asked with `git ls-remote`: a fetch that fails is an error, never "no history yet").
- `record`: K processes per case appended to this Mac's history in .perf-history/baselines/ (or, with
  `--history-mode rebaseline`, the histories started over); the table posted to the job summary.
- `publish`: the history committed and pushed to its branch, rebased and retried when another Mac pushed first; a
  rebase that conflicts is undone and fails the step, so only a history holding every push is ever pushed.
- `bisect`: where the push's gate found a regression (perf-summary/summary.json), `perfsuite bisect` of the cases
  that regressed between the last commit recorded in this Mac's history before HEAD and HEAD; its finding goes to the
  job summary and its record into .perf-history/bisect/ (published with the history, marked on the site). Nothing
  runs when no case regressed.
- `site`: the history site built from .perf-history/baselines/ into perf-site/, with the bisect records marked.

Reading and pushing the history use $GITHUB_TOKEN where set, passed to git through its environment (never on a
command line or on disk). A git failure in checkout-history or publish prints git's message with what was left as it
was and what to do, and exits 1; nothing is left half-done (no half-made worktree, no rebase in progress).
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfsuite.errors import BadFileError, UsageError
from perfsuite.options.settings import AB_DEFAULT_PAIRS
from perfsuite.render.bisect import RECORD_FILE as BISECT_RECORD
from perfsuite.render.bisect import SUMMARY_FILE as BISECT_SUMMARY
from perfsuite.render.escape import terminal_text
from perfsuite.store.baselines import load_baseline
from perfsuite.store.jsonfile import read_json_file

HISTORY_DIR = ".perf-history"
SUMMARY_DIR = "perf-summary"
SITE_DIR = "perf-site"
HISTORY_MODES = ("append", "rebaseline")
RECORD_PROCESSES = 3  # runs a push appends per case: 3 sessions of 3 calibrate the gate
PUSH_ATTEMPTS = 3
LS_REMOTE_NO_MATCH = 2  # `git ls-remote --exit-code`'s status when the remote has no such ref
EXIT_GIT_FAILED = 1
AB_SUMMARY = "ab.md"
BISECT_DIR = "bisect"
GATE_SUMMARY = "summary.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite ci`'s arguments to `parser`."""
    parser.add_argument("step", choices=("judge", "checkout-history", "record", "bisect", "publish", "site"))
    parser.add_argument("--processes", type=int, default=None, help=(
        f"judge: process pairs of the A/B job (default: {AB_DEFAULT_PAIRS}); record: processes per case appended to "
        f"the history (default: {RECORD_PROCESSES})"
    ))
    parser.add_argument("--machine", help="this Mac's name for its history file (record, bisect, publish)")
    parser.add_argument("--branch", default="perf-history", help="the history branch (default: %(default)s)")
    parser.add_argument("--history-mode", choices=HISTORY_MODES, default="append", help="record: append or start over")
    # More pytest arguments follow `--` (perfsuite's main hands them over as pytest_args).
    parser.set_defaults(pytest_args=[])


def run(args: argparse.Namespace) -> int:
    """Run one step in the current folder (the repository's root); return its exit status."""
    root = Path.cwd()
    if args.step == "judge":
        pairs = AB_DEFAULT_PAIRS if args.processes is None else args.processes
        remove_summaries(root / SUMMARY_DIR)
        status = subprocess.run(judge_command(pairs, args.pytest_args), cwd=root).returncode
        post_job_summary(job_summary(root / SUMMARY_DIR), os.environ)
        return status
    if args.step in ("checkout-history", "publish"):
        try:
            if args.step == "publish":
                return publish_history(root / HISTORY_DIR, args.branch, _machine(args.machine), os.environ)
            checkout_history(root, args.branch, os.environ)
            return 0
        except GitStepFailed as error:
            print(f"perfsuite ci {args.step}: error: {terminal_text(error)}", file=sys.stderr)
            return EXIT_GIT_FAILED
    if args.step == "record":
        machine = _machine(args.machine)
        rebaseline = args.history_mode == "rebaseline"
        processes = RECORD_PROCESSES if args.processes is None else args.processes
        command = record_command(processes, machine, rebaseline, args.pytest_args)
        remove_summaries(root / SUMMARY_DIR)
        status = subprocess.run(command, cwd=root).returncode
        post_job_summary(job_summary(root / SUMMARY_DIR), os.environ)
        return status
    if args.step == "bisect":
        return bisect_regression(root, _machine(args.machine), args.pytest_args, os.environ)
    return subprocess.run(site_command(sorted((root / HISTORY_DIR / BISECT_DIR).glob("*.json"))), cwd=root).returncode


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


def site_command(bisect_records: Sequence[Path] = ()) -> list[str]:
    """The command that builds the history site from the history worktree, the bisect records marked."""
    marked = ["--bisect", *map(str, bisect_records)] if bisect_records else []
    return [sys.executable, "-m", "perfsuite.cli", "site", f"{HISTORY_DIR}/baselines", "-o", SITE_DIR, *marked]


def regressed_cases(summary_path: Path) -> list[str]:
    """The benchmark ids the gate's summary.json calls regressed; UsageError when the file cannot be read."""
    try:
        document = read_json_file(summary_path, "Run `perfsuite ci record` first: it writes the gate's summary")
    except BadFileError as error:
        raise UsageError(str(error)) from None
    verdicts = document.get("verdicts") if isinstance(document, dict) else None
    if not isinstance(verdicts, list):
        raise UsageError(f"{summary_path}: not the gate's summary (no list of verdicts); run `perfsuite ci record` "
                         "first")
    return sorted({v["benchmark_id"] for v in verdicts if isinstance(v, dict) and v.get("status") == "regressed"
                   and isinstance(v.get("benchmark_id"), str)})


def last_recorded_commit(root: Path, history: Path, machine: str, cases: Sequence[str]) -> str | None:
    """The commit of the newest run of `cases` in `machine`'s history files that is an ancestor of HEAD and not HEAD
    itself: the last good commit the push gate knew. None when the history holds none."""
    runs = []
    for path in sorted((history / "baselines").glob(f"*/{machine}.json")):
        try:
            baseline = load_baseline(path)
        except BadFileError as error:
            print(f"perfsuite ci bisect: {terminal_text(error)} (its runs are left out)", file=sys.stderr)
            continue
        for entry in baseline.entries.values() if baseline else ():
            if entry.case.benchmark_id in cases:
                runs += [(run.recorded_at, run.commit) for run in entry.runs if run.commit and "+" not in run.commit]
    head = _git_run(root, "rev-parse", "HEAD").stdout.strip()
    for _, commit in sorted(runs, reverse=True):
        full = _git_run(root, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").stdout.strip()
        if full and full != head and _git_run(root, "merge-base", "--is-ancestor", full, head).returncode == 0:
            return full
    return None


def bisect_regression(root: Path, machine: str, pytest_args: Sequence[str], environment: Mapping[str, str]) -> int:
    """The `bisect` step: bisect the cases the push's gate called regressed between the last commit recorded before
    HEAD and HEAD; post the finding to the job summary and keep the record in the history worktree. 0 when nothing
    regressed or the bisect ran to a finding (found or not), else its status."""
    cases = regressed_cases(root / SUMMARY_DIR / "summary.json")
    if not cases:
        print("perfsuite ci bisect: the gate found no regression on this push; nothing to bisect")
        return 0
    good = last_recorded_commit(root, root / HISTORY_DIR, machine, cases)
    if good is None:
        post_job_summary(f"perfsuite bisect: {', '.join(cases)} regressed, but {machine}'s history holds no earlier "
                         "commit of HEAD's line to bisect from\n", environment)
        return 0
    output = root / SUMMARY_DIR / BISECT_DIR
    command = [sys.executable, "-m", "perfsuite.cli", "bisect", "--good", good, "--bad", "HEAD", "--output-dir",
               str(output), "--", "-k", " or ".join(cases), *pytest_args]
    status = subprocess.run(command, cwd=root).returncode
    summary, record = output / BISECT_SUMMARY, output / BISECT_RECORD
    post_job_summary(summary.read_text(encoding="utf-8") if summary.is_file()
                     else "perfsuite bisect wrote no summary: see its log\n", environment)
    if record.is_file() and (root / HISTORY_DIR).is_dir():
        head = _git_run(root, "rev-parse", "--short=12", "HEAD").stdout.strip()
        kept = root / HISTORY_DIR / BISECT_DIR / f"{machine}-{head}.json"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(record, kept)
    return 0 if status in (0, 1) else status


def remove_summaries(summary_dir: Path) -> None:
    """Remove the summaries an earlier step left in `summary_dir` (a reused runner's workspace, a local run), so a
    step whose session fails before writing its own posts no old verdict as this one's."""
    for name in (AB_SUMMARY, GATE_SUMMARY):
        path = summary_dir / name
        if path.is_symlink() or path.is_file():
            path.unlink(missing_ok=True)


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


class GitStepFailed(Exception):
    """A git command of a step failed, or left the history in a state the step will not push: the message says what
    the step was doing, git's own words, what was left as it was, and what to do next."""


def _git_run(folder: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run git in `folder`; the completed process, whatever its status (the caller decides what a failure means)."""
    try:
        return subprocess.run(["git", "-C", str(folder), *args], env=None if env is None else dict(env),
                              capture_output=True, text=True)
    except FileNotFoundError:
        raise GitStepFailed("git is not on the PATH; install git on the runner") from None


def _git(folder: Path, *args: str, doing: str, remedy: str, env: Mapping[str, str] | None = None) -> str:
    """Run git in `folder` and return its output; GitStepFailed with git's own message, `doing` (what the step was
    doing) and `remedy` when it fails."""
    done = _git_run(folder, *args, env=env)
    if done.returncode != 0:
        raise GitStepFailed(f"{doing}: `git {' '.join(args)}` failed in {folder}: {_said(done)}. {remedy}")
    return done.stdout


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """What a failed git command said, on one line."""
    words = " ".join(line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip())
    return words.rstrip(".") or f"no message, exit status {done.returncode}"


CREDENTIALS_REMEDY = (
    "Check that origin's URL is right and that this step can read the repository: in GitHub Actions give the step "
    "GITHUB_TOKEN in its env (the workflow `perfsuite init-ci` writes does)"
)


def remote_has_branch(root: Path, branch: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether `origin` has the branch `branch`, asked explicitly (`git ls-remote --exit-code`, status 2 when it has
    no such ref); GitStepFailed, with git's message, when origin cannot be asked (a wrong URL, no credentials, no
    network), so that a failure is never read as "no history yet"."""
    found = _git_run(root, "ls-remote", "--exit-code", "origin", f"refs/heads/{branch}", env=env)
    if found.returncode == 0:
        return True
    if found.returncode == LS_REMOTE_NO_MATCH:
        return False
    raise GitStepFailed(
        f"cannot tell whether origin has the history branch {branch}: `git ls-remote origin refs/heads/{branch}` "
        f"failed in {root}: {_said(found)}. Nothing was checked out. {CREDENTIALS_REMEDY}, and run the step again"
    )


def checkout_history(root: Path, branch: str, environment: Mapping[str, str] | None = None) -> None:
    """Check the history `branch` of the `origin` remote out into .perf-history/ as a git worktree of `root`; where
    origin has no such branch (asked explicitly), an empty branch of that name (no files, no parent) is started
    there. git reads origin with `environment`'s $GITHUB_TOKEN where set (see `git_environment`). A failure raises
    GitStepFailed and leaves no .perf-history/ behind."""
    history = root / HISTORY_DIR
    if history.exists():
        raise UsageError(f"{history} exists; remove it (git worktree remove {HISTORY_DIR}) and run the step again")
    if _git_run(root, "rev-parse", "--git-dir").returncode != 0:
        raise UsageError(f"{root} is not in a git repository; run the step in the repository's root (where "
                         "actions/checkout put it)")
    env = git_environment(environment or {})
    started = not remote_has_branch(root, branch, env)
    if not started:
        _git(root, "fetch", "--quiet", "origin", f"refs/heads/{branch}", env=env,
             doing=f"fetching the history branch {branch}", remedy=f"Nothing was checked out. {CREDENTIALS_REMEDY}")
    doing = f"{'starting' if started else 'checking out'} the history branch {branch} in {history}"
    remedy = "Nothing was checked out; fix what git says and run the step again"
    try:
        if started:
            _git(root, "worktree", "add", "--quiet", "--detach", str(history), doing=doing, remedy=remedy)
            _git(history, "checkout", "--quiet", "--orphan", branch, doing=doing, remedy=remedy)
            _git(history, "rm", "-r", "-q", "-f", "--ignore-unmatch", ".", doing=doing, remedy=remedy)
        else:
            _git(root, "worktree", "add", "--quiet", "-B", branch, str(history), "FETCH_HEAD", doing=doing,
                 remedy=remedy)
    except GitStepFailed:
        # Whatever of the worktree was made goes again (twice --force: also a worktree git left locked).
        _git_run(root, "worktree", "remove", "--force", "--force", str(history))
        raise


def git_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment git reads and pushes the history with: where $GITHUB_TOKEN is set, an authorization header for
    the GitHub server given through git's GIT_CONFIG_* variables (as actions/checkout does, but not left on disk)."""
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


def _rebase_in_progress(history: Path) -> bool:
    # `--git-path` answers relative to the folder git ran in, or absolute (a worktree's git folder).
    return any((history / _git_run(history, "rev-parse", "--git-path", name).stdout.strip()).exists()
               for name in ("rebase-merge", "rebase-apply"))


def publish_history(history: Path, branch: str, machine: str, environment: Mapping[str, str]) -> int:
    """Commit the history worktree's baselines and push them to `branch` of `origin`; when another Mac pushed first,
    rebase on its commit and try again (each Mac writes its own file, so the two never conflict). Returns 0 when
    pushed or when nothing changed, 1 when every attempt was beaten by another push.

    Raises GitStepFailed, having pushed nothing, when git cannot fetch or push (with git's message), and when the
    rebase conflicts (another job recorded the same file: two runners with one label): the rebase is aborted, so the
    worktree holds this job's commit as before, and nothing other than a history that holds both pushes is ever
    pushed."""
    if not (history / ".git").exists():
        raise UsageError(f"{history} is not the history worktree; run `perfsuite ci checkout-history` first")
    if _rebase_in_progress(history):
        raise UsageError(
            f"{history} is in the middle of a rebase that an earlier publish left; run `git -C {history} rebase "
            "--abort`, then this step again"
        )
    again = "Nothing was pushed; fix what git says and run the step again"
    kept = ["baselines", *([BISECT_DIR] if (history / BISECT_DIR).is_dir() else [])]
    _git(history, "add", "-A", *kept, doing="staging the history", remedy=again)
    if _git_run(history, "diff", "--cached", "--quiet").returncode == 0:
        print(f"perfsuite ci publish: nothing new to record in {history}")
        return 0
    identity = ("-c", "user.name=perfsuite", "-c", "user.email=perfsuite@users.noreply.github.com")
    _git(history, *identity, "commit", "--quiet", "-m", f"perfsuite history: {machine}",
         doing="committing the history", remedy=again)
    env = git_environment(environment)
    for _ in range(PUSH_ATTEMPTS):
        pushed = _git_run(history, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}", env=env)
        if pushed.returncode == 0:
            return 0
        _git(history, "fetch", "--quiet", "origin", f"refs/heads/{branch}", env=env,
             doing=f"fetching {branch} after the push was refused ({_said(pushed)})",
             remedy=f"Nothing was pushed. {CREDENTIALS_REMEDY}")
        if _git_run(history, "merge-base", "--is-ancestor", "FETCH_HEAD", "HEAD").returncode == 0:
            # origin's branch did not move on: the push failed for a reason of its own, which a rebase cannot fix.
            raise GitStepFailed(
                f"pushing the history to {branch} failed: {_said(pushed)}. Nothing was pushed; check that the step's "
                "token may write the repository (contents: write, GITHUB_TOKEN in the step's env) and that the "
                "branch is not protected against this push"
            )
        rebased = _git_run(history, *identity, "rebase", "--quiet", "FETCH_HEAD", env=env)
        if rebased.returncode != 0:
            conflicted = _git_run(history, "diff", "--name-only", "--diff-filter=U").stdout.split()
            _git_run(history, "rebase", "--abort")
            raise GitStepFailed(
                f"another job pushed to {branch} since this one checked it out, changing what this job changed "
                f"({', '.join(conflicted) or _said(rebased)}), as when two jobs record one machine's history at once "
                f"(two runners with the label {machine}). Nothing was pushed and the rebase was undone ({history} "
                "holds this job's commit); give each Mac a label of its own, then run the job again to record its runs"
            )
    print(f"perfsuite ci publish: could not push {branch} after {PUSH_ATTEMPTS} attempts: other jobs kept pushing "
          "first; nothing was pushed, run the job again", file=sys.stderr)
    return 1
