"""The one place a case is measured: `measure(case, settings, fixture)` returns its outcome, a `Run` or a `Failure`.

Every path calls it: a session in the pytest process (with pytest-benchmark's `benchmark` fixture), the worker
processes of `--perf-processes` (with a standalone fixture), the selftest's workers, and the A/B workers through its
parts (`open_case` builds and warms a case once, then rounds are timed on request). Whatever goes wrong becomes a
`Failure` here, by `failure_of`, so one bad step gives the same status and message on every path.

What a measurement is: the case is built on its device, warm-up steps absorb first-call costs (cuDNN autotuning, MPS
graph and shader compilation, allocator growth) and a non-finite training loss stops the case; pytest-benchmark times
the rounds, each ending with the device drained, the machine's conditions read just before and just after them
(`DeviceBackend.conditions`); then the memory figures, device events and (on CUDA) the GPU's busy
fraction are read, and where the settings ask a few more steps are profiled for the case's op summary; last, where
the settings ask, one more step counts the FLOPs.
"""

from __future__ import annotations

import math
import statistics
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from perfsuite.matrix.axes import base_mode
from perfsuite.records import (
    LATENCY_FIGURE,
    Case,
    Fact,
    Failure,
    OpProfile,
    Outcome,
    Run,
    conditions_to_json,
)
from perfsuite.run.compiled import CaptureImpossible, DynamoCounts, WrongCompiledResult
from perfsuite.run.devices import DeviceBackend, backend
from perfsuite.run.plan import MeasureSettings, RoundSettings, most_steps_per_round, rounds_for, steps_per_round
from perfsuite.run.steps import PreparedCase, WrongResult, flop_count, flop_facts, prepare_case, warn_if_unknown
from perfsuite.workloads import get_workload

EVENT_TIMED_STEPS = 5
# The single synced steps whose median is a case's latency.
LATENCY_STEPS = 20
# How the drain's cost is found on an accelerator: turns of single synced steps and of a window of back-to-back
# steps lasting about CALIBRATION_WINDOW_S.
CALIBRATION_TURNS = 3
MIN_CALIBRATION_STEPS = 5
CALIBRATION_WINDOW_S = 0.02
# The steps of a case's op summary: about this many seconds of them (`op_profile_steps`).
OP_SUMMARY_S = 0.01
# Compile modes that go through torch.compile (and so Dynamo's counters).
TORCH_COMPILE_MODES = ("inductor", "reduce-overhead")
# How much of a traceback a failure keeps as its details.
DETAILS_CHARACTERS = 2000


class NonFiniteLoss(Exception):
    """A training step returned a NaN or infinite loss: timing it would record a broken model as a baseline."""


class CompiledDuringRounds(Exception):
    """torch.compile compiled during the timed rounds: the times would include compilation."""


def measure(case: Case, settings: MeasureSettings, rounds: RoundSettings, fixture: Any) -> Outcome:
    """Measure `case` with the pytest-benchmark fixture `fixture` and its `rounds` settings: its `Run`, a `Failure`
    (never an exception, except an interrupt), or None when no round was timed (`--benchmark-disable` runs the step
    once, untimed). The run's figures also land in `fixture.extra_info`."""
    device = backend(case.device)
    try:
        run = _measure(case, settings, rounds, fixture, device)
    except Exception as error:
        return failure_of(case, error, device)
    if run is not None:
        fixture.extra_info.update(extra_info(run))
    return run


def failure_of(case: Case, error: Exception, device: DeviceBackend | None = None) -> Failure:
    """The failure `error` means for `case`: its kind and a message that names the case."""
    device = device or backend(case.device)
    text = str(error).strip()
    if device.is_out_of_memory(error):
        first_line = text.splitlines()[0] if text else type(error).__name__
        return Failure(case, "out-of-memory", f"{case.benchmark_id}: out of memory at batch size {case.batch_size} "
                       f"({first_line})")
    if isinstance(error, CaptureImpossible):
        return Failure(case, "cannot-run", f"{case.benchmark_id}: {error}")
    kinds = ((NonFiniteLoss, "non-finite-loss"), ((WrongCompiledResult, WrongResult), "wrong-result"),
             (CompiledDuringRounds, "compiled-during-rounds"))
    for error_types, kind in kinds:
        if isinstance(error, error_types):
            return Failure(case, kind, text)  # type: ignore[arg-type]
    details = "".join(traceback.format_exception(error))[-DETAILS_CHARACTERS:]
    return Failure(case, "error", f"{case.benchmark_id}: the step raised {type(error).__name__}: {text}", details)


def crashed(case: Case, exit_status: int, output_tail: str) -> Failure:
    """The failure of a case whose measuring process died (a segfault, an abort, a kill) before reporting."""
    return Failure(
        case, "crashed",
        f"{case.benchmark_id}: the process measuring it exited with status {exit_status} before it reported",
        output_tail,
    )


def _measure(
    case: Case, settings: MeasureSettings, rounds: RoundSettings, fixture: Any, device: DeviceBackend
) -> Run | None:
    warm = open_case(case, settings, rounds)
    try:
        conditions_before = device.conditions()
        device.reset_memory_peak()
        in_use_before_bytes = device.memory_in_use_bytes()
        warm.time_with(fixture, rounds)
        in_use_after_bytes = device.memory_in_use_bytes()
        conditions_after = device.conditions()
        warm.check_no_compilation()
        stats = getattr(fixture, "stats", None)
        round_times_s = list(stats.stats.data) if stats is not None else []
        if not round_times_s:
            return None
        if in_use_before_bytes is not None and in_use_after_bytes is not None:
            warm.facts["memory_growth_bytes"] = in_use_after_bytes - in_use_before_bytes
        run = replace(warm.run_of(round_times_s, settings.fresh_process),  # the memory figures as the rounds left them
                      conditions_before=conditions_before, conditions_after=conditions_after)
        latency_median_s = (
            statistics.median(round_times_s) if warm.figure == LATENCY_FIGURE
            else warm.latency_s(LATENCY_STEPS) if base_mode(case.mode) == "infer"
            else None  # a training loop never waits after each step
        )
        event_times_s = device.event_times_s(warm.prepared.run_step, EVENT_TIMED_STEPS)
        kernel_s = device.kernel_time_s(warm.prepared.run_step)
        profile_started_s = time.perf_counter()
        op_profile, profile_error = (_op_profile(warm, statistics.median(round_times_s)) if settings.profile_ops
                                     else (None, None))
        op_profile_s = time.perf_counter() - profile_started_s
        # Last, so that no figure above depends on whether this process counted (the counter's dispatch mode makes
        # torch import its compiler: a second and tens of MiB); a training step it counts changes the weights.
        count = flop_count(warm.prepared.step_to_count) if settings.count_flops else None
    finally:
        warm.close()
    if count is not None:
        warn_if_unknown(count)
        run = replace(run, flops_per_step=count.flops_per_step, facts={**run.facts, **flop_facts(count)})
    if settings.profile_ops:  # what the summary cost, and why there is none where the profiler failed
        run = replace(run, facts={**run.facts, "op_profile_s": op_profile_s,
                                  **({} if profile_error is None else {"op_profile_error": profile_error})})
    return replace(
        run, latency_median_s=latency_median_s, op_profile=op_profile,
        event_median_s=None if event_times_s is None else statistics.median(event_times_s),
        gpu_busy_fraction=None if kernel_s is None else min(1.0, kernel_s / statistics.median(round_times_s)),
    )


def op_profile_steps(step_s: float) -> int:
    """The steps profiled for the op summary of a case whose step takes `step_s` seconds: about OP_SUMMARY_S seconds
    of steps, at least one and at most as many as an A/B side profiles (MAX_PROFILE_STEPS). Fewer than an A/B side's
    0.1 s: a session profiles every case it measures, and the profiler's events cost 6 to 25 times the step here, so
    0.1 s of steps cost 15% of a recording session at defaults (one step, where a step is long, is what it keeps)."""
    from perfsuite.run.ab import MAX_PROFILE_STEPS

    return min(MAX_PROFILE_STEPS, max(1, math.floor(OP_SUMMARY_S / max(step_s, 1e-9))))


def _op_profile(warm: WarmCase, step_s: float) -> tuple[OpProfile | None, str | None]:
    """The ops of a few steps of the warm case, profiled after its rounds (`op_profile_steps` of `step_s`, the rounds'
    median step: the warm-up's steps run slower); or None and what went wrong where the profiler failed (the run
    stands: the summary only explains it)."""
    from perfsuite.run.profiling import profile_ops

    try:
        return profile_ops(warm.prepared.run_step, warm.device, op_profile_steps(step_s)), None
    except Exception as error:
        return None, f"{type(error).__name__}: {error}"[:DETAILS_CHARACTERS]


class PipelinedSteps:
    """What pytest-benchmark times, `steps_per_round` calls a round (its `iterations`): each call queues one step,
    and the last call of a round waits for the device, so a round's time divided by its steps is the time per step
    of a loop that never waits in between (pytest-benchmark divides by the iterations itself)."""

    def __init__(self, run_step: Callable[[], object], synchronize: Callable[[], None], steps_per_round: int) -> None:
        self.run_step, self.synchronize, self.steps_per_round = run_step, synchronize, steps_per_round
        self.calls = 0

    def __call__(self) -> object:
        output = self.run_step()
        self.calls += 1
        if self.calls == self.steps_per_round:
            self.calls = 0
            self.synchronize()
        return output


@dataclass
class WarmCase:
    """A case built on its device and warmed up, ready for timed rounds: `steps_per_round` steps back to back then
    one drain of the device make a round (one step for the latency figure); `step_s` is the calibration's estimate
    of one step's time in such a round; `first_output` is what the first warm-up step returned (the loss of a
    training step), from the seeded weights and inputs; `warmup_total_s` the warm-up's seconds (compilation
    included). `close()` releases what it holds."""

    case: Case
    prepared: PreparedCase
    device: DeviceBackend
    figure: str
    steps_per_round: int
    step_s: float
    facts: dict[str, Fact]
    warmup_steps: int
    _before_rounds: DynamoCounts | None = None
    first_output: object = None
    warmup_total_s: float = 0.0

    @property
    def config_digest(self) -> str:
        return self.prepared.config_digest

    @property
    def parameter_count(self) -> int:
        return self.prepared.parameter_count

    @property
    def samples_per_step(self) -> int:
        return self.prepared.samples

    def time_with(self, fixture: Any, rounds: RoundSettings) -> None:
        """Time rounds with pytest-benchmark's fixture, as many as `rounds` asks for: each round `steps_per_round`
        steps back to back and one drain (pytest-benchmark's iterations), so its statistics are per step."""
        target = PipelinedSteps(self.prepared.run_step, self.device.synchronize, self.steps_per_round)
        fixture.pedantic(target, rounds=rounds_for(self.step_s * self.steps_per_round, rounds),
                         iterations=self.steps_per_round, warmup_rounds=0)
        self.device.synchronize()  # pytest-benchmark calls the target once more after the rounds, for its result

    def time_rounds(self, duration_s: float) -> list[float]:
        """Timed rounds for at least one round and about `duration_s` seconds: each round's time per step."""
        run_step, synchronize, steps = self.prepared.run_step, self.device.synchronize, self.steps_per_round
        times_s: list[float] = []
        end_s = time.perf_counter() + duration_s
        while not times_s or time.perf_counter() < end_s:
            start_s = time.perf_counter()
            for _ in range(steps):
                run_step()
            synchronize()
            times_s.append((time.perf_counter() - start_s) / steps)
        return times_s

    def run_of(self, round_times_s: Sequence[float], fresh_process: bool) -> Run:
        """The run of rounds this warm case timed (`time_rounds`), with the memory figures as they stand now (reset
        the peak before the rounds); no device events, busy fraction or FLOPs (they cost steps of their own)."""
        memory_bytes = self.device.memory_figures_bytes()
        memory_figure = self.device.memory_figure_name()
        return Run(
            case=self.case, round_times_s=tuple(round_times_s), samples_per_step=self.samples_per_step,
            flops_per_step=None, memory_figure=memory_figure,
            memory_bytes=memory_bytes.get(memory_figure), config_digest=self.config_digest,
            torch_version=torch.__version__, threads=torch.get_num_threads(), parameter_count=self.parameter_count,
            facts={**get_workload(self.case.model).extra_facts, **self.facts, **memory_bytes,
                   "fresh_process": fresh_process},
            figure=self.figure, steps_per_round=self.steps_per_round,
        )

    def latency_s(self, steps: int) -> float:
        """The median time of `steps` single steps, each followed by a drain of the device: what one request waits."""
        return _synced_steps_s(self.prepared, self.device, steps)

    def check_no_compilation(self) -> None:
        """Raise CompiledDuringRounds when torch.compile compiled a frame since the warm-up ended."""
        if self._before_rounds is not None:
            check_no_compilation(self.case, DynamoCounts.now().since(self._before_rounds), self.warmup_steps)

    def close(self) -> None:
        self.prepared.close()
        self.device.free_cached_memory()


def open_case(case: Case, settings: MeasureSettings, rounds: RoundSettings) -> WarmCase:
    """Build `case` on its device, run the warm-up steps (a non-finite training loss raises NonFiniteLoss) and
    choose the steps of a round: enough that the drain at its end costs at most
    ROUND_SYNC_SHARE of it, within `rounds`' budget. Raises what building or warming raises (`failure_of` says
    what it means); the case is closed again on any error."""
    device = backend(case.device)
    device.free_cached_memory()
    prepared = _prepare(case, settings.ddp_processes)
    try:
        facts: dict[str, Fact] = dict(prepared.extra_facts)
        compiling = case.compile in TORCH_COMPILE_MODES
        before_warmup = DynamoCounts.now() if compiling else None
        first_output: list[object] = []
        warmup_started_s = time.perf_counter()
        warmup_s = check_warmup(prepared, settings.warmup_steps, first_output)
        warmup_total_s = time.perf_counter() - warmup_started_s
        device.synchronize()
        step_s, steps = calibrate(prepared, device, settings.figure, rounds, warmup_s)
        before_rounds = DynamoCounts.now() if compiling else None
        if before_warmup is not None and before_rounds is not None:
            facts["compile_warmup_frames"] = before_rounds.since(before_warmup).frames
    except BaseException:
        prepared.close()
        device.free_cached_memory()
        raise
    return WarmCase(case, prepared, device, settings.figure, steps, step_s, facts,
                    settings.warmup_steps, before_rounds, first_output[0] if first_output else None,
                    warmup_total_s)


def calibrate(
    prepared: PreparedCase, device: DeviceBackend, figure: str, rounds: RoundSettings, warmup_s: Sequence[float]
) -> tuple[float, int]:
    """(the time of one step in a round, the steps of a round). The latency figure times one step a round. On a
    device that runs eagerly (the CPU) a drain costs nothing, so a round is one step too. On an accelerator, steps
    run back to back and each followed by a drain are timed in turn, CALIBRATION_TURNS times (so a slow spell of the
    host lands on both); the drain's cost per step is the difference of their medians. A step so long that two of
    them would not fit in a round of the budget (`steps_per_round` allows one whatever the drain costs) skips the
    turns: 30 such steps were most of a large case's opening."""
    one_step_s = statistics.median(warmup_s) if warmup_s else _synced_steps_s(prepared, device, 1)
    if figure == LATENCY_FIGURE or not device.is_accelerator or most_steps_per_round(one_step_s, rounds) == 1:
        return one_step_s, steps_per_round(one_step_s, 0.0, rounds)
    window = max(MIN_CALIBRATION_STEPS, math.ceil(CALIBRATION_WINDOW_S / max(one_step_s, 1e-7)))
    synced, pipelined = [], []
    for _ in range(CALIBRATION_TURNS):
        synced.append(_synced_steps_s(prepared, device, MIN_CALIBRATION_STEPS))
        start_s = time.perf_counter()
        for _ in range(window):
            prepared.run_step()
        device.synchronize()
        pipelined.append((time.perf_counter() - start_s) / window)
    step_s = statistics.median(pipelined)
    return step_s, steps_per_round(step_s, statistics.median(synced) - step_s, rounds)


def _synced_steps_s(prepared: PreparedCase, device: DeviceBackend, steps: int) -> float:
    times_s = []
    for _ in range(steps):
        start_s = time.perf_counter()
        prepared.run_step()
        device.synchronize()
        times_s.append(time.perf_counter() - start_s)
    return statistics.median(times_s)


def _prepare(case: Case, ddp_processes: int | None) -> PreparedCase:
    """The case built on its device: train-ddp starts its worker ranks, every other mode composes one step."""
    workload = get_workload(case.model)
    if case.mode == "train-ddp":
        from perfsuite.run.ddp.rank0 import prepare_ddp_case

        prepared = prepare_ddp_case(case, workload, ddp_processes)
    else:
        prepared = prepare_case(case, workload)
    return prepared


def check_warmup(prepared: PreparedCase, warmup_steps: int, first_output: list[object] | None = None) -> list[float]:
    """Run the warm-up steps, each followed by a drain of the device; for training, fail on a non-finite loss naming
    the step and the value. Returns the times of the warm-up steps after the first (which pays first-call costs);
    the first step's output (its loss, for training) is appended to `first_output` when given."""
    training = base_mode(prepared.case.mode) == "train"
    times_s = []
    for step in range(1, warmup_steps + 1):
        start_s = time.perf_counter()
        output = prepared.timed_step()
        if step > 1:
            times_s.append(time.perf_counter() - start_s)
        elif first_output is not None:
            first_output.append(output)
        if training and isinstance(output, torch.Tensor) and output.numel() == 1:
            loss = float(output.detach().float().cpu())
            if not math.isfinite(loss):
                raise NonFiniteLoss(
                    f"{prepared.case.benchmark_id}: warm-up step {step} returned the loss {loss}; a model that "
                    "trains to NaN or infinity is broken, so it is not timed (check the model, its inputs and "
                    "its learning rate)"
                )
    return times_s


def check_no_compilation(case: Case, during_rounds: DynamoCounts, warmup_steps: int) -> None:
    """Raise CompiledDuringRounds when Dynamo compiled a frame while the rounds were timed."""
    if during_rounds.frames:
        raise CompiledDuringRounds(
            f"{case.benchmark_id}: torch.compile compiled {during_rounds.frames} frame(s) during the timed rounds "
            f"after {warmup_steps} warm-up steps, so the times include compilation; raise --perf-warmup"
        )


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


def extra_info(run: Run) -> dict[str, object]:
    """The figures of `run` as pytest-benchmark's `extra_info` (and so its JSON) carries them, with the machine's
    conditions before and after its rounds (`conditions_before`, `conditions_after`: objects, or None where not
    read)."""
    case = run.case
    return {
        "device": case.device, "dtype": case.dtype, "model": case.model, "batch_size": case.batch_size,
        "mode": case.mode, "profile": case.profile, "compile": case.compile,
        "parameter_count": run.parameter_count, "config_digest": run.config_digest,
        "flops_per_step": run.flops_per_step, "samples_per_step": run.samples_per_step,
        "memory_figure": run.memory_figure, "memory_bytes": run.memory_bytes,
        "samples_per_s": run.samples_per_s, "tflops_per_s": run.tflops_per_s,
        "event_median_s": run.event_median_s, "gpu_busy_fraction": run.gpu_busy_fraction,
        "threads": run.threads, "figure": run.figure, "steps_per_round": run.steps_per_round,
        "latency_median_s": run.latency_median_s,
        "conditions_before": None if run.conditions_before is None else conditions_to_json(run.conditions_before),
        "conditions_after": None if run.conditions_after is None else conditions_to_json(run.conditions_after),
        **run.facts,
    }
