"""A newcomer's first run: the default profile follows the device, --benchmark-only collects only benchmarks,
--perf-model leaves the DataLoader cases out, per-case progress with an estimate, a results table per device, and
an interrupted run keeps what it measured.

The in-process tests of this subject: tests/quick/test_first_run.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def repository_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A copy of this repository's pyproject, benchmark modules and a unit test, as a user's checkout has them."""
    (pytester.path / "pyproject.toml").write_text((REPOSITORY / "pyproject.toml").read_text())
    benchmarks = pytester.path / "tests" / "benchmarks"
    benchmarks.mkdir(parents=True)
    for name in ("test_models.py", "test_dataloader.py"):
        (benchmarks / name).write_text((REPOSITORY / "tests" / "benchmarks" / name).read_text())
    (pytester.path / "tests" / "test_unit.py").write_text("def test_unit():\n    assert True\n")
    return pytester


@pytest.fixture
def run(repository_project: pytest.Pytester, run_in_process: Callable[..., pytest.RunResult]
        ) -> Callable[..., pytest.RunResult]:
    """`pytest ARGS` in the copy, its session in this process (`run_in_process`)."""
    return run_in_process


def test_benchmark_only_collects_only_benchmarks_and_a_model_choice_leaves_the_dataloader_out(run):
    result = run(
        "--benchmark-only", "--collect-only", "-q", "--perf-model", "resnet18", "--perf-device", "cpu"
    )
    listed = [line for line in result.outlines if "::" in line]
    assert listed and all("test_models.py::test_model[cpu-" in line for line in listed), listed
    assert all("-smoke]" in line for line in listed)  # the CPU alone: smoke by default
    assert not any("test_unit" in line or "dataloader" in line for line in listed)
    with_loader = run(
        "--benchmark-only", "--collect-only", "-q", "--perf-model", "resnet18,dataloader", "--perf-device", "cpu"
    )
    assert any("test_dataloader[dataloader-cpu-" in line for line in with_loader.outlines)
    without_benchmark_only = run("--collect-only", "-q", "--perf-device", "cpu")
    assert any("test_unit.py::test_unit" in line for line in without_benchmark_only.outlines)


def test_the_header_says_why_the_smoke_profile_runs_and_how_to_run_the_articles_sizes(run):
    result = run("--benchmark-only", "--collect-only", "--perf-device", "cpu")
    result.stdout.fnmatch_lines(["*no accelerator is selected, so the smoke profile runs*--perf-profile standard*"])
    chosen = run(
        "--benchmark-only", "--collect-only", "--perf-device", "cpu", "--perf-profile", "smoke"
    )
    assert "perfsuite: profile=smoke" in chosen.stdout.str() and "no accelerator is selected" not in chosen.stdout.str()


def test_an_interrupted_run_keeps_the_summary_and_results_of_the_cases_measured(repository_project, run):
    """Ctrl-C after the second case (a KeyboardInterrupt, as SIGINT raises in pytest's main thread)."""
    repository_project.makeconftest(
        """
        done = []

        def pytest_runtest_logfinish(nodeid, location):
            if "test_model[" in nodeid:
                done.append(nodeid)
                if len(done) == 2:
                    raise KeyboardInterrupt
        """
    )
    result = run(
        "--benchmark-only", "--perf-device", "cpu", "--perf-model", "resnet18", "--perf-dtype", "fp32",
        "--benchmark-max-time", "0.05", "--benchmark-json", "out.json", "-p", "no:cacheprovider",
        no_reraise_ctrlc=True,
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*perfsuite results*", "*interrupted: the files hold the 2 of 2 cases measured*"])
    summary = json.loads((repository_project.path / ".perfsuite" / "summary.json").read_text())
    assert len(summary["verdicts"]) == 2
    results = (repository_project.path / ".perfsuite" / "results.md").read_text()
    assert results.count("-resnet18-bs4-") == 2
    assert len(json.loads((repository_project.path / "out.json").read_text())["benchmarks"]) == 2


def test_each_case_prints_progress_with_an_estimate(run):
    result = run(
        "--benchmark-only", "--perf-device", "cpu", "--perf-model", "resnet18", "--perf-dtype", "fp32",
        "--benchmark-max-time", "0.05", "-p", "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["perfsuite: 1/2 benchmarks in * s, about * left", "perfsuite: 2/2 benchmarks in * s"])
    result.stdout.fnmatch_lines(["*perfsuite results*", "cpu:", "*case*median*samples/s*TFLOP/s*verdict*"])


def test_no_progress_lines_when_the_benchmarks_are_skipped(run):
    result = run(
        "--benchmark-skip", "--perf-device", "cpu", "--perf-model", "resnet18", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, skipped=4)
    assert "benchmarks in" not in result.stdout.str()
