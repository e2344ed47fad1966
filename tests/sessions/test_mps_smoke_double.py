"""A slice of the smoke matrix on `--perf-device mps`, in a pytest process of its own (a subprocess rather than
pytester's in-process run, so the double's patches end with it) where a test double stands in for torch's
MPS bindings (tests/mps_double): skips, events, memory figures and autocast go through the MPS code paths.

This checks plumbing, not Metal: the steps run on the CPU, and no time or memory figure here is an MPS one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
MODELS_TEST = TESTS / "benchmarks" / "test_models.py"

CONFTEST_WITH_THE_DOUBLE = f"""
import json
import sys
from collections import Counter

sys.path.insert(0, {str(TESTS)!r})
from mps_double import MpsDouble

double = MpsDouble()
double.install(setattr)  # this pytest process is the test's own: nothing to restore
double.allocate(64 * 2**20)
tensors_on_cpu = double.tensors_on_cpu()
tensors_on_cpu.__enter__()


def pytest_sessionfinish(session):
    report = {{"calls": Counter(double.calls), "mps_tensor_requests": double.mps_tensor_requests,
              "autocast_dtypes": sorted({{str(d) for d in double.autocast_dtypes}})}}
    (session.config.rootpath / "double.json").write_text(json.dumps(report))
"""


@pytest.fixture(scope="module")
def smoke_result(tmp_path_factory):
    """One run of a slice of the smoke matrix on the doubled MPS (resnet18, bert-base and sd15-unet; train, infer and
    train-channels-last; fp32 and fp16), shared by the tests below: the finished process, the benchmarks by
    id, and what the double recorded."""
    project = tmp_path_factory.mktemp("mps-smoke")
    (project / "conftest.py").write_text(CONFTEST_WITH_THE_DOUBLE)
    (project / "test_models.py").write_text(MODELS_TEST.read_text())
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only", "--perf-device", "mps",
        "--perf-profile", "smoke", "--perf-model", "resnet18,bert-base,sd15-unet", "--perf-mode",
        "train,infer,train-channels-last", "--perf-dtype", "fp32,fp16", "--perf-warmup", "1",
        "--benchmark-max-time", "0.01", "--benchmark-min-rounds", "1", "--benchmark-json", "out.json", "-rs",
    ]
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=900)
    benchmarks = json.loads((project / "out.json").read_text())["benchmarks"]
    double = json.loads((project / "double.json").read_text())
    return done, {b["param"]: b for b in benchmarks}, double


def test_the_mps_smoke_slice_passes_under_the_double(smoke_result):
    done, _, _ = smoke_result
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_every_runnable_case_was_timed(smoke_result):
    _, benchmarks, _ = smoke_result
    assert sorted(benchmarks) == sorted([
        "mps-fp32-resnet18-bs4-train-smoke", "mps-fp32-resnet18-bs4-infer-smoke",
        "mps-fp16-resnet18-bs4-infer-smoke",
        "mps-fp32-bert-base-bs2-train-smoke", "mps-fp16-bert-base-bs2-train-smoke",
        "mps-fp32-bert-base-bs2-infer-smoke", "mps-fp16-bert-base-bs2-infer-smoke",
        "mps-fp32-sd15-unet-bs1-train-smoke", "mps-fp32-sd15-unet-bs1-infer-smoke",
        "mps-fp16-sd15-unet-bs1-infer-smoke", "mps-fp32-sd15-unet-bs1-train-channels-last-smoke",
    ])


def test_the_channels_last_training_step_is_checked_against_the_contiguous_layout_before_it_is_timed(smoke_result):
    _, benchmarks, _ = smoke_result
    checked = {name for name, b in benchmarks.items() if b["extra_info"].get("channels_last_gradients_checked")}
    assert checked == {"mps-fp32-sd15-unet-bs1-train-channels-last-smoke"}


def test_resnet18_channels_last_training_and_fp16_training_are_skipped_with_their_issues(smoke_result):
    done, _, _ = smoke_result
    assert "pytorch/pytorch#175189" in done.stdout and "pytorch/pytorch#119108" in done.stdout


def test_every_case_records_event_times_and_the_mps_peak(smoke_result):
    _, benchmarks, _ = smoke_result
    for info in (b["extra_info"] for b in benchmarks.values()):
        assert info["memory_figure"] == "mps_max_allocated_bytes" and info["memory_bytes"] == 64 * 2**20
        assert info["event_median_s"] > 0


def test_the_run_went_through_the_mps_bindings(smoke_result):
    _, benchmarks, double = smoke_result
    calls = double["calls"]
    assert calls["elapsedTimeOfEvents"] == 5 * len(benchmarks)
    assert calls.get("synchronizeEvent", 0) == 0 and calls["resetPeakStats"] == len(benchmarks)
    assert double["mps_tensor_requests"] > 0 and double["autocast_dtypes"] == ["torch.float16"]
