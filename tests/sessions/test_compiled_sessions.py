"""The compile dimension: ids, the matrix, skip reasons, the baseline field, the check against eager and Dynamo's
counters; and one compiled smoke case run as a user would.

The in-process tests of this subject: tests/quick/test_compiled.py."""

from __future__ import annotations

import json

import pytest

from perfsuite.run import compiled

pytestmark = pytest.mark.slow


def test_a_compiled_resnet18_smoke_case_runs_with_its_compile_time_and_check(
    _torch_inductor_imported, pytester, run_in_process
):
    """The CPU inductor path end to end (about a minute here, most of it compiling)."""
    pytester.makepyfile(test_bench="def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    result = run_in_process(
        "--benchmark-only", "--perf-device", "cpu", "--perf-profile", "smoke", "--perf-model", "resnet18",
        "--perf-dtype", "fp32", "--perf-mode", "infer", "--perf-compile", "inductor", "--benchmark-max-time", "0.1",
        "--benchmark-json", "out.json", "-p", "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    (benchmark,) = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    info = benchmark["extra_info"]
    assert info["compile"] == "inductor" and benchmark["name"].endswith("cpu-fp32-resnet18-bs4-infer-inductor-smoke]")
    assert info["compile_first_call_s"] > 0 and info["compile_frames"] >= 1 and info["compile_warmup_frames"] == 0
    assert 0 <= info["compile_check_largest_difference"] <= compiled.COMPILED_TOLERANCE["fp32"]
    assert info["flops_per_step"] > 0


RETURNS_NONE = """
import torch
from perfsuite import Workload, register_workload


class ReturnsNothing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.linear(x)


register_workload(Workload(
    name="returns-none", build_module=lambda profile: ReturnsNothing(),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4), batch_sizes={"standard": (2,)},
))
"""


def test_a_model_whose_forward_returns_none_fails_under_inductor_naming_the_case_and_what_to_do(
    _torch_inductor_imported, pytester, run_in_process
):
    pytester.makeconftest(RETURNS_NONE)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    result = run_in_process(
        "--benchmark-only", "--perf-device", "cpu", "--perf-profile", "standard", "--perf-model", "returns-none",
        "--perf-dtype", "fp32", "--perf-compile", "inductor", "--benchmark-max-time", "0.02", "-p", "no:cacheprovider",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*cpu-fp32-returns-none-bs2-infer-inductor: the model's forward returned no tensor*return the output from "
        "forward*--perf-compile eager*",
    ])
    assert "differs from eager by inf" not in result.stdout.str()
