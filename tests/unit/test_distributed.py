"""train-ddp: how many processes, when it is skipped, scaling efficiency, and DDP runs of two processes.

The runs use gloo on the CPU by default; PERFSUITE_DDP_TEST_DEVICE=cuda runs the same specifications with
nccl on two GPUs.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from perfsuite.errors import UsageError
from perfsuite.matrix.cases import Case, DeviceFacts, skip_reason
from perfsuite.options.settings import RawSettings, validate_settings
from perfsuite.run.ddp.plan import scaling_efficiency, scaling_table, threads_per_process
from perfsuite.run.ddp.rank0 import DdpTraining, DistributedWorkerError, prepare_ddp_case
from perfsuite.run.devices import backend, with_device_rules
from perfsuite.workloads import Workload, model_facts

DEVICE = os.environ.get("PERFSUITE_DDP_TEST_DEVICE", "cpu")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_model"


def _build_mlp(profile: str) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _inputs(profile: str, batch_size: int) -> torch.Tensor:
    return torch.randn(batch_size, 16)


def _labels(profile: str, batch_size: int) -> torch.Tensor:
    return torch.randint(0, 4, (batch_size,))


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


def _loss_failing_on_rank_1(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if dist.get_rank() == 1:
        raise RuntimeError("boom on rank 1")
    return _cross_entropy(logits, labels)


def _build_failing_on_workers(profile: str) -> torch.nn.Module:
    if os.environ.get("RANK", "0") != "0":
        raise ValueError("no module on a worker")
    return _build_mlp(profile)


# Not registered, so the registry other tests see is unchanged; workers find them among this module's globals.
SMALL_MLP = Workload("ddp-test-mlp", _build_mlp, _inputs, {"smoke": (8,)}, _labels, _cross_entropy)
FAILS_IN_STEP_ON_RANK_1 = Workload(
    "ddp-test-step-fails", _build_mlp, _inputs, {"smoke": (8,)}, _labels, _loss_failing_on_rank_1
)
FAILS_TO_BUILD_ON_WORKERS = Workload(
    "ddp-test-build-fails", _build_failing_on_workers, _inputs, {"smoke": (8,)}, _labels, _cross_entropy
)


def _case(workload: Workload) -> Case:
    return Case(DEVICE, "fp32", workload.name, 8, "train-ddp", "smoke")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# How many processes.


def test_default_processes_are_one_per_cuda_gpu():
    assert backend("cuda").ddp_default_processes(8) == 8


def test_default_processes_on_one_cuda_gpu_are_one():
    assert backend("cuda").ddp_default_processes(1) == 1


def test_default_processes_on_cpu_are_two():
    assert backend("cpu").ddp_default_processes(1) == 2


def ddp_skip_reason(device: str, configured: int | None, visible: int) -> str | None:
    facts = with_device_rules(DeviceFacts({}, (2, 13), device_counts={device: visible}, ddp_processes=configured))
    return skip_reason(Case(device, "fp32", "resnet18", 8, "train-ddp", "smoke"), model_facts()["resnet18"], facts)


def test_configured_processes_override_the_default():
    assert ddp_skip_reason("cuda", 4, 8) is None
    assert "4 CUDA GPUs" in (ddp_skip_reason("cuda", 4, 2) or "")


def test_unset_configured_processes_give_the_default():
    assert ddp_skip_reason("cuda", None, 8) is None


@pytest.mark.parametrize("configured", ["0", "-2", "two", "1.5"])
def test_configured_processes_must_be_a_positive_integer(configured):
    with pytest.raises(UsageError, match=r"--perf-ddp-processes: .* (is not a whole number|is too small)"):
        validate_settings(RawSettings(ddp_processes=configured), {}, ["resnet18"], ["cpu"])


# When a case is skipped.


def test_mps_is_skipped_for_want_of_devices_and_backend():
    assert ddp_skip_reason("mps", 2, 1) == backend("mps").ddp_unsupported


def test_cuda_with_fewer_gpus_than_processes_is_skipped_naming_both_counts():
    reason = ddp_skip_reason("cuda", 4, 2)
    assert reason is not None and "4 CUDA GPUs" in reason and "2 are visible" in reason


def test_cuda_with_a_gpu_per_process_runs():
    assert ddp_skip_reason("cuda", 2, 2) is None


def test_cpu_runs_any_number_of_processes():
    assert ddp_skip_reason("cpu", 4, 1) is None


def test_cuda_uses_nccl_and_cpu_uses_gloo():
    assert (backend("cuda").ddp_backend, backend("cpu").ddp_backend) == ("nccl", "gloo")


def test_cpu_threads_are_shared_between_processes():
    assert threads_per_process(16, 4) == 4


def test_every_process_gets_at_least_one_thread():
    assert threads_per_process(2, 4) == 1


# Scaling efficiency.


def test_scaling_efficiency_is_throughput_over_n_times_one_process():
    assert scaling_efficiency(300.0, 100.0, 4) == pytest.approx(0.75)


def _result(mode: str, samples_per_s: float | None, batch_size: int = 8, **extra) -> dict:
    return {"device": "cuda", "dtype": "bf16", "model": "resnet18", "batch_size": batch_size, "profile": "standard",
            "mode": mode, "samples_per_s": samples_per_s, **extra}


def test_scaling_table_pairs_each_ddp_result_with_the_train_result_of_its_config():
    table = scaling_table([
        _result("train", 100.0),
        _result("train", 150.0, batch_size=16),
        _result("infer", 900.0),
        _result("train-ddp", 360.0, processes=4),
    ])
    assert table[["batch_size", "processes", "samples_per_s_1", "speedup", "scaling_efficiency"]].to_dict("records") \
        == [{"batch_size": 8, "processes": 4, "samples_per_s_1": 100.0, "speedup": 3.6, "scaling_efficiency": 0.9}]


def test_scaling_table_leaves_efficiency_empty_without_a_train_result():
    table = scaling_table([_result("train-ddp", 360.0, processes=4)])
    assert math.isnan(table.loc[0, "scaling_efficiency"])


def test_scaling_table_refuses_two_train_results_for_one_config():
    with pytest.raises(ValueError, match="two train results for cuda/bf16/resnet18/8/standard"):
        scaling_table([_result("train", 100.0), _result("train", 101.0)])


# DDP runs: two processes, this one rank 0.


@pytest.fixture(scope="class")
def running():
    training = DdpTraining.start(_case(SMALL_MLP), SMALL_MLP, 2)
    yield training
    training.close()


@pytest.mark.slow  # starts rank processes
class TestARunningCase:
    def test_step_returns_a_finite_loss(self, running):
        assert torch.isfinite(running.as_prepared_case().run_step()).item()

    def test_ranks_hold_identical_parameters_after_steps(self, running):
        # Each rank trains on its own batch, so without DDP's gradient averaging their weights would differ.
        before = running.parameter_checksums()
        for _ in range(3):
            running.step()
        after = running.parameter_checksums()
        assert after[0] != before[0] and after[1] == after[0]

    def test_a_step_counts_the_samples_of_every_process(self, running):
        assert running.as_prepared_case().samples == 16

    def test_facts_name_processes_backend_and_global_batch_size(self, running):
        facts = running.as_prepared_case().extra_facts
        expected = (2, backend(DEVICE).ddp_backend, 16)
        assert (facts["processes"], facts["backend"], facts["global_batch_size"]) == expected

    def test_the_rendezvous_store_listens_on_loopback_only(self, running):
        # The store is unauthenticated: listening on every interface would let any host join or disturb the ranks.
        listening = [
            connection.laddr.ip for connection in psutil.Process().net_connections(kind="inet")
            if connection.status == psutil.CONN_LISTEN and connection.laddr.port == running.store_port
        ]
        assert listening == ["127.0.0.1"]


@pytest.mark.slow  # starts rank processes
def test_config_digest_tells_process_counts_apart():
    digests = []
    for processes in (1, 2):
        training = DdpTraining.start(_case(SMALL_MLP), SMALL_MLP, processes)
        digests.append(training.config_digest)
        training.close()
    assert digests[0] != digests[1]


@pytest.mark.slow  # starts rank processes
def test_close_leaves_this_process_as_it_found_it(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)  # four threads to share: each rank gets two
    set_threads = []
    monkeypatch.setattr(torch, "set_num_threads", set_threads.append)
    training = DdpTraining.start(_case(SMALL_MLP), SMALL_MLP, 2)
    training.step()
    pids = training.worker_pids
    training.close()
    alive = [pid for pid in pids if _alive(pid)]
    threads_restored = [4] if DEVICE == "cpu" else []  # threads are shared out on the CPU only
    assert (alive, dist.is_initialized(), set_threads[-1:]) == ([], False, threads_restored)


@pytest.mark.slow  # starts rank processes
def test_a_worker_failing_in_a_step_raises_in_rank_0_naming_rank_and_error_before_the_timeout():
    training = DdpTraining.start(_case(FAILS_IN_STEP_ON_RANK_1), FAILS_IN_STEP_ON_RANK_1, 2, timeout_s=60.0)
    started = time.monotonic()
    try:
        with pytest.raises(DistributedWorkerError, match="rank 1 of 2 failed in a training step: RuntimeError: boom"):
            training.step()
        assert time.monotonic() - started < 30.0
    finally:
        training.close()


@pytest.mark.slow  # starts rank processes
def test_a_worker_failing_to_start_raises_naming_rank_and_error():
    with pytest.raises(DistributedWorkerError, match="rank 1 of 2 failed while starting: ValueError: no module"):
        DdpTraining.start(_case(FAILS_TO_BUILD_ON_WORKERS), FAILS_TO_BUILD_ON_WORKERS, 2, timeout_s=60.0)


def test_a_worker_out_of_memory_counts_as_out_of_memory():
    error = DistributedWorkerError("cuda-fp32-m-bs8-train-ddp: train-ddp rank 1 of 2 failed in a training step: "
                                   "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert backend("cpu").is_out_of_memory(error)


def test_mps_case_raises_the_skip_reason():
    with pytest.raises(ValueError, match="mps-fp32-ddp-test-mlp-bs8-train-ddp-smoke cannot run: one device"):
        prepare_ddp_case(Case("mps", "fp32", "ddp-test-mlp", 8, "train-ddp", "smoke"), SMALL_MLP)


def test_train_ddp_through_pytest_records_processes_and_throughput(pytester, monkeypatch):
    for name in ("conftest.py", "test_benchmarks.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    monkeypatch.setenv("PERFSUITE_DDP_PROCESSES", "2")
    result = pytester.runpytest_subprocess(
        "--benchmark-only", "--perf-profile", "smoke", "--perf-device", DEVICE, "--perf-mode", "train-ddp",
        "--perf-dtype", "fp32", "--perf-model", "tiny-mlp", "--benchmark-max-time", "0.2",
        "--benchmark-json", "out.json",
    )
    result.assert_outcomes(passed=1)
    extra_info = json.loads((pytester.path / "out.json").read_text())["benchmarks"][0]["extra_info"]
    assert extra_info["processes"] == 2 and extra_info["samples_per_s"] > 0


@pytest.mark.slow  # starts rank processes
def test_a_worker_whose_parent_is_killed_ends_itself(tmp_path):
    # A parent starts a child that watches it (as perfsuite's workers do), then is killed; the child must follow.
    import signal
    import subprocess
    import sys

    marker = tmp_path / "child.pid"
    child = tmp_path / "child.py"
    child.write_text(
        "import os, time\nfrom perfsuite.run.lifetime import watch_parent\nwatch_parent()\n"
        f"open({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\n"
         "time.sleep(60)\n"]
    )
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.1)
    child_pid = int(marker.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(child_pid, signal.SIGKILL)
    raise AssertionError("the child outlived its killed parent by 10 s")
