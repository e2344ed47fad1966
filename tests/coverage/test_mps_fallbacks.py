"""Operator coverage of every registered workload: no op outside the reviewed allowlist
(baselines/mps-fallback-allowlist.json) may fall back to the CPU on MPS.

The static check traces each model's smoke profile (same architecture, same ops) on the CPU and runs
everywhere; the runtime check runs the model on MPS and runs only where MPS is available.
"""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from perfsuite import Workload
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


@pytest.mark.parametrize("model", list(WORKLOADS))
def test_no_op_outside_the_allowlist_would_fall_back_on_mps(model, allowlist):
    report = static_check(WORKLOADS[model], allowlist)
    assert not report.unexpected, "\n".join(describe_fallback(model, u, ALLOWLIST_PATH) for u in report.unexpected)


@pytest.mark.skipif(NO_MPS is not None, reason=f"runtime check needs MPS: {NO_MPS}")
@pytest.mark.parametrize("model", list(WORKLOADS))
def test_no_op_outside_the_allowlist_falls_back_when_run_on_mps(model, allowlist):
    workload = WORKLOADS[model]
    report = runtime_check(static_check(workload, allowlist), workload, allowlist, "smoke", workload.modes)
    assert report.runtime.error is None, report.runtime.error
    unexpected = [f for f in report.runtime.findings if f.op in report.runtime_unexpected]
    assert not unexpected, "\n".join(describe_runtime_finding(model, f) for f in unexpected)


class EmbeddingWithMaxNorm(torch.nn.Module):
    """nn.Embedding(max_norm=...) renormalises its rows with aten::embedding_renorm_, an op that
    MPSFallback.mm sends to the CPU in every checked torch release."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 8, max_norm=1.0)

    def forward(self, token_ids):
        return self.embedding(token_ids).mean(dim=1)


PLANTED = Workload(
    name="planted-fallback", build_module=lambda profile: EmbeddingWithMaxNorm(), batch_sizes={"smoke": (2,)},
    make_inputs=lambda profile, batch_size: torch.randint(0, 50, (batch_size, 5)),
    make_target=lambda profile, batch_size: torch.randn(batch_size, 8),
    loss=lambda output, target: F.mse_loss(output, target),
)


def test_a_model_using_a_known_fallback_op_is_caught_with_its_phases_and_calls(allowlist):
    report = static_check(PLANTED, allowlist)
    assert [(u.op, u.calls_by_phase) for u in report.unexpected] == [
        ("aten::embedding_renorm_", (("infer/forward", 1), ("train/forward", 1)))]


def test_the_failure_names_the_op_the_model_and_the_phases(allowlist):
    (usage,) = static_check(PLANTED, allowlist).unexpected
    assert describe_fallback(PLANTED.name, usage).startswith(
        "aten::embedding_renorm_ would fall back to the CPU on MPS in model planted-fallback: "
        "infer/forward 1 call, train/forward 1 call")


@pytest.mark.skipif(NO_MPS is not None, reason=f"runtime check needs MPS: {NO_MPS}")
def test_the_runtime_check_sees_the_planted_fallback_on_mps(allowlist):
    report = runtime_check(static_check(PLANTED, allowlist), PLANTED, allowlist, "smoke", PLANTED.modes)
    assert "aten::embedding_renorm_" in report.runtime_unexpected
