"""train-ddp: how many processes, when it is skipped, scaling efficiency, and DDP runs of two processes.

The runs use gloo on the CPU by default; PERFSUITE_DDP_TEST_DEVICE=cuda runs the same specifications with
nccl on two GPUs.

The in-process tests of this subject: tests/quick/test_distributed.py."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist

from perfsuite.matrix.cases import Case
from perfsuite.run.ddp.rank0 import DdpTraining, DistributedWorkerError
from perfsuite.run.devices import backend
from perfsuite.workloads import Workload
from tests.quick.test_distributed import SMALL_MLP, _build_mlp, _cross_entropy, _inputs, _labels

pytestmark = pytest.mark.slow

DEVICE = os.environ.get("PERFSUITE_DDP_TEST_DEVICE", "cpu")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_model"


def _loss_failing_on_rank_1(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if dist.get_rank() == 1:
        raise RuntimeError("boom on rank 1")
    return _cross_entropy(logits, labels)


def _build_failing_on_workers(profile: str) -> torch.nn.Module:
    if os.environ.get("RANK", "0") != "0":
        raise ValueError("no module on a worker")
    return _build_mlp(profile)


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


def test_train_ddp_through_pytest_records_processes_and_throughput(pytester, run_in_process, monkeypatch):
    for name in ("conftest.py", "test_benchmarks.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    monkeypatch.setenv("PERFSUITE_DDP_PROCESSES", "2")
    result = run_in_process(
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
