"""Pipelined rounds: a round is N steps back to back and one drain of the device at its end, N chosen in warm-up so
the drain costs at most 1% of the round; the latency figure keeps one step and a drain a round."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from perfsuite.records import LATENCY_FIGURE, STEP_FIGURE
from perfsuite.run import measure
from perfsuite.run.measure import PipelinedSteps, calibrate
from perfsuite.run.plan import ROUND_SYNC_SHARE, RoundSettings, rounds_for, steps_per_round


def test_a_round_holds_enough_steps_that_the_drain_is_one_percent_of_it():
    # a 1 ms step whose drain costs 0.2 ms: 0.2 / (0.01 * 1) = 20 steps a round
    assert steps_per_round(1e-3, 2e-4, RoundSettings(max_time_s=1.0)) == 20
    assert ROUND_SYNC_SHARE == 0.01


def test_the_steps_of_a_round_are_capped_so_min_rounds_rounds_fit_the_time_budget():
    # the drain would want 1000 steps of 1 ms, but 5 rounds must fit in 0.5 s: 100 steps
    assert steps_per_round(1e-3, 1e-2, RoundSettings(min_rounds=5, max_time_s=0.5)) == 100


def test_a_free_drain_or_a_slow_step_is_one_step_a_round():
    assert steps_per_round(0.02, 0.0, RoundSettings()) == 1
    assert steps_per_round(2.0, 0.5, RoundSettings()) == 1


def test_rounds_fill_the_time_budget_and_never_drop_below_min_rounds():
    assert rounds_for(0.01, RoundSettings(min_rounds=5, max_time_s=1.0)) == 100
    assert rounds_for(0.5, RoundSettings(min_rounds=5, max_time_s=1.0)) == 5


def test_pipelined_steps_drain_the_device_once_at_the_end_of_each_round():
    calls: list[str] = []
    target = PipelinedSteps(lambda: calls.append("step"), lambda: calls.append("drain"), steps_per_round=3)
    for _ in range(6):
        target()
    assert calls == ["step", "step", "step", "drain"] * 2


class SimulatedGpu:
    """A device on a simulated clock: a step costs the host 10 us to queue and the device 1 ms to run; a drain waits
    for the queued work and then a 0.2 ms round trip. What a fast GPU step looks like, free of this machine's load."""

    is_accelerator = True

    def __init__(self) -> None:
        self.now_s = 0.0
        self.device_free_at_s = 0.0

    def perf_counter(self) -> float:
        return self.now_s

    def run_step(self) -> None:
        self.device_free_at_s = max(self.now_s, self.device_free_at_s) + 1e-3
        self.now_s += 1e-5

    def synchronize(self) -> None:
        self.now_s = max(self.now_s, self.device_free_at_s) + 2e-4


def test_calibration_on_an_accelerator_finds_the_drain_and_pipelines_the_round(monkeypatch):
    gpu = SimulatedGpu()
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=gpu.perf_counter))
    prepared = SimpleNamespace(run_step=gpu.run_step)
    step_s, steps = calibrate(prepared, gpu, STEP_FIGURE, RoundSettings(max_time_s=2.0), [1.2e-3] * 3)
    # back to back a step costs the device's 1 ms (the drain shared by a window of 20 ms); the drain's 0.2 ms is 1%
    # of 20 steps
    assert step_s == pytest.approx(1e-3, rel=0.02)
    assert steps == pytest.approx(20, abs=1)


def test_the_latency_figure_and_the_cpu_time_one_step_a_round(monkeypatch):
    gpu = SimulatedGpu()
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=gpu.perf_counter))
    prepared = SimpleNamespace(run_step=gpu.run_step)
    assert calibrate(prepared, gpu, LATENCY_FIGURE, RoundSettings(), [1.2e-3])[1] == 1
    cpu = SimulatedGpu()
    cpu.is_accelerator = False
    assert calibrate(prepared, cpu, STEP_FIGURE, RoundSettings(), [1e-3])[1] == 1


def test_a_step_too_long_for_two_in_a_round_skips_the_calibration_turns(monkeypatch):
    """A round may hold one such step whatever the drain costs, so no step is spent finding it out (30 steps of a
    large model were most of its opening)."""
    gpu = SimulatedGpu()
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=gpu.perf_counter))
    steps_run: list[int] = []
    prepared = SimpleNamespace(run_step=lambda: steps_run.append(1))
    step_s, steps = calibrate(prepared, gpu, STEP_FIGURE, RoundSettings(max_time_s=1.0, min_rounds=5), [0.15] * 2)
    assert (step_s, steps, steps_run) == (0.15, 1, [])
    step_s, steps = calibrate(prepared, gpu, STEP_FIGURE, RoundSettings(max_time_s=1.0, min_rounds=5), [0.09] * 2)
    assert steps_run  # two of these fit in a round: the drain's cost decides
