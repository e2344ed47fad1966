"""A timed run of one case through pytest-benchmark's `benchmark` fixture, in the process it is called in.

pytest-benchmark does the rounds, so its flags keep working. What this adds: the device is drained at the end
of every round, warm-up steps run before any round is timed (and a non-finite training loss stops the case),
FLOPs are counted once outside the rounds, on CUDA one profiled pass after the rounds gives the GPU's busy
fraction, and the result is a `Run` record whose figures also land in `benchmark.extra_info`.
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from perfsuite.matrix.axes import base_mode
from perfsuite.matrix.cases import DeviceFacts, skip_reason
from perfsuite.records import Case, Fact, Run
from perfsuite.run import devices, profiling
from perfsuite.run.compiled import DynamoCounts
from perfsuite.run.steps import PreparedCase, count_flops, prepare_case
from perfsuite.workloads import get_workload

EVENT_TIMED_STEPS = 5
# Compile modes that go through torch.compile (and so Dynamo's counters).
TORCH_COMPILE_MODES = ("inductor", "reduce-overhead")


class CaseOutOfMemory(Exception):
    """The device ran out of memory while the case was built, warmed up or timed."""


class NonFiniteLoss(Exception):
    """A training step returned a NaN or infinite loss: timing it would record a broken model as a baseline."""


def case_skip_reason(case: Case, facts: DeviceFacts, ddp_processes: int | None = None) -> str | None:
    """Why `case` cannot run here: the matrix's rules, and for train-ddp the processes it needs."""
    reason = skip_reason(case, facts)
    if reason is None and case.mode == "train-ddp":
        from perfsuite.run.ddp.plan import ddp_processes as processes_for
        from perfsuite.run.ddp.plan import ddp_skip_reason

        device_count = devices.device_count(case.device)
        processes = processes_for(case.device, device_count, ddp_processes)
        reason = ddp_skip_reason(case.device, processes, device_count)
    return reason


def run_case(
    benchmark: Any,
    case: Case,
    warmup_steps: int,
    ddp_processes: int | None = None,
    fresh_process: bool = False,
) -> Run | None:
    """Benchmark `case` with the pytest-benchmark fixture `benchmark`; return its `Run`, or None when no round
    was timed (`--benchmark-disable` runs the step once, untimed).

    Warm-up steps absorb first-call costs (cuDNN autotuning, MPS graph and shader compilation, lazy allocator
    growth) and are not timed. `fresh_process` says the case has this process to itself, which makes the
    process's memory figure the case's own. Raises CaseOutOfMemory when the device runs out of memory
    anywhere in the case, NonFiniteLoss when a warm-up training step's loss is NaN or infinite.
    """
    workload = get_workload(case.model)
    devices.free_cached_memory(case.device)
    prepared: PreparedCase | None = None
    try:
        prepared = _prepare(case, ddp_processes)
        digest, parameter_count, samples_per_step = prepared.config_digest, prepared.parameter_count, prepared.samples
        prepared_facts = dict(prepared.extra_facts)
        compiling = case.compile in TORCH_COMPILE_MODES
        before_warmup = DynamoCounts.now() if compiling else None
        check_warmup(prepared, warmup_steps)
        flops_per_step = prepared.flops_per_step
        if flops_per_step is None:
            flops_per_step = count_flops(prepared.run_step)
        devices.synchronize(case.device)
        devices.reset_memory_peak(case.device)
        before_rounds = DynamoCounts.now() if compiling else None
        in_use_before_bytes = devices.memory_in_use_bytes(case.device)
        benchmark(prepared.timed_step)  # each round ends with the device drained
        in_use_after_bytes = devices.memory_in_use_bytes(case.device)
        if before_warmup is not None and before_rounds is not None:
            prepared_facts["compile_warmup_frames"] = before_rounds.since(before_warmup).frames
            check_no_compilation(case, DynamoCounts.now().since(before_rounds), warmup_steps)
        stats = getattr(benchmark, "stats", None)
        round_times_s = list(stats.stats.data) if stats is not None else []
        memory_bytes = devices.memory_figures_bytes(case.device)
        memory_figure = devices.memory_figure_name(case.device)
        event_median_s = None
        if devices.has_events(case.device):
            event_median_s = statistics.median(
                devices.time_with_events_s(prepared.run_step, case.device, EVENT_TIMED_STEPS)
            )
        busy = None
        if case.device == "cuda" and round_times_s:
            kernel_s = profiling.cuda_kernel_times_s(prepared.run_step)["kernel_s"]
            busy = profiling.gpu_busy_fraction(kernel_s, statistics.median(round_times_s))
    except Exception as error:
        if devices.is_out_of_memory(error):
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise CaseOutOfMemory(
                f"{case.benchmark_id}: out of memory at batch size {case.batch_size} ({first_line})"
            ) from None
        raise
    finally:
        if prepared is not None:
            prepared.close()
        del prepared
        devices.free_cached_memory(case.device)
    if not round_times_s:
        return None
    if in_use_before_bytes is not None and in_use_after_bytes is not None:
        prepared_facts["memory_growth_bytes"] = in_use_after_bytes - in_use_before_bytes
    facts: dict[str, Fact] = {
        **workload.extra_facts, **prepared_facts, **memory_bytes, "fresh_process": fresh_process,
    }
    run = Run(
        case=case,
        round_times_s=tuple(round_times_s),
        samples_per_step=samples_per_step,
        flops_per_step=flops_per_step,
        memory_figure=memory_figure,
        memory_bytes=memory_bytes.get(memory_figure),
        config_digest=digest,
        torch_version=torch.__version__,
        threads=torch.get_num_threads(),
        parameter_count=parameter_count,
        gpu_busy_fraction=busy,
        event_median_s=event_median_s,
        facts=facts,
    )
    benchmark.extra_info.update(extra_info(run))
    return run


class MemoryGrowthWarning(UserWarning):
    """The memory a case holds grew across its timed rounds: its step keeps something alive (a leak)."""


# Growth across the rounds worth a warning: beyond allocator noise in total and per round.
MEMORY_GROWTH_WARNING_BYTES = 16 * 2**20
MEMORY_GROWTH_WARNING_BYTES_PER_ROUND = 2**19


@dataclass(frozen=True)
class MemoryGrowth:
    """How much the memory in use grew from before the timed rounds to after them."""

    benchmark_id: str
    growth_bytes: int
    rounds: int

    @property
    def grows(self) -> bool:
        """Whether the growth is a leak rather than allocator noise: over 16 MiB and over 0.5 MiB a round."""
        return (
            self.growth_bytes > MEMORY_GROWTH_WARNING_BYTES
            and self.growth_bytes > MEMORY_GROWTH_WARNING_BYTES_PER_ROUND * self.rounds
        )

    def describe(self) -> str:
        per_round = self.growth_bytes / max(self.rounds, 1)
        return (
            f"{self.benchmark_id}: the memory in use grew by {self.growth_bytes / 2**20:.1f} MiB over "
            f"{self.rounds} timed rounds ({per_round / 2**20:.2f} MiB a round): the step keeps something alive, so "
            "a longer run would run out of memory and the memory figure depends on the round count"
        )


def warn_of_memory_growth(run: Run) -> bool:
    """Warn (MemoryGrowthWarning) when `run`'s memory grew across its timed rounds like a leak; whether it did."""
    growth_bytes = run.facts.get("memory_growth_bytes")
    if not isinstance(growth_bytes, int):
        return False
    growth = MemoryGrowth(run.case.benchmark_id, growth_bytes, run.rounds)
    if growth.grows:
        warnings.warn(MemoryGrowthWarning(growth.describe()), stacklevel=2)
    return growth.grows


class CompiledDuringRounds(Exception):
    """torch.compile compiled during the timed rounds: the times would include compilation."""


def check_no_compilation(case: Case, during_rounds: DynamoCounts, warmup_steps: int) -> None:
    """Raise CompiledDuringRounds when Dynamo compiled a frame while the rounds were timed."""
    if during_rounds.frames:
        raise CompiledDuringRounds(
            f"{case.benchmark_id}: torch.compile compiled {during_rounds.frames} frame(s) during the timed rounds "
            f"after {warmup_steps} warm-up steps, so the times include compilation; raise --perf-warmup"
        )


def _prepare(case: Case, ddp_processes: int | None) -> PreparedCase:
    """The case built on its device: train-ddp starts its worker ranks, every other mode composes one step."""
    workload = get_workload(case.model)
    if case.mode == "train-ddp":
        from perfsuite.run.ddp.rank0 import prepare_ddp_case

        return prepare_ddp_case(case, workload, ddp_processes)
    return prepare_case(case, workload)


def check_warmup(prepared: PreparedCase, warmup_steps: int) -> None:
    """Run the warm-up steps; for training, fail on a non-finite loss naming the step and the value."""
    training = base_mode(prepared.case.mode) == "train"
    for step in range(1, warmup_steps + 1):
        output = prepared.timed_step()
        if training and isinstance(output, torch.Tensor) and output.numel() == 1:
            loss = float(output.detach().float().cpu())
            if not math.isfinite(loss):
                raise NonFiniteLoss(
                    f"{prepared.case.benchmark_id}: warm-up step {step} returned the loss {loss}; a model that "
                    "trains to NaN or infinity is broken, so it is not timed (check the model, its inputs and "
                    "its learning rate)"
                )


def extra_info(run: Run) -> dict[str, Fact]:
    """The figures of `run` as pytest-benchmark's `extra_info` (and so its JSON) carries them."""
    case = run.case
    return {
        "device": case.device, "dtype": case.dtype, "model": case.model, "batch_size": case.batch_size,
        "mode": case.mode, "profile": case.profile, "compile": case.compile,
        "parameter_count": run.parameter_count, "config_digest": run.config_digest,
        "flops_per_step": run.flops_per_step, "samples_per_step": run.samples_per_step,
        "memory_figure": run.memory_figure, "memory_bytes": run.memory_bytes,
        "samples_per_s": run.samples_per_s, "tflops_per_s": run.tflops_per_s,
        "event_median_s": run.event_median_s, "gpu_busy_fraction": run.gpu_busy_fraction,
        "threads": run.threads,
        **run.facts,
    }
