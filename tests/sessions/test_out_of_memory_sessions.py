"""Out of memory ends a batch-size sweep as a skip, not a crash.

The in-process tests of this subject: tests/quick/test_out_of_memory.py."""


import pytest
import torch

pytestmark = pytest.mark.slow

PLANTED = '''
import torch
from perfsuite import Workload, register_workload
class FailsFromBatchFour(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        if x.shape[0] >= 4:
            raise RuntimeError("MPS backend out of memory (MPS allocated: 9.00 GB, other allocations: 0 bytes)")
        return self.linear(x)


register_workload(Workload(
    name="planted-oom",
    build_module=lambda profile: FailsFromBatchFour(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 8),
    batch_sizes={"smoke": (2, 4, 8), "standard": (2, 4, 8)},
))
'''


def test_planted_out_of_memory_skips_the_rest_of_the_sweep_and_the_session_goes_on(pytester, run_in_process):
    pytester.makeconftest(PLANTED)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    result = run_in_process(
        "--benchmark-only", "--perf-device", "cpu", "--perf-dtype", "fp32", "--perf-model", "planted-oom",
        "--perf-profile", "standard", "--benchmark-max-time", "0.05", "-rs",
    )
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "SKIPPED*cpu-fp32-planted-oom-bs4-infer: out of memory at batch size 4 (MPS backend out of memory*",
        "SKIPPED*batch size 8 not tried: batch size 4 ran out of memory on cpu*",
    ])


def test_cuda_out_of_memory_under_a_memory_fraction_is_a_skip(pytester):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA to force a real out-of-memory error")
    pytester.makeconftest(
        "import torch\n"
        "torch.cuda.set_per_process_memory_fraction(0.002)\n"  # ~280 MB of an H200
    )
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--perf-device", "cuda", "--perf-dtype", "fp32", "--perf-model", "resnet18",
        "--perf-mode", "train", "--perf-batch-size", "1,1024", "--benchmark-max-time", "0.1", "-rs",
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*cuda-fp32-resnet18-bs1024-train: out of memory at batch size 1024*"])
