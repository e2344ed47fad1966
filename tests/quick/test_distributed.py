"""train-ddp: how many processes, when it is skipped, scaling efficiency, and DDP runs of two processes.

The runs use gloo on the CPU by default; PERFSUITE_DDP_TEST_DEVICE=cuda runs the same specifications with
nccl on two GPUs.

The tests of this subject that start processes or take long: tests/sessions/test_distributed_sessions.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from perfsuite.errors import UsageError
from perfsuite.matrix.cases import Case, DeviceFacts, skip_reason
from perfsuite.options.settings import RawSettings, validate_settings
from perfsuite.run.ddp.plan import scaling_efficiency, scaling_table, threads_per_process
from perfsuite.run.ddp.rank0 import DistributedWorkerError, prepare_ddp_case
from perfsuite.run.devices import backend, with_device_rules
from perfsuite.workloads import Workload, model_facts


def _build_mlp(profile: str) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _inputs(profile: str, batch_size: int) -> torch.Tensor:
    return torch.randn(batch_size, 16)


def _labels(profile: str, batch_size: int) -> torch.Tensor:
    return torch.randint(0, 4, (batch_size,))


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


# Not registered, so the registry other tests see is unchanged; workers find them among this module's globals.
SMALL_MLP = Workload("ddp-test-mlp", _build_mlp, _inputs, {"smoke": (8,)}, _labels, _cross_entropy)


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


def test_a_worker_out_of_memory_counts_as_out_of_memory():
    error = DistributedWorkerError("cuda-fp32-m-bs8-train-ddp: train-ddp rank 1 of 2 failed in a training step: "
                                   "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert backend("cpu").is_out_of_memory(error)


def test_mps_case_raises_the_skip_reason():
    with pytest.raises(ValueError, match="mps-fp32-ddp-test-mlp-bs8-train-ddp-smoke cannot run: one device"):
        prepare_ddp_case(Case("mps", "fp32", "ddp-test-mlp", 8, "train-ddp", "smoke"), SMALL_MLP)
