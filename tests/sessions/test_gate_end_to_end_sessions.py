"""The regression gate through pytest, as a user runs it: record, rerun unchanged, rerun slower.

The workload sleeps for a set time inside its step, so its duration is fixed by the test rather than by
this machine's noisy CPU, and a 3x slowdown is unambiguous.

The in-process tests of this subject: tests/quick/test_gate_end_to_end.py."""

import json

import pytest

from perfsuite.judge.stats import DecisionConfig, baseline_runs_needed

pytestmark = pytest.mark.slow

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
       "--perf-profile", "standard", "--benchmark-min-rounds", "15", "--benchmark-max-time", "0.05",
       "--perf-memory-tolerance", "0.5")
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


def test_one_process_against_one_run_is_uncalibrated_and_fails_only_beyond_twice_as_slow(
    project, run_in_process, monkeypatch
):
    monkeypatch.setenv("SLEEP_S", "0.002")
    recorded = run_in_process(*RUN, "--perf-update-baseline")
    recorded.assert_outcomes(passed=1)
    runs = json.loads(_baseline_file(project).read_text())["entries"]["cpu-fp32-sleeper-bs2-infer"]["runs"]
    assert len(runs) == 1 and runs[0]["rounds"] >= 15 and runs[0]["median_s"] >= 0.002

    unchanged = run_in_process(*RUN)
    unchanged.assert_outcomes(passed=1)
    unchanged.stdout.fnmatch_lines(["cpu-fp32-sleeper-bs2-infer uncalibrated * 1/1 *"])

    monkeypatch.setenv("SLEEP_S", "0.006")
    slower = run_in_process(*RUN)
    slower.assert_outcomes(failed=1)
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(["*cpu-fp32-sleeper-bs2-infer*regressed*"])
    summary = json.loads((project.path / ".perfsuite" / "summary.json").read_text())
    assert [v["status"] for v in summary["verdicts"]] == ["regressed"]


def test_a_history_of_processes_judges_unchanged_runs_unchanged_and_slower_ones_regressed(
    project, run_in_process, monkeypatch
):
    monkeypatch.setenv("SLEEP_S", "0.002")
    # Two recordings of 4 and 3 processes: the 7 runs that 3 runs need to reach p < 0.01, the fewest that calibrate.
    for processes in ("4", "3"):
        run_in_process(*RUN, "--perf-update-baseline", "--perf-processes", processes).assert_outcomes(passed=1)
    runs = json.loads(_baseline_file(project).read_text())["entries"]["cpu-fp32-sleeper-bs2-infer"]["runs"]
    assert len(runs) == 7 == baseline_runs_needed(3, DecisionConfig().false_alarm_rate)

    unchanged = run_in_process(*RUN, "--perf-processes", "3")
    unchanged.assert_outcomes(passed=1)
    unchanged.stdout.fnmatch_lines(["cpu-fp32-sleeper-bs2-infer unchanged * 3/7 *"])

    monkeypatch.setenv("SLEEP_S", "0.003")
    slower = run_in_process(*RUN, "--perf-processes", "3")
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines([
        "cpu-fp32-sleeper-bs2-infer regressed * 3/7 *",
        "*cpu-fp32-sleeper-bs2-infer regressed: median * (x1.*, 3 run(s) vs 7 baseline run(s)); slower beyond*",
    ])


def test_without_a_baseline_the_verdict_says_how_to_record_one(project, run_in_process):
    result = run_in_process(*RUN)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*no-baseline*"])
    assert not list(project.path.glob(BASELINE_GLOB)), "nothing is written without --perf-update-baseline"


def test_a_corrupted_baseline_fails_the_run_naming_the_file_and_is_left_alone(project, run_in_process):
    run_in_process(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    baseline = _baseline_file(project)
    baseline.write_text(baseline.read_text()[:200])  # truncated
    truncated = baseline.read_bytes()
    result = run_in_process(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{baseline.name}*"])
    # The failure shows the message once, without the exception it was raised from.
    output = result.stdout.str()
    assert "During handling of the above exception" not in output and "Traceback" not in output
    assert baseline.read_bytes() == truncated


def test_recording_over_a_corrupted_baseline_fails_with_its_message_keeps_it_and_writes_the_summary(
    project, run_in_process
):
    run_in_process(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    baseline = _baseline_file(project)
    baseline.write_text(baseline.read_text()[:200])  # truncated
    truncated = baseline.read_bytes()
    result = run_in_process(*RUN, "--perf-update-baseline")
    result.assert_outcomes(failed=1)
    output = "\n".join(result.outlines + result.errlines)
    assert "Traceback" not in output and "INTERNALERROR" not in output
    result.stdout.fnmatch_lines([f"*{baseline.name}*not valid JSON*--perf-rebaseline*"])
    assert baseline.read_bytes() == truncated
    summary = json.loads((project.path / ".perfsuite" / "summary.json").read_text())
    assert (summary["gate_failed"], summary["counts"]["errored"]) == (True, 1)


def test_rebaseline_moves_a_corrupted_baseline_aside_and_records_afresh(project, run_in_process):
    run_in_process(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    baseline = _baseline_file(project)
    baseline.write_text("{")
    result = run_in_process(*RUN, "--perf-rebaseline")
    result.stdout.fnmatch_lines([f"*{baseline.name} could not be read; it was moved aside to *.bad-*.json*"])
    aside = list(baseline.parent.glob(f"{baseline.stem}.bad-*.json"))
    assert len(aside) == 1 and aside[0].read_text() == "{"
    assert len(json.loads(baseline.read_text())["entries"]["cpu-fp32-sleeper-bs2-infer"]["runs"]) == 1


def test_updating_keeps_the_entries_of_cases_not_run(project, run_in_process):
    run_in_process(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    run_in_process(*RUN, "--perf-update-baseline", "--perf-batch-size", "3").assert_outcomes(passed=1)
    entries = json.loads(_baseline_file(project).read_text())["entries"]
    assert sorted(entries) == ["cpu-fp32-sleeper-bs2-infer", "cpu-fp32-sleeper-bs3-infer"]


@pytest.mark.parametrize("option", ["--perf-summary-dir", "--perf-baseline-dir"])
def test_a_path_outside_the_project_given_as_a_separate_value_behaves_as_the_equals_spelling(
    project, run_in_process, tmp_path_factory, option
):
    """pytest would take the separate value for a test path and move its rootdir; the run is relaunched with
    `--option=value`, so the project's pyproject, testpaths and baselines stay."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result = run_in_process(*RUN, option, str(elsewhere), "--perf-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rootdir: {project.path}*"])
    if option == "--perf-summary-dir":
        assert (elsewhere / "summary.json").is_file() and list(project.path.glob(BASELINE_GLOB))
    else:
        assert list(elsewhere.glob("cpu/*.json")) and not list(project.path.glob(BASELINE_GLOB))


def test_pytest_main_called_from_a_program_with_a_separate_path_value_keeps_the_project(project, tmp_path_factory):
    """The session runs again as `--option=value` in the same process, so a program calling pytest.main gets it too
    (its command line is not pytest's to repeat)."""
    import sys

    elsewhere = tmp_path_factory.mktemp("program-summary")
    args = [*RUN, "--perf-summary-dir", str(elsewhere), "--perf-update-baseline", "-p", "no:cacheprovider"]
    result = project.run(sys.executable, "-c", f"import sys, pytest; sys.exit(pytest.main({args!r}))")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"rootdir: {project.path}*", "*1 passed*"])
    assert (elsewhere / "summary.json").is_file() and list(project.path.glob(BASELINE_GLOB))


def test_a_summary_folder_outside_the_project_written_with_equals_keeps_the_gate_and_its_baselines(
    project, run_in_process, tmp_path_factory, monkeypatch
):
    elsewhere = tmp_path_factory.mktemp("ci-summary")
    monkeypatch.setenv("SLEEP_S", "0.002")
    run_in_process(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("SLEEP_S", "0.006")
    slower = run_in_process(*RUN, f"--perf-summary-dir={elsewhere}")
    slower.assert_outcomes(failed=1)
    summary = json.loads((elsewhere / "summary.json").read_text())
    assert [v["status"] for v in summary["verdicts"]] == ["regressed"]
