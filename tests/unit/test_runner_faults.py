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


class _Hoarder(torch.nn.Module):
    """A model whose forward keeps 2 MiB alive every step, as a step that stores its outputs does."""

    def __init__(self, kept: list) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.kept = kept

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        self.kept.append(torch.ones(512 * 1024))
        return self.linear(inputs)


@pytest.mark.parametrize("leaks", [True, False], ids=["leaking", "steady"])
def test_memory_that_grows_across_the_timed_rounds_is_reported(monkeypatch, leaks):
    kept: list = []
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads._REGISTRY))
    workloads.register_workload(workloads.Workload(
        name="hoarder", build_module=lambda profile: _Hoarder(kept) if leaks else torch.nn.Linear(4, 2),
        make_inputs=lambda profile, batch_size: torch.randn(batch_size, 4), batch_sizes={"smoke": (2,)},
    ))
    benchmark = standalone_benchmark("hoarder", min_rounds=30, max_time_s=0.01)
    run = runner.run_case(benchmark, Case("cpu", "fp32", "hoarder", 2, "infer", "smoke"), warmup_steps=1)
    assert run is not None and run.rounds >= 30
    growth = run.facts["memory_growth_bytes"]
    if leaks:
        assert growth >= 30 * 2 * 2**20 * 0.9
        with pytest.warns(runner.MemoryGrowthWarning, match=r"hoarder.*grew by .* MiB over \d+ timed rounds"):
            assert runner.warn_of_memory_growth(run)
    else:
        assert growth < runner.MEMORY_GROWTH_WARNING_BYTES and not runner.warn_of_memory_growth(run)
