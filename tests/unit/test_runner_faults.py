"""A training step whose loss is NaN or infinite fails its case, naming the step and the value; it is never timed."""

from __future__ import annotations

import math

import pytest
import torch

from perfsuite import workloads
from perfsuite.records import Case
from perfsuite.run import runner
from perfsuite.run.worker import standalone_benchmark


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_non_finite_training_loss_fails_the_case_naming_the_step_and_value(monkeypatch, bad):
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads._REGISTRY))  # the workload leaves with the test
    workloads.register_workload(workloads.Workload(
        name="diverging", build_module=lambda profile: torch.nn.Linear(4, 2),
        make_inputs=lambda profile, batch_size: torch.randn(batch_size, 4),
        make_target=lambda profile, batch_size: torch.zeros(batch_size, 2),
        loss=lambda output, target: (output - target).pow(2).mean() * bad,
        batch_sizes={"smoke": (2,)},
    ))
    benchmark = standalone_benchmark("diverging", max_time_s=0.01)
    case = Case("cpu", "fp32", "diverging", 2, "train", "smoke")
    with pytest.raises(runner.NonFiniteLoss, match=rf"warm-up step 1 returned the loss {bad}"):
        runner.run_case(benchmark, case, warmup_steps=2)
    assert getattr(benchmark, "stats", None) is None, "a diverging case was timed"
