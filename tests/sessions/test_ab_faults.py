"""An A/B job under interruption, kills and hostile input, run as a user runs it (a scratch git project and a real
pytest process), each against the behaviour of before:
- one Ctrl-C (the terminal's, to the whole process group, or SIGINT to pytest alone) stops the job within seconds,
  keeps the verdicts of the cases decided before it, marks the others interrupted (never a pass) and leaves no
  worker and no working folder behind;
- a worker killed while idle is replaced: it costs no case;
- a second job in the same project is refused naming the first, and the first runs on untouched; a job killed -9
  leaves its working folder under .perfsuite/ (never /tmp), which the next job removes;
- a base interpreter that is not one is a usage error naming it and what it printed;
- a pull request that adds a model judges the others and says the new one has no base; a head that deleted its
  conftest.py is refused instead of judging perfsuite's built-in models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.scratch_project import git, make_project, run_pytest_in_process

pytestmark = pytest.mark.slow

MODEL = '''import os
import random
import signal
import time
from pathlib import Path

import torch
from perfsuite import Workload, register_workload


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.big = torch.nn.Linear(256, 256)

    def forward(self, x):
        return torch.relu(self.big(x))


def build(profile):
    log = os.environ.get("AB_TEST_WORKERS")
    if log:
        with open(log, "a") as workers:
            workers.write(f"{os.getpid()}\\n")
    return Wide()


class Noisy(Wide):
    """A step of random length: no band this narrow is ever decided for it."""

    def forward(self, x):
        time.sleep(random.random() * 0.002)
        return super().forward(x)


def build_stopper(profile):
    """Stops the session at the first open of the stopper's third block (both cases have had two by then), as
    AB_TEST_SIGNAL says: SIGINT to the process group (a terminal's Ctrl-C) or to pytest alone."""
    opened = Path(os.environ["AB_TEST_OPENS"])
    with opened.open("a") as log:
        log.write("open\\n")
    if len(opened.read_text().split()) == 5:
        Path(os.environ["AB_TEST_STOPPED"]).write_text(repr(time.time()))
        if os.environ["AB_TEST_SIGNAL"] == "group":
            os.killpg(os.getpgid(0), signal.SIGINT)
        else:
            os.kill(os.getppid(), signal.SIGINT)
    build(profile)
    return Noisy()


def inputs(profile, batch_size):
    return torch.randn(batch_size, 256)


register_workload(Workload(name="quick", build_module=build, make_inputs=inputs, batch_sizes={"smoke": (32,)}))
'''
STOPPER = '''register_workload(Workload(name="stopper", build_module=build_stopper, make_inputs=inputs,
                           batch_sizes={"smoke": (32,)}))
'''
EXTRA = '''register_workload(Workload(name="extra", build_module=build, make_inputs=inputs,
                           batch_sizes={"smoke": (32,)}))
'''
PYPROJECT = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer"
dtype = "fp32"
threads = 1
warmup = 2

[tool.perfsuite.tolerance]
# A wide band decides an A/A case in its first blocks.
default = 0.5
"""
# A band far inside any floor of the stopper's random steps: it is never decided.
STOPPER_BAND = "stopper = 0.00001\n"


# Windows of 0.1 s a side (pytest-benchmark's --benchmark-max-time): the quick case's A/A verdict at the wide band is
# decided in its first blocks all the same, and the stopper's blocks reach its third sooner.
JOB = ("--benchmark-only", "--benchmark-max-time", "0.1", "--perf-processes", "2")


def pytest_command(*options: str) -> list[str]:
    """The job's command, for the tests that signal or race it while it runs."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *JOB, *options]


def environment(tmp_path: Path, **more: str) -> dict[str, str]:
    """This environment with a private TMPDIR (to see what a job leaves there) and the test model's files."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path / "tmp"),
            "AB_TEST_WORKERS": str(tmp_path / "workers.log"), **more}


def run(root: Path, env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    """The job, its session in this process (its sides in worker processes): for the tests that neither signal nor
    race it."""
    return run_pytest_in_process(root, *JOB, *options, env=env)


def workers_alive(tmp_path: Path) -> list[int]:
    """The worker processes the test model saw that still run."""
    log = tmp_path / "workers.log"
    pids = {int(pid) for pid in log.read_text().split()} if log.exists() else set()
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


def wait_for_no_workers(tmp_path: Path, within_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (alive := workers_alive(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


@pytest.mark.parametrize("receiver", ["group", "pytest"])
def test_one_ctrl_c_stops_the_job_within_seconds_keeping_the_decided_verdicts(
    tmp_path: Path, receiver: str, sigint_not_ignored: None
):
    root = make_project(tmp_path / "project", MODEL + STOPPER, PYPROJECT + STOPPER_BAND, "the models")
    stopped_at = tmp_path / "stopped"
    env = environment(tmp_path, AB_TEST_OPENS=str(tmp_path / "opens.log"), AB_TEST_STOPPED=str(stopped_at),
                      AB_TEST_SIGNAL=receiver)
    # Its own session: the group's SIGINT reaches pytest and its workers, never this test run.
    job = subprocess.Popen(pytest_command("--perf-ab", "HEAD"), cwd=root, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    output, _ = job.communicate(timeout=600)
    ended = time.time()

    assert job.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert ended - float(stopped_at.read_text()) < 10, output[-3000:]
    summary = json.loads((root / ".perfsuite" / "ab.json").read_text())
    statuses = {case["case"]["model"]: case["status"] for case in summary["cases"]}
    assert statuses == {"quick": "unchanged", "stopper": "interrupted"}
    assert summary["interrupted"] and summary["job_failed"]
    assert "perfsuite A/B INTERRUPTED: 1 unchanged, 1 interrupted" in output
    assert "interrupted, not judged (never a pass)" in (root / ".perfsuite" / "ab.md").read_text()
    assert "AbUnusable" not in output and "Traceback" not in output
    assert wait_for_no_workers(tmp_path) == []
    assert not (root / ".perfsuite" / "ab-job").exists() and os.listdir(tmp_path / "tmp") == []


def test_a_second_job_is_refused_naming_the_first_which_runs_on_and_a_killed_jobs_folder_is_removed_next(
        tmp_path: Path):
    root = make_project(tmp_path / "project", MODEL, PYPROJECT, "the models")
    git(root, "commit", "-q", "--allow-empty", "-m", "head")
    env = environment(tmp_path)
    # A band far inside any floor and longer windows: the first job measures until it is stopped (its 16 blocks of
    # windows of the default length could end before the second job looks; at 1 s a side a block they take over half a
    # minute, while the second job, in this process, is refused within a few seconds; the first block, which the test
    # waits for, takes about 2 s).
    first = subprocess.Popen(pytest_command("--perf-ab", "HEAD~1", "--perf-ab-budget", "600", "--perf-tolerance",
                                            "0.00001", "--benchmark-max-time", "1"), cwd=root,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert first.stdout is not None
    for line in first.stdout:  # the first job measures: its checkout and working folder exist
        if "block 1" in line:
            break
    base = git(root, "rev-parse", "HEAD~1").strip()
    checkout = root / ".perfsuite" / "ab" / base[:12]
    second = run(root, env, "--perf-ab", "HEAD~1")
    assert second.returncode == pytest.ExitCode.USAGE_ERROR, second.stdout + second.stderr
    assert f"another A/B job is running in {root} (process {first.pid}, started" in second.stderr
    assert "do not remove its checkout" in second.stderr and "git worktree remove" not in second.stderr
    assert (checkout / "conftest.py").exists() and (root / ".perfsuite" / "ab-job").is_dir()

    first.kill()  # kill -9 mid-job: no clean-up runs
    first.wait()
    assert wait_for_no_workers(tmp_path) == []  # the workers saw their parent go
    left = root / ".perfsuite" / "ab-job"
    assert any(left.glob("worker-*.log"))  # under the project, never in /tmp
    assert os.listdir(tmp_path / "tmp") == []

    third = run(root, env, "--perf-ab", "HEAD~1")  # the lock died with the killed job
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    assert not left.exists() and os.listdir(tmp_path / "tmp") == []
    assert "perfsuite A/B passed: 1 unchanged" in third.stdout


@pytest.mark.parametrize("printed", ["not json", "[1,2,3]", '{"missing":"str"}'])
def test_a_base_interpreter_that_prints_something_else_is_a_usage_error_naming_it(tmp_path: Path, printed: str):
    root = make_project(tmp_path / "project", MODEL, PYPROJECT, "the models")
    (root / ".perfsuite").mkdir()
    (root / ".perfsuite" / "ab.json").write_text('{"an old job": "passed"}')
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho '{printed}'\n")
    fake.chmod(0o755)
    result = run(root, environment(tmp_path), "--perf-ab-python", str(fake))
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert f"--perf-ab-python {fake}: printed {printed!r}" in result.stderr
    assert not (root / ".perfsuite" / "ab.json").exists()  # the previous job's summary never reads as this one's
    assert os.listdir(tmp_path / "tmp") == [] and not (root / ".perfsuite" / "ab-job").exists()


def test_a_model_the_head_adds_has_no_base_and_the_others_are_judged(tmp_path: Path):
    root = make_project(tmp_path / "project", MODEL, PYPROJECT, "the models")
    (root / "conftest.py").write_text(MODEL + EXTRA)
    git(root, "commit", "-q", "-am", "add a model")
    env = environment(tmp_path)
    result = run(root, env, "--perf-ab", "HEAD~1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "perfsuite A/B passed: 1 unchanged, 1 no-base" in result.stdout
    assert "1 passed, 1 skipped" in result.stdout
    summary = json.loads((root / ".perfsuite" / "ab.json").read_text())
    extra, = [case for case in summary["cases"] if case["case"]["model"] == "extra"]
    assert extra["status"] == "no-base" and not extra["fails_job"] and extra["pairs"] == 0
    assert "no base: the base side does not have this model" in extra["message"]

    asked = run(root, env, "--perf-ab", "HEAD~1", "--perf-on-no-base", "fail", "--perf-model", "extra")
    assert asked.returncode == 1, asked.stdout[-3000:] + asked.stderr[-3000:]
    assert "perfsuite A/B FAILED: 1 no-base" in asked.stdout


def test_a_head_that_deleted_its_conftest_is_refused_instead_of_judging_the_built_in_models(tmp_path: Path):
    root = make_project(tmp_path / "project", MODEL, PYPROJECT, "the models")
    git(root, "rm", "-q", "conftest.py")
    git(root, "commit", "-q", "-m", "drop the models")
    result = run(root, environment(tmp_path), "--perf-ab", "HEAD~1")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:] + result.stderr[-3000:]
    assert "--perf-ab HEAD~1: the head deleted conftest.py, which the base has" in result.stderr
    assert "perfsuite's built-in models instead of yours" in result.stderr
    assert not (root / ".perfsuite" / "ab").exists()  # refused before anything was checked out


def test_ci_judge_never_posts_an_earlier_summary_when_its_session_fails(tmp_path: Path):
    root = make_project(tmp_path / "project", MODEL, PYPROJECT, "the models")
    (root / "perf-summary").mkdir()
    (root / "perf-summary" / "ab.md").write_text("# perfsuite A/B\n\n**perfsuite A/B passed: 9 unchanged**\n")
    posted = tmp_path / "step-summary.md"
    done = subprocess.run([sys.executable, "-m", "perfsuite.cli", "ci", "judge", "--", "--perf-model", "nonexistent"],
                          cwd=root, capture_output=True, text=True, timeout=600,
                          env={**environment(tmp_path), "GITHUB_STEP_SUMMARY": str(posted)})
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "9 unchanged" not in posted.read_text()
    assert "No perfsuite summary was written" in posted.read_text()


def test_a_worker_killed_while_idle_mid_round_is_replaced_and_costs_no_case(tmp_path: Path, monkeypatch):
    """Both sides in one warm worker (K = 1); after the first case's block, while the worker waits for its next
    request, it is killed -9. Before, the round's next case met the dead worker and errored (and every case after
    it in the round); now the worker is replaced and every case is judged."""
    from perfsuite.judge.ab import look
    from perfsuite.records import Case, WorkloadSource
    from perfsuite.render.progress import ab_progress_line
    from perfsuite.run import ab
    from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan

    side_root = tmp_path / "side"
    side_root.mkdir()
    (side_root / "ab_test_models.py").write_text(MODEL + EXTRA)
    sources = {model: [WorkloadSource(module="ab_test_models", file=str(side_root / "ab_test_models.py"))]
               for model in ("quick", "extra")}
    monkeypatch.setenv("AB_TEST_WORKERS", str(tmp_path / "workers.log"))
    cases = tuple(Case("cpu", "fp32", model, 32, "infer", "smoke") for model in ("quick", "extra"))
    plan = SessionPlan(cases, 1, MeasureSettings(2), RoundSettings(max_time_s=0.2), isolation="pass", threads=1)
    base = ab.SideSpec("base", sys.executable, side_root, sources)
    head = ab.SideSpec("head", sys.executable, side_root, sources)
    started: list[ab.Worker] = []
    real_init = ab.Worker.__init__

    def recording_init(self, *arguments, **keywords):
        real_init(self, *arguments, **keywords)
        started.append(self)

    monkeypatch.setattr(ab.Worker, "__init__", recording_init)
    killed: list[int] = []

    def show(progress) -> None:
        if "block 1" in ab_progress_line(progress) and not killed:
            killed.append(started[-1].process.pid)
            started[-1].process.kill()
            started[-1].process.wait()

    def decided(measurement):
        seen = look(measurement, 0.5, len(cases))
        return seen.status is not None, seen.next_windows

    results = ab.measure_ab(plan, base, head, tmp_path / "work", show, ab.AbSchedule(1, 300, 4), decided)
    assert killed and results.failures == {}
    assert all(len(results.measurements[case.benchmark_id].pairs) >= 2 for case in cases)
    assert len(started) == 2 and started[1].process.pid != killed[0]
