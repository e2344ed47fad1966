"""Out of memory ends a batch-size sweep as a skip, not a crash.

The tests of this subject that start processes or take long: tests/sessions/test_out_of_memory_sessions.py."""

import dataclasses

import pytest
import torch

from perfsuite.matrix.cases import Case, sweep_key, sweep_skip_reason
from perfsuite.records import Failure
from perfsuite.run.devices import backend
from perfsuite.run.plan import MeasureSettings, RoundSettings


def test_cuda_and_mps_out_of_memory_errors_are_recognised():
    assert backend("cuda").is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert backend("mps").is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated: 18.13 GB)"))
    assert not backend("mps").is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_larger_batch_sizes_of_a_sweep_that_ran_out_of_memory_are_not_tried():
    failed = Case("mps", "fp32", "resnet18", 256, "train", "standard")
    larger = Case("mps", "fp32", "resnet18", 512, "train", "standard")
    other_dtype = Case("mps", "bf16", "resnet18", 512, "train", "standard")
    memory = {sweep_key(failed): 256}
    assert "batch size 256 ran out of memory" in sweep_skip_reason(larger, memory)
    assert sweep_skip_reason(other_dtype, memory) is None
    assert sweep_skip_reason(Case("mps", "fp32", "resnet18", 128, "train", "standard"), memory) is None


def test_cuda_memory_returns_to_its_level_between_cases():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from perfsuite.run.measure import measure
    from perfsuite.run.worker import standalone_benchmark

    levels = []
    for model in ("resnet18", "bert-base", "resnet18", "bert-base"):
        case = Case("cuda", "bf16", model, 8, "train", "smoke")
        rounds = RoundSettings(max_time_s=0.05)
        measure(case, MeasureSettings(1), rounds, standalone_benchmark(model, rounds))
        levels.append(torch.cuda.memory_allocated())
    assert levels[2] <= levels[0] and levels[3] <= levels[1]


def test_out_of_memory_after_the_rounds_is_an_out_of_memory_failure_and_the_case_is_closed(monkeypatch):
    # The device-event read after the timed rounds runs out of memory: the case must still be closed (train-ddp
    # workers and process groups live in it) and the sweep must see an out-of-memory failure, not a raw error.
    from perfsuite import workloads
    from perfsuite.run import measure
    from perfsuite.run.worker import standalone_benchmark

    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads._REGISTRY))  # the workload below leaves with the test
    workloads.register_workload(workloads.Workload(
        name="tiny-linear-oom", build_module=lambda profile: torch.nn.Linear(4, 4),
        make_inputs=lambda profile, batch_size: torch.randn(batch_size, 4), batch_sizes={"smoke": (2,)},
    ))
    closed = []
    real_prepare = measure._prepare

    def prepare_and_watch(case, ddp_processes):
        prepared = real_prepare(case, ddp_processes)
        real_close = prepared.close
        return dataclasses.replace(prepared, close=lambda: (closed.append(case.benchmark_id), real_close()))

    def events_out_of_memory(run_step, steps):
        raise RuntimeError("MPS backend out of memory (MPS allocated: 9.00 GB, other allocations: 0 bytes)")

    monkeypatch.setattr(measure, "_prepare", prepare_and_watch)
    monkeypatch.setattr(backend("cpu"), "event_times_s", events_out_of_memory)
    case = Case("cpu", "fp32", "tiny-linear-oom", 2, "infer", "smoke")
    rounds = RoundSettings(max_time_s=0.01)
    outcome = measure.measure(case, MeasureSettings(1), rounds, standalone_benchmark("oom", rounds))
    assert isinstance(outcome, Failure) and outcome.kind == "out-of-memory" and outcome.skips
    assert "out of memory at batch size 2" in outcome.message
    assert closed == [case.benchmark_id]
