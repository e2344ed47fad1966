"""A bisect of a slowdown (`perfsuite bisect`): each judgement is the A/B job a user runs, `pytest --benchmark-only
--perf-ab BASE` started in a checkout of the head commit (or `--perf-ab-python BASE_PYTHON` started by the head
environment's interpreter), its ab.json read back; which judgement comes next is `perfsuite.judge.bisect`'s rule.

Running the A/B job as a user does keeps one path: the sides, the checks that each side runs its own code, the
budget, the verdict and its floor are the A/B job's own, with the options and [tool.perfsuite] settings of the
project; nothing here measures or decides. Each step's ab.json and ab.md stay in the bisect's folder, pytest's
output goes to its log, and the result is written as bisect.json (`perfsuite.render.bisect`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfsuite.errors import UsageError
from perfsuite.judge.ab import AB_STATUSES, AbStatus
from perfsuite.judge.bisect import CaseReading, Finding, Judge, Position, Step, commit_status, next_step
from perfsuite.render import bisect as render
from perfsuite.site.ab import read_ab_file
from perfsuite.store.files import WORK_FOLDER, keep_out_of_git, write_text_atomically
from perfsuite.store.revisions import CHECKOUTS_FOLDER, base_checkout, resolve_revision

DEFAULT_FOLDER = Path(WORK_FOLDER) / "bisect"
LAST_AB_SUMMARY = Path(WORK_FOLDER) / "ab.json"
STEP_TIMEOUT_S = 3600
_OUTPUT_TAIL_LINES = 12


@dataclass(frozen=True)
class BisectPlan:
    """What a bisect runs: the range's positions (0 good, last bad), whether they are environments (`pythons`) or
    commits, the project's root, the cases it follows (`tracked`: benchmark ids; empty: every case each job
    measures), the pytest arguments that select them, the A/B budget of a first judgement, and its folder."""

    positions: tuple[Position, ...]
    root: Path
    tracked: tuple[str, ...]
    pytest_args: tuple[str, ...]
    budget_s: float
    folder: Path

    @property
    def pythons(self) -> bool:
        return self.positions[0].python is not None

    @property
    def last(self) -> int:
        return len(self.positions) - 1


def _git(root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise UsageError("bisect needs git on the PATH to check out commits") from None


def commit_positions(root: Path, good: str, bad: str) -> tuple[Position, ...]:
    """The commits from `good` to `bad`, oldest first (`git rev-list --first-parent`: a merge stands for its
    branch); UsageError when either does not resolve or `good` is not an ancestor of `bad`."""
    good_commit = _resolve(root, good, "--good")
    bad_commit = _resolve(root, bad, "--bad")
    if good_commit == bad_commit:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit ({good_commit[:12]}); name two commits")
    if _git(root, "merge-base", "--is-ancestor", good_commit, bad_commit).returncode != 0:
        raise UsageError(f"--good {good} ({good_commit[:12]}) is not an ancestor of --bad {bad} ({bad_commit[:12]}); "
                         "give the older, fast commit as --good and the newer, slow one as --bad")
    listed = _git(root, "rev-list", "--first-parent", "--reverse", f"{good_commit}..{bad_commit}").stdout.split()
    if good_commit not in _git(root, "rev-list", "--first-parent", bad_commit).stdout.split():
        raise UsageError(f"--good {good} ({good_commit[:12]}) is not on the first-parent line of --bad {bad}; name a "
                         f"commit of that line (`git log --first-parent --oneline {bad}`)")
    return tuple(_commit_position(root, commit) for commit in [good_commit, *listed])


def _resolve(root: Path, revision: str, option: str) -> str:
    try:
        return resolve_revision(root, revision)
    except UsageError as error:
        raise UsageError(str(error).replace("--perf-ab", option, 1)) from None


def _commit_position(root: Path, commit: str) -> Position:
    shown = _git(root, "show", "-s", "--format=%H%x00%s%x00%aI", commit).stdout.strip().split("\x00")
    return Position(commit=shown[0], subject=shown[1], author_date=shown[2])


def python_positions(pythons: Sequence[str]) -> tuple[Position, ...]:
    """The environments given to --pythons, each with its torch version; UsageError when one is not an interpreter,
    has no torch, or (any but the first, which only serves as a base side) cannot run perfsuite's pytest plugin."""
    if len(pythons) < 2:
        raise UsageError("--pythons: give at least two interpreters, oldest torch first (e.g. --pythons "
                         "/envs/torch-2.12/bin/python /envs/torch-2.13/bin/python)")
    found = []
    for index, python in enumerate(pythons):
        if not Path(python).is_file():
            raise UsageError(f"--pythons {python}: no such file; give the path of each environment's python")
        needed = "import torch" if index == 0 else "import torch, perfsuite, pytest_benchmark"
        try:
            checked = subprocess.run([python, "-c", f"{needed}; print(torch.__version__)"], capture_output=True,
                                     text=True, timeout=300)
        except OSError as error:
            raise UsageError(f"--pythons {python}: cannot be run ({error})") from None
        if checked.returncode != 0:
            last = (checked.stderr.strip().splitlines() or ["no output"])[-1]
            what = "torch" if index == 0 else "torch and perfsuite (the A/B job runs there as the head side)"
            raise UsageError(f"--pythons {python}: cannot import {what}: {last}; install them into that environment "
                             f"(`{python} -m pip install perfsuite`)")
        found.append(Position(python=python, torch_version=checked.stdout.strip()))
    return tuple(found)


def tracked_cases(root: Path, pytest_args: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the benchmark ids to follow, the pytest arguments that select them): with pytest arguments given, every case
    they select; else the cases that regressed in the last A/B job (.perfsuite/ab.json), selected with -k."""
    if pytest_args:
        return (), tuple(pytest_args)
    path = root / LAST_AB_SUMMARY
    choose = ("choose the cases with pytest's options after `--` (e.g. `perfsuite bisect --good v1 --bad main -- "
              "--perf-model resnet18 --perf-mode infer`)")
    if not path.is_file():
        raise UsageError(f"no cases to follow: {path} does not exist (it names the cases that regressed in the last "
                         f"A/B job); {choose}")
    reading = read_ab_file(path)
    if reading.summary is None:
        raise UsageError(f"no cases to follow: {reading.problems[0]}; {choose}")
    regressed = tuple(case.benchmark_id for case in reading.summary.cases
                      if case.status == "regressed" and case.benchmark_id)
    if not regressed:
        raise UsageError(f"no cases to follow: no case regressed in the last A/B job ({path}); {choose}")
    return regressed, ("-k", " or ".join(regressed))


def step_command(plan: BisectPlan, judge: Judge, summary_dir: Path) -> tuple[list[str], Path, dict[str, str]]:
    """The A/B job of one judgement: (command, folder to run it in, environment)."""
    head, base = plan.positions[judge.head], plan.positions[judge.base]
    budget = f"--perf-ab-budget={plan.budget_s * judge.budget_scale:g}"
    common = ["-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only", f"--perf-summary-dir={summary_dir}",
              budget, *plan.pytest_args]
    env = dict(os.environ)
    if plan.pythons:
        assert head.python is not None and base.python is not None
        return [head.python, *common, f"--perf-ab-python={base.python}"], plan.root, env
    assert head.commit is not None and base.commit is not None
    checkout = base_checkout(plan.root, head.commit)
    # The head's own modules come first, before an installed copy of the project (an editable install included).
    paths = [str(checkout / "src")] if (checkout / "src").is_dir() else []
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *paths, *filter(None, [env.get("PYTHONPATH")])])
    return [sys.executable, *common, f"--perf-ab={base.commit}"], checkout, env


def read_step(plan: BisectPlan, judge: Judge, summary_dir: Path, workdir: Path, returncode: int, output: str,
              seconds: float) -> Step:
    """The step's record from the ab.json its job wrote (errored, with pytest's last lines, when it wrote none)."""
    path = summary_dir / "ab.json"
    tail = "\n".join(output.strip().splitlines()[-_OUTPUT_TAIL_LINES:])
    if not path.is_file():
        why = f"the A/B job wrote no summary (pytest exit status {returncode}): {tail}"
        return Step(judge, "errored", (), seconds, why, None)
    reading = read_ab_file(path)
    if reading.summary is None:
        return Step(judge, "errored", (), seconds, f"{reading.problems[0]}", str(path))
    wanted = set(plan.tracked)
    cases = [case for case in reading.summary.cases
             if case.benchmark_id and (not wanted or case.benchmark_id in wanted)]
    if not plan.pythons:
        for case in cases:
            if case.head_model_file and not Path(case.head_model_file).resolve().is_relative_to(workdir.resolve()):
                raise UsageError(
                    f"the head side of {plan.positions[judge.head].label} measured {case.benchmark_id} with "
                    f"{case.head_model_file}, not with that commit's own file under {workdir}: the bisect would "
                    "judge one version against itself; make the project importable from its checkout (not only "
                    "from an installed copy) and run again")
    readings = tuple(
        CaseReading(case.benchmark_id or "", _status(case.status), case.ratio, case.ci_low, case.ci_high, case.floor,
                    case.message) for case in cases)
    missing = sorted(wanted - {case.benchmark_id for case in readings})
    statuses: list[AbStatus] = [case.status for case in readings] + ["errored"] * len(missing)
    reason: str | None = None
    if missing:
        reason = f"the A/B job did not measure {', '.join(missing)}"
    elif not readings:
        reason = f"the A/B job measured no case (pytest exit status {returncode}): {tail}"
    status = commit_status(statuses)
    if status == "errored" and reason is None:
        reason = "; ".join(case.message or case.status for case in readings)
    return Step(judge, status, readings, seconds, reason, str(path))


def _status(text: str | None) -> AbStatus:
    for status in AB_STATUSES:
        if status == text:
            return status
    return "errored"


def run_bisect(plan: BisectPlan, show: Callable[[str], None]) -> tuple[Finding, tuple[Step, ...]]:
    """Make the judgements the rule asks for, one A/B job each, until it has its finding; each step is shown and
    logged (pytest's output included) in the plan's folder. Checkouts the bisect made are removed at the end."""
    if plan.folder.exists():
        shutil.rmtree(plan.folder)
    plan.folder.mkdir(parents=True)
    keep_out_of_git(plan.root / WORK_FOLDER)
    log_path = plan.folder / render.LOG_FILE
    made = _existing_checkouts(plan.root)
    steps: list[Step] = []
    with log_path.open("w", encoding="utf-8") as log:
        def say(line: str) -> None:
            show(line)
            log.write(line + "\n")
            log.flush()

        say(render.range_line(plan.positions))
        try:
            while True:
                step = next_step(plan.last, [s.judgement for s in steps])
                if isinstance(step, Finding):
                    return step, tuple(steps)
                summary_dir = plan.folder / f"step-{len(steps) + 1:02d}"
                say(render.asking_line(len(steps) + 1, step, plan.positions))
                started = time.perf_counter()
                try:
                    command, workdir, env = step_command(plan, step, summary_dir)
                except UsageError as error:
                    steps.append(Step(step, "errored", (), time.perf_counter() - started,
                                      f"could not be checked out: {error}", None))
                    say(render.step_line(len(steps), steps[-1], plan.positions))
                    continue
                log.write(f"$ (cd {workdir} && {' '.join(command)})\n")
                log.flush()
                done = subprocess.run(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=STEP_TIMEOUT_S)
                log.write(done.stdout)
                steps.append(read_step(plan, step, summary_dir, workdir, done.returncode, done.stdout,
                                       time.perf_counter() - started))
                say(render.step_line(len(steps), steps[-1], plan.positions))
        finally:
            _remove_new_checkouts(plan.root, made)


def _existing_checkouts(root: Path) -> set[Path]:
    folder = root / CHECKOUTS_FOLDER
    return set(folder.iterdir()) if folder.is_dir() else set()


def _remove_new_checkouts(root: Path, before: set[Path]) -> None:
    """Remove the head checkouts this bisect made (and the base checkouts their A/B jobs made inside them)."""
    for checkout in sorted(_existing_checkouts(root) - before):
        nested = checkout / CHECKOUTS_FOLDER
        for inner in sorted(nested.iterdir()) if nested.is_dir() else []:
            _git(root, "worktree", "remove", "--force", str(inner))
        _git(root, "worktree", "remove", "--force", str(checkout))
    _git(root, "worktree", "prune")


def write_record(plan: BisectPlan, finding: Finding, steps: Sequence[Step], started_at: str) -> Path:
    """Write bisect.json into the plan's folder; its path."""
    document = render.bisect_document(finding, steps, plan.positions, plan.tracked, started_at)
    return write_text_atomically(plan.folder / render.RECORD_FILE, render.bisect_json(document))
