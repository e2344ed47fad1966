"""What perfsuite promises a hostile or unlucky user, one input per test.

Read this as the list of promises: each test hands perfsuite one bad input (a file that is not a file, a file
that lies about its size, a broken baseline, an option that cannot work) and checks the promised outcome: a
message that says what was wrong, where and what to do, and what is kept (a file is never half-written, never
silently replaced, never silently ignored). The commands are called as functions where that shows the promise
(`perfsuite.cli.main([...])`); the gate runs through pytest as a user runs it, in this process (`run_in_process`)
or, where a FIFO could block it if a promise broke, in a subprocess with a timeout.
Inputs that could flood memory if a promise broke (/dev/zero) are read in a child capped at 1 GiB.

The in-process tests of this subject: tests/quick/test_promises.py."""

from __future__ import annotations

import json
import os

import pytest

from tests.quick.test_promises import fifo, kept_as_fifo

pytestmark = pytest.mark.slow


# --- the gate, as a user runs it -----------------------------------------------------------------------------

GATE_RUN = ("--benchmark-only", "--perf-device", "cpu", "--perf-dtype", "fp32", "--perf-model", "sleeper",
            "--perf-profile", "standard", "--perf-machine", "promises", "--benchmark-max-time", "0.02")
SLEEPER = """
import time

import torch
from perfsuite import Workload, register_workload


class Sleeper(torch.nn.Module):
    def forward(self, x):
        time.sleep(0.001)
        return x * 2


register_workload(Workload(
    name="sleeper", build_module=lambda profile: Sleeper(),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4), batch_sizes={"standard": (2,)},
))
register_workload(Workload(
    name="diverging", build_module=lambda profile: torch.nn.Linear(4, 2),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4),
    make_target=lambda profile, batch_size: torch.zeros(batch_size, 2),
    loss=lambda output, target: (output - target).pow(2).mean() * float("nan"), batch_sizes={"standard": (2,)},
))
"""


@pytest.fixture
def project(pytester):
    pytester.makeconftest(SLEEPER)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    return pytester


def test_the_gate_fails_the_case_of_a_fifo_baseline_at_once_writes_the_summary_and_keeps_the_fifo(project):
    path = fifo(project.path / "baselines" / "cpu" / "promises.json")
    result = project.runpytest_subprocess(*GATE_RUN, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*promises.json: is a FIFO (named pipe), not a regular file*"])
    assert "INTERNALERROR" not in result.stdout.str() and kept_as_fifo(path)
    assert json.loads((project.path / ".perfsuite" / "summary.json").read_text())["counts"]["errored"] == 1


def test_rebaseline_moves_a_truncated_baseline_aside_records_afresh_and_never_records_a_nan_loss(
    project, run_in_process
):
    path = project.path / "baselines" / "cpu" / "promises.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": "perfsuite-baseline", "entries": {', encoding="utf-8")
    result = run_in_process(
        *GATE_RUN, "--perf-model", "sleeper,diverging", "--perf-mode", "train,infer", "--perf-rebaseline",
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*diverging-bs2-train*warm-up step 1 returned the loss nan*",
        "*promises.json could not be read; it was moved aside to promises.bad-*.json*",
    ])
    (aside,) = path.parent.glob("promises.bad-*.json")
    assert aside.read_text(encoding="utf-8") == '{"schema": "perfsuite-baseline", "entries": {'
    assert sorted(json.loads(path.read_text(encoding="utf-8"))["entries"]) == [
        "cpu-fp32-diverging-bs2-infer", "cpu-fp32-sleeper-bs2-infer",
    ]


def test_a_summary_dir_that_is_a_file_stops_the_session_before_anything_is_measured(project, run_in_process):
    (project.path / "report").write_text("keep")
    result = run_in_process(*GATE_RUN, "--perf-summary-dir=report")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perf-summary-dir: 'report' is a file, not a folder*"])
    assert "perfsuite: " not in result.stdout.str() and (project.path / "report").read_text() == "keep"


def test_special_files_in_place_of_the_summary_and_results_are_refused_named_and_kept(project):
    folder = project.path / ".perfsuite"
    results = fifo(folder / "results.md")
    (folder / "summary.md").mkdir()
    (folder / "summary.json").symlink_to("/dev/null")
    result = project.runpytest_subprocess(*GATE_RUN, timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([
        f"nothing written to {folder / 'summary.json'}: is a character device (/dev/null), not a regular file*",
        f"nothing written to {folder / 'summary.md'}: is a folder, not a regular file*",
        f"nothing written to {results}: is a FIFO (named pipe), not a regular file*",
    ])
    assert kept_as_fifo(results) and (folder / "summary.md").is_dir()
    assert os.readlink(folder / "summary.json") == "/dev/null"
