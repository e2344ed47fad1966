"""One bad step gives the same status and message whether the pytest process measures it or K worker processes do:
a NaN loss, a wrong result, an out-of-memory and a step that raises, each run through pytest as a user would."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from perfsuite.run.devices import backend

pytestmark = pytest.mark.slow

BAD_MODELS = '''
import torch
import torch.nn.functional as F

from perfsuite import Workload, register_workload
from perfsuite.run.devices import backend

# The wrong-result check (channels_last gradients against the contiguous layout) runs on MPS only; here it runs on
# the CPU too, in the pytest process and in every worker (each imports this file to find the models).
backend("cpu").checks_channels_last_gradients = True


class NaNLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x) * float("nan")


class LayoutDependent(torch.nn.Module):
    """Scales its output by 2 when its input is channels_last: its gradients differ between the layouts."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        scale = 2.0 if x.is_contiguous(memory_format=torch.channels_last) else 1.0
        return self.conv(x).mean(dim=(2, 3)) * scale


class OutOfMemory(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("MPS backend out of memory (MPS allocated: 9.00 GB, other allocations: 0 bytes)")


class Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("this layer is broken")


def images(profile, batch_size):
    return torch.randn(batch_size, 3, 8, 8)


def vectors(profile, batch_size):
    return torch.randn(batch_size, 4)


def labels(profile, batch_size):
    return torch.zeros(batch_size, dtype=torch.long)


for name, module, inputs, modes in (
    ("nan-loss", NaNLoss, vectors, ("train",)),
    ("wrong-layout", LayoutDependent, images, ("train-channels-last",)),
    ("out-of-memory", OutOfMemory, vectors, ("infer",)),
    ("raises", Raises, vectors, ("infer",)),
):
    register_workload(Workload(
        name=name, build_module=lambda profile, module=module: module(), make_inputs=inputs, make_target=labels,
        loss=lambda output, target: F.cross_entropy(output, target), batch_sizes={"smoke": (2,)},
        supports_channels_last=name == "wrong-layout",
    ))
'''
CASES = {
    "nan-loss": ("cpu-fp32-nan-loss-bs2-train-smoke", "train"),
    "wrong-layout": ("cpu-fp32-wrong-layout-bs2-train-channels-last-smoke", "train-channels-last"),
    "out-of-memory": ("cpu-fp32-out-of-memory-bs2-infer-smoke", "infer"),
    "raises": ("cpu-fp32-raises-bs2-infer-smoke", "infer"),
}


def _outcome_and_message(run: Callable[..., pytest.RunResult], model: str, processes: int) -> tuple[str, str]:
    """What pytest made of the one case of `model` measured with `processes` processes: its outcome, and its message
    as the test showed it (a failed test's report; a skipped test's reason). The session runs in this process
    (`run_in_process`); with two processes the case is measured in two fresh worker processes all the same."""
    benchmark_id, mode = CASES[model]
    result = run(
        "--benchmark-only", "--perf-device", "cpu", "--perf-dtype", "fp32", "--perf-model", model, "--perf-mode",
        mode, "--perf-profile", "smoke", "--perf-warmup", "1", "--benchmark-max-time", "0.02",
        "--perf-processes", str(processes), "-rs",
    )
    outcomes = result.parseoutcomes()
    if outcomes.get("failed"):
        # The failure's report is the message alone (no traceback), its first line naming the case.
        report = [line for line in result.outlines if line.startswith(f"{benchmark_id}: ")]
        assert report, result.stdout.str()
        return "failed", report[0].removeprefix(f"{benchmark_id}: ")
    skipped = [line for line in result.outlines if line.startswith("SKIPPED") and f"{benchmark_id}: " in line]
    assert outcomes.get("skipped") and skipped, result.stdout.str()
    return "skipped", skipped[0].split(f"{benchmark_id}: ", 1)[1]


@pytest.fixture(autouse=True)
def _this_process_cpu_backend_put_back(monkeypatch):
    """BAD_MODELS makes the CPU check channels_last gradients; a run in this process would leave that set for the
    tests after it (tests/quick/test_correctness.py checks that only MPS does by default)."""
    cpu = backend("cpu")
    monkeypatch.setattr(cpu, "checks_channels_last_gradients", cpu.checks_channels_last_gradients)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(BAD_MODELS)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    return pytester


@pytest.mark.parametrize(("model", "outcome", "message"), [
    ("nan-loss", "failed", "warm-up step 1 returned the loss nan"),
    ("wrong-layout", "failed", "gradients"),
    ("out-of-memory", "skipped", "out of memory at batch size 2"),
    ("raises", "failed", "the step raised ValueError: this layer is broken"),
], ids=["nan-loss", "wrong-result", "out-of-memory", "step-raises"])
def test_a_bad_step_gives_the_same_outcome_and_message_with_one_process_or_two(
    project, run_in_process, model, outcome, message
):
    in_pytest = _outcome_and_message(run_in_process, model, processes=1)
    in_workers = _outcome_and_message(run_in_process, model, processes=2)
    assert in_pytest == in_workers
    assert in_pytest[0] == outcome and message in in_pytest[1], in_pytest
