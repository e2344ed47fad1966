"""The in-process tests of this subject: tests/quick/test_workloads.py."""

import pytest
import torch

from perfsuite.matrix.cases import Case
from perfsuite.run.steps import prepare_case
from perfsuite.workloads import registered_workloads
from tests.quick.test_workloads import BUILTIN

pytestmark = pytest.mark.slow

SMOKE_CASES = [
    Case("cpu", "fp32", name, registered_workloads()[name].batch_sizes_for("smoke")[0], mode, "smoke")
    for name in BUILTIN
    for mode in registered_workloads()[name].modes
    if mode != "train-ddp"  # tests/quick/test_distributed.py covers it
]


@pytest.mark.slow  # builds and steps every built-in model, Stable Diffusion's included
@pytest.mark.parametrize("case", SMOKE_CASES, ids=lambda c: c.benchmark_id)
def test_workload_runs_one_step_with_a_finite_result(case):
    prepared = prepare_case(case, registered_workloads()[case.model])
    result = prepared.run_step()
    assert torch.isfinite(result).all()
    if case.mode == "train":
        assert result.dim() == 0, "a train step returns its scalar loss"
