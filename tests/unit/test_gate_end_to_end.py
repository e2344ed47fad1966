"""The regression gate through pytest, as a user runs it: record, rerun unchanged, rerun slower.

The workload sleeps for a set time inside its step, so its duration is fixed by the test rather than by
this machine's noisy CPU, and a 3x slowdown is unambiguous.
"""

import json

import pytest

SLEEPY = '''
import os
import time

import torch
from perfsuite import Workload, register_workload
class Sleeper(torch.nn.Module):
    def forward(self, x):
        time.sleep(float(os.environ.get("SLEEP_S", "0.002")))
        return x * 2


register_workload(Workload(
    name="sleeper",
    build_module=lambda profile: Sleeper(),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4),
    batch_sizes={"smoke": (2,), "standard": (2,)},
))
'''
RUN = ("--benchmark-only", "--perf-device", "cpu", "--perf-dtype", "fp32", "--perf-model", "sleeper",
       "--benchmark-min-rounds", "15", "--benchmark-max-time", "0.05", "--perf-memory-tolerance", "0.5")
BASELINE_GLOB = "baselines/cpu/*.json"


@pytest.fixture
def project(pytester):
    pytester.makeconftest(SLEEPY)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    return pytester


def _baseline_file(project):
    files = list(project.path.glob(BASELINE_GLOB))
    assert len(files) == 1, files
    return files[0]


def test_record_then_unchanged_passes_then_slower_fails_naming_the_benchmark(project, monkeypatch):
    monkeypatch.setenv("SLEEP_S", "0.002")
    recorded = project.runpytest_subprocess(*RUN, "--perf-update-baseline")
    recorded.assert_outcomes(passed=1)
    entry = json.loads(_baseline_file(project).read_text())["entries"]["cpu-fp32-sleeper-bs2-infer"]
    assert entry["rounds"] >= 15 and entry["median_s"] >= 0.002

    unchanged = project.runpytest_subprocess(*RUN)
    unchanged.assert_outcomes(passed=1)
    unchanged.stdout.fnmatch_lines(["*cpu-fp32-sleeper-bs2-infer*unchanged*"])

    monkeypatch.setenv("SLEEP_S", "0.006")
    slower = project.runpytest_subprocess(*RUN)
    slower.assert_outcomes(failed=1)
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(["*cpu-fp32-sleeper-bs2-infer*regressed*"])
    summary = json.loads((project.path / ".perfsuite" / "summary.json").read_text())
    assert [v["status"] for v in summary["verdicts"]] == ["regressed"]


def test_without_a_baseline_the_verdict_says_how_to_record_one(project):
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*no-baseline*"])
    assert not list(project.path.glob(BASELINE_GLOB)), "nothing is written without --perf-update-baseline"


def test_a_corrupted_baseline_fails_the_run_naming_the_file_and_is_left_alone(project):
    project.runpytest_subprocess(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    baseline = _baseline_file(project)
    baseline.write_text(baseline.read_text()[:200])  # truncated
    truncated = baseline.read_bytes()
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{baseline.name}*"])
    assert baseline.read_bytes() == truncated


def test_updating_keeps_the_entries_of_cases_not_run(project):
    project.runpytest_subprocess(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    project.runpytest_subprocess(*RUN, "--perf-update-baseline", "--perf-batch-size", "3").assert_outcomes(passed=1)
    entries = json.loads(_baseline_file(project).read_text())["entries"]
    assert sorted(entries) == ["cpu-fp32-sleeper-bs2-infer", "cpu-fp32-sleeper-bs3-infer"]
