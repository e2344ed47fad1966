"""No silent pass: a case whose model changed against its history fails the gate by default, naming what changed and
the two ways on; `on-change = "warn"` (or `--perf-on-change warn`) downgrades it to a warning."""

import pytest

pytestmark = pytest.mark.slow

WIDENABLE = '''
import os

import torch
from perfsuite import Workload, register_workload

register_workload(Workload(
    name="widenable",
    build_module=lambda profile: torch.nn.Linear(4, int(os.environ.get("WIDTH", "8"))),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4),
    batch_sizes={"smoke": (2,), "standard": (2,)},
))
'''
RUN = ("--benchmark-only", "--perf-device", "cpu", "--perf-dtype", "fp32", "--perf-model", "widenable",
       "--benchmark-min-rounds", "3", "--benchmark-max-time", "0.01", "--perf-warmup", "1")


@pytest.fixture
def recorded(pytester, run_in_process, monkeypatch):
    pytester.makeconftest(WIDENABLE)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    monkeypatch.setenv("WIDTH", "8")
    run_in_process(*RUN, "--perf-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("WIDTH", "16")
    return pytester


def test_a_widened_layer_fails_the_gate_naming_what_changed_and_the_ways_on(recorded, run_in_process):
    result = run_in_process(*RUN)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "cpu-fp32-widenable-bs2-infer-smoke changed against its history" in output
    assert "parameter_count: baseline 40, current 80" in output
    assert "--perf-rebaseline" in output and "--perf-ab merge-base" in output


def test_on_change_warn_in_pyproject_passes_the_changed_case_with_the_warning(recorded, run_in_process):
    recorded.makepyprojecttoml('[tool.perfsuite]\non-change = "warn"\n')
    result = run_in_process(*RUN)
    result.assert_outcomes(passed=1)
    assert "a warning (--perf-on-change warn)" in result.stdout.str()


def test_rebaseline_starts_the_history_over_and_the_next_run_is_judged(recorded, run_in_process):
    run_in_process(*RUN, "--perf-rebaseline").assert_outcomes(passed=1)
    run_in_process(*RUN).assert_outcomes(passed=1)
