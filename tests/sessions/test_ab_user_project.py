"""A/B in one job in a user's own project, run as a user runs it: a scratch git repository with one registered model,
`pytest --benchmark-only --perf-ab REV`. The base side runs the base commit's model (its file is under the base
checkout, and a layer run twice at head reads as a regression); a comment-only change reads unchanged; bad input is
refused before anything is measured, with nothing left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scratch_project import commit, git, make_project, run_pytest, run_pytest_in_process

pytestmark = pytest.mark.slow

MODEL = '''import torch
from perfsuite import Workload, register_workload


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.big = torch.nn.Linear(512, 512)
        self.head = torch.nn.Linear(512, 4)

    def forward(self, x):
        x = torch.relu(self.big(x))  # LAYER
        return self.head(x)


register_workload(Workload(
    name="wide", build_module=lambda profile: Wide(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 512), batch_sizes={"smoke": (64,)},
))
'''
TWICE = "        x = torch.relu(self.big(x))  # LAYER\n        x = torch.relu(self.big(x))  # LAYER run twice\n"
PYPROJECT = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer"
dtype = "fp32"
threads = 1
warmup = 2
# A wide band: this test checks the wiring on a busy shared machine, not the floor (the selftest measures that).
tolerance = 0.5
"""


def wide_project(tmp_path: Path) -> Path:
    """A scratch git repository with the model committed on main."""
    return make_project(tmp_path / "project", MODEL, PYPROJECT)


PAIRS = 2  # the fewest an A/B job takes


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return wide_project(tmp_path)


@pytest.fixture
def started_workers(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every worker process an in-process job starts, in order."""
    from perfsuite.run.workers import Workers

    started: list = []
    start = Workers.start

    def recording_start(self, *arguments, **keywords):
        started.append(start(self, *arguments, **keywords))
        return started[-1]

    monkeypatch.setattr(Workers, "start", recording_start)
    return started


def ab(root: Path, *options: str, own_process: bool = False) -> subprocess.CompletedProcess[str]:
    """An A/B job of PAIRS process pairs with short windows, its session in this process unless `own_process` (its
    sides run in worker processes either way): each verdict here is far outside its floor (or the inconclusive one
    far inside it), so the fewest blocks the job allows decide it."""
    run = run_pytest if own_process else run_pytest_in_process
    return run(root, "--benchmark-only", "--benchmark-max-time", "0.1", "--perf-processes", str(PAIRS), *options)


def test_a_layer_run_twice_is_regressed_and_the_base_ran_the_base_commits_model(project: Path):
    base_commit = git(project, "rev-parse", "HEAD").strip()
    (project / "conftest.py").write_text(MODEL.replace("        x = torch.relu(self.big(x))  # LAYER\n", TWICE))
    commit(project, "run the layer twice")
    result = ab(project, "--perf-ab", "HEAD~1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "cpu-fp32-wide-bs64-infer-smoke: regressed" in result.stdout
    summary = json.loads((project / ".perfsuite" / "ab.json").read_text())
    (case,) = summary["cases"]
    assert case["status"] == "regressed" and case["ratio"] > 1.5
    assert summary["base"]["revision"] == base_commit and summary["base"]["label"] == "HEAD~1"
    base_file, head_file = Path(case["model_files"]["base"]), Path(case["model_files"]["head"])
    assert base_file.is_relative_to(project / ".perfsuite" / "ab" / base_commit[:12])
    assert "run twice" not in base_file.read_text() and head_file == project / "conftest.py"
    assert case["largest_output_difference"] > 0  # the layer run twice changes the numbers too
    assert git(project, "status", "--porcelain") == ""  # the base checkout does not show in the project's status


def test_a_comment_only_change_is_unchanged_with_identical_outputs(project: Path, started_workers: list):
    (project / "conftest.py").write_text(MODEL.replace("# LAYER", "# LAYER: the wide layer"))
    commit(project, "a comment")
    result = ab(project, "--perf-ab", "HEAD~1")
    assert result.returncode == 0, result.stdout + result.stderr
    (case,) = json.loads((project / ".perfsuite" / "ab.json").read_text())["cases"]
    assert case["status"] == "unchanged" and case["largest_output_difference"] == 0
    assert case["pairs"] == PAIRS and case["floor"] < 0.5
    # The worker that checked the models before the tests ran measured as the first of the PAIRS: no more started.
    assert len(started_workers) == PAIRS and not any(worker.alive for worker in started_workers)


def test_a_verdict_that_cannot_judge_fails_the_job_unless_only_warned_of(project: Path):
    """A band far inside any floor: the A/A verdict is inconclusive, which is never a pass. A budget of one second
    ends the job after the first blocks, which every case gets whatever the budget."""
    result = ab(project, "--perf-ab", "HEAD", "--perf-tolerance", "0.0001", "--perf-ab-budget", "1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "perfsuite A/B FAILED: 1 inconclusive" in result.stdout
    assert "cpu-fp32-wide-bs64-infer-smoke: inconclusive: the budget ran out" in result.stdout
    assert "is HEAD's own commit" in result.stdout and "A/A check" in result.stdout
    summary = json.loads((project / ".perfsuite" / "ab.json").read_text())
    assert summary["job_failed"] and summary["cases"][0]["fails_job"]
    warned = ab(project, "--perf-ab", "HEAD", "--perf-tolerance", "0.0001", "--perf-on-inconclusive", "warn",
                "--perf-ab-budget", "1")
    assert warned.returncode == 0, warned.stdout + warned.stderr
    assert "perfsuite A/B passed: 1 inconclusive" in warned.stdout
    assert "is only a warning (--perf-on-inconclusive warn)" in warned.stdout


@pytest.mark.parametrize("revision, message", [
    ("no-such-branch", "--perf-ab no-such-branch: no such revision in"),
    ("merge-base", None),  # main is HEAD here: its merge base is HEAD itself, a valid base
])
def test_an_unknown_revision_is_refused_before_measuring(project: Path, revision: str, message: str | None):
    if message is None:
        assert git(project, "merge-base", "HEAD", "main").strip() == git(project, "rev-parse", "HEAD").strip()
        return
    result = ab(project, "--perf-ab", revision)
    assert result.returncode == 4 and message in result.stderr, result.stderr
    assert not (project / ".perfsuite" / "ab.json").exists()


def test_a_base_without_the_selected_model_says_no_base_and_judges_nothing(project: Path, started_workers: list):
    (project / "conftest.py").write_text(MODEL.replace('name="wide"', 'name="wider"'))
    commit(project, "rename the model")
    result = ab(project, "--perf-ab", "HEAD~1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "perfsuite A/B judged nothing: 1 no-base" in result.stdout and "1 skipped" in result.stdout
    assert "wider: no base (the base side does not have it): workload 'wider' was not found" in result.stdout
    (case,) = json.loads((project / ".perfsuite" / "ab.json").read_text())["cases"]
    assert case["status"] == "no-base" and not case["fails_job"]
    # Only the worker that checked the models, stopped: nothing was left to measure.
    assert len(started_workers) == 1 and not started_workers[0].alive


def test_a_base_interpreter_without_torch_is_refused(project: Path, tmp_path: Path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    result = ab(project, "--perf-ab-python", str(bare / "bin" / "python"))
    assert result.returncode == 4
    assert "cannot import torch there" in result.stderr and "install torch into that environment" in result.stderr


def test_a_changed_base_checkout_is_refused_and_kept(project: Path):
    (project / "conftest.py").write_text(MODEL.replace("# LAYER", "# LAYER: a comment"))
    commit(project, "a comment")
    base_commit = git(project, "rev-parse", "HEAD~1").strip()
    git(project, "worktree", "add", "--detach", "-q", str(project / ".perfsuite" / "ab" / base_commit[:12]),
        base_commit)
    edited = project / ".perfsuite" / "ab" / base_commit[:12] / "conftest.py"
    edited.write_text(edited.read_text() + "# someone's edit\n")
    result = ab(project, "--perf-ab", "HEAD~1")
    assert result.returncode == 4 and "has changes; perfsuite will not measure or delete it" in result.stderr
    assert edited.read_text().endswith("# someone's edit\n")


def test_another_interpreter_runs_the_base_side_on_the_same_code_and_both_are_named(project: Path, tmp_path: Path):
    # A second environment on this interpreter's packages: another interpreter path, the same torch (the measured
    # torch 2.12.0 against 2.13.0 table is in docs/ab.md).
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    import site

    (next(other.glob("lib/python*/site-packages")) / "this-environment.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n")
    result = ab(project, "--perf-ab-python", str(other / "bin" / "python"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((project / ".perfsuite" / "ab.json").read_text())
    assert summary["base"]["python"] == str(other / "bin" / "python") and summary["head"]["python"] == sys.executable
    import torch

    assert summary["base"]["torch_version"] == summary["head"]["torch_version"] == torch.__version__
    assert f"base: python {other / 'bin' / 'python'}" in result.stdout and f"torch {torch.__version__}" in result.stdout


LOCKED_MODEL = MODEL.replace('''register_workload(''', '''import os, weakref
from pathlib import Path

LOCKS = Path(os.environ["AB_TEST_LOCKS"])


def build(profile):
    """A model that does not fit twice: building it while another one is alive, in this process or another, is out
    of memory."""
    LOCKS.mkdir(exist_ok=True)
    if any(LOCKS.iterdir()):
        raise RuntimeError("CUDA out of memory (this test's device holds one model)")
    module = Wide()
    lock = LOCKS / f"{os.getpid()}-{id(module)}"
    lock.touch()
    weakref.finalize(module, os.remove, str(lock))
    return module


register_workload(''').replace("build_module=lambda profile: Wide()", "build_module=build")


def test_a_case_that_does_not_fit_twice_is_measured_one_side_at_a_time_and_says_so(project: Path, monkeypatch):
    (project / "conftest.py").write_text(LOCKED_MODEL)
    commit(project, "a model that fits once")
    monkeypatch.setenv("AB_TEST_LOCKS", str(project.parent / "locks"))
    # An A/A job: what this test checks is the fallback, so a verdict too noisy to judge is only warned of.
    result = ab(project, "--perf-ab", "HEAD", "--perf-on-inconclusive", "warn", "--perf-ab-budget", "1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (case,) = json.loads((project / ".perfsuite" / "ab.json").read_text())["cases"]
    assert case["status"] in ("unchanged", "inconclusive") and case["pairs"] >= PAIRS
    assert all(pair["one_side_at_a_time"] for pair in case["process_pairs"])
    assert "both sides did not fit in device memory together" in result.stdout
