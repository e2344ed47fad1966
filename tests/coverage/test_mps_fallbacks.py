"""Operator coverage of every registered workload: no op outside the reviewed allowlist
(baselines/mps-fallback-allowlist.json) may fall back to the CPU on MPS.

The static check traces each model's smoke profile (same architecture, same ops) on the CPU and runs
everywhere; the runtime check runs the model on MPS and runs only where MPS is available.
"""

from pathlib import Path

import pytest

from perfsuite.coverage.allowlist import describe_fallback, load_allowlist
from perfsuite.coverage.check import describe_runtime_finding, runtime_check, static_check
from perfsuite.coverage.runtime import mps_unavailable_reason
from perfsuite.workloads import registered_workloads

ALLOWLIST_PATH = Path(__file__).parents[2] / "baselines" / "mps-fallback-allowlist.json"
WORKLOADS = registered_workloads()
NO_MPS = mps_unavailable_reason()


@pytest.fixture(scope="module")
def allowlist():
    return load_allowlist(ALLOWLIST_PATH, required=True)


@pytest.mark.slow  # traces every built-in model's steps
@pytest.mark.parametrize("model", list(WORKLOADS))
def test_no_op_outside_the_allowlist_would_fall_back_on_mps(model, allowlist):
    report = static_check(WORKLOADS[model], allowlist)
    assert not report.unexpected, "\n".join(describe_fallback(model, u, ALLOWLIST_PATH) for u in report.unexpected)


@pytest.mark.slow  # runs every built-in model on MPS
@pytest.mark.skipif(NO_MPS is not None, reason=f"runtime check needs MPS: {NO_MPS}")
@pytest.mark.parametrize("model", list(WORKLOADS))
def test_no_op_outside_the_allowlist_falls_back_when_run_on_mps(model, allowlist):
    workload = WORKLOADS[model]
    report = runtime_check(static_check(workload, allowlist), workload, allowlist, "smoke", workload.modes)
    assert report.runtime.error is None, report.runtime.error
    unexpected = [f for f in report.runtime.findings if f.op in report.runtime_unexpected]
    assert not unexpected, "\n".join(describe_runtime_finding(model, f) for f in unexpected)


def test_a_model_using_a_known_fallback_op_is_caught_with_its_phases_and_calls(allowlist, planted_fallback):
    report = static_check(planted_fallback, allowlist)
    assert [(u.op, u.calls_by_phase) for u in report.unexpected] == [
        ("aten::embedding_renorm_", (("infer/forward", 1), ("train/forward", 1)))]


def test_the_failure_names_the_op_the_model_and_the_phases(allowlist, planted_fallback):
    (usage,) = static_check(planted_fallback, allowlist).unexpected
    assert describe_fallback(planted_fallback.name, usage).startswith(
        "aten::embedding_renorm_ would fall back to the CPU on MPS in model planted-fallback: "
        "infer/forward 1 call, train/forward 1 call")


@pytest.mark.skipif(NO_MPS is not None, reason=f"runtime check needs MPS: {NO_MPS}")
def test_the_runtime_check_sees_the_planted_fallback_on_mps(allowlist, planted_fallback):
    static = static_check(planted_fallback, allowlist)
    report = runtime_check(static, planted_fallback, allowlist, "smoke", planted_fallback.modes)
    assert "aten::embedding_renorm_" in report.runtime_unexpected
