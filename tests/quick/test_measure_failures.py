"""What goes wrong while a case is measured becomes a failure of that case, never an exception: a NaN or infinite
training loss (never timed), and memory that grows across the rounds is reported."""

from __future__ import annotations

import math

import pytest
import torch

from perfsuite import workloads
from perfsuite.records import Case, Failure, Run
from perfsuite.run import measure
from perfsuite.run.plan import MeasureSettings, RoundSettings
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
    rounds = RoundSettings(max_time_s=0.01)
    benchmark = standalone_benchmark("diverging", rounds)
    case = Case("cpu", "fp32", "diverging", 2, "train", "smoke")
    outcome = measure.measure(case, MeasureSettings(warmup_steps=2), rounds, benchmark)
    assert isinstance(outcome, Failure) and outcome.kind == "non-finite-loss"
    assert outcome.message.startswith(f"{case.benchmark_id}: warm-up step 1 returned the loss {bad}")
    assert getattr(benchmark, "stats", None) is None, "a diverging case was timed"


def test_a_step_that_raises_is_a_failure_naming_the_case_the_error_and_its_traceback(monkeypatch):
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads._REGISTRY))

    def broken(profile: str) -> torch.nn.Module:
        raise ValueError("no such layer")

    workloads.register_workload(workloads.Workload(
        name="broken", build_module=broken, make_inputs=lambda profile, batch_size: torch.randn(batch_size, 4),
        batch_sizes={"smoke": (2,)},
    ))
    case = Case("cpu", "fp32", "broken", 2, "infer", "smoke")
    outcome = measure.measure(case, MeasureSettings(warmup_steps=1), RoundSettings(), standalone_benchmark("broken"))
    assert isinstance(outcome, Failure) and outcome.kind == "error" and not outcome.skips
    assert outcome.message == f"{case.benchmark_id}: the step raised ValueError: no such layer"
    assert "in broken" in outcome.details and "ValueError: no such layer" in outcome.details


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
    rounds = RoundSettings(min_rounds=30, max_time_s=0.01)
    benchmark = standalone_benchmark("hoarder", rounds)
    run = measure.measure(Case("cpu", "fp32", "hoarder", 2, "infer", "smoke"), MeasureSettings(1), rounds, benchmark)
    assert isinstance(run, Run) and run.rounds >= 30
    growth = run.facts["memory_growth_bytes"]
    if leaks:
        assert growth >= 30 * 2 * 2**20 * 0.9
        with pytest.warns(measure.MemoryGrowthWarning, match=r"hoarder.*grew by .* MiB over \d+ timed rounds"):
            assert measure.warn_of_memory_growth(run)
    else:
        assert growth < measure.MEMORY_GROWTH_WARNING_BYTES and not measure.warn_of_memory_growth(run)
