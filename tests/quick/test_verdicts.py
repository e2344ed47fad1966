"""Judging one measurement (its runs) against its baseline entry (a history of runs).

The entries built here record every run at one moment (one session) unless told otherwise, so the noise's
standard error is the baseline's sd * sqrt(1 + 1/1) unless a test gives other `recorded_at` stamps.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest
from scipy.stats import t as student_t

from perfsuite.errors import REBASELINE_COMMAND
from perfsuite.judge.stats import DecisionConfig, Spread
from perfsuite.judge.verdicts import Verdict, judge
from perfsuite.records import BaselineEntry, Case, Measurement, Run, StoredRun
from perfsuite.render.verdicts import RECORD_COMMAND, verdict_message

CASE = Case(device="cpu", dtype="fp32", model="resnet18", batch_size=4, mode="train", profile="standard")
BENCHMARK_ID = "cpu-fp32-resnet18-bs4-train"
MACHINE = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "cpu_count": "2", "os": "Linux"}
# Run medians around 12 ms, spread 1% between processes. Five runs against five can reach p = 1/C(10, 5) = 1/252.
BASELINE_LOGS = (-0.01, 0.0, 0.01, -0.005, 0.005)
# Seven baseline runs, the fewest against which three current runs can reach p < 0.01 (1/C(10, 3) = 1/120).
SEVEN_LOGS = (-0.015, -0.01, -0.005, 0.0, 0.005, 0.01, 0.015)


def run(median_s: float, memory_bytes: int | None = 500_000_000, **changes) -> Run:
    fields = dict(
        case=CASE, round_times_s=(median_s * 0.99, median_s, median_s * 1.01), samples_per_step=4,
        flops_per_step=None, memory_figure="cpu_peak_rss_bytes", memory_bytes=memory_bytes,
        config_digest="a1b2c3d4e5f6", torch_version="2.13.0", threads=2,
    )
    fields.update(changes)
    return Run(**fields)


def measurement(scale: float = 1.0, logs=BASELINE_LOGS, **changes) -> Measurement:
    """Runs whose medians are 12 ms * scale * exp(log) for each log."""
    return Measurement(CASE, tuple(run(0.012 * scale * math.exp(x), **changes) for x in logs))


def session_standard_error(sd: float, sessions: int) -> float:
    """The standard error of one new session's log median against `sessions` recorded ones: its runs share
    the machine's state, so the session is one draw whatever its process count."""
    return sd * math.sqrt(1 + 1 / sessions)


def baseline(
    logs=BASELINE_LOGS, memory_bytes: int | None = 500_000_000, recorded_at: tuple[str, ...] | None = None, **changes
) -> BaselineEntry:
    """An entry whose run medians are 12 ms * exp(log) for each log, all recorded at one moment unless
    `recorded_at` gives each run's stamp."""
    stamps = recorded_at if recorded_at is not None else ("2026-12-02T15:00:00Z",) * len(logs)
    stored = tuple(
        StoredRun(
            median_s=0.012 * math.exp(x), rounds=3, round_times_s=(0.012 * math.exp(x),) * 3,
            memory_bytes=memory_bytes, recorded_at=stamp, commit="abc1234",
        )
        for x, stamp in zip(logs, stamps, strict=True)
    )
    fields = dict(
        case=CASE, config_digest="a1b2c3d4e5f6", torch_version="2.13.0", threads=2, machine=dict(MACHINE),
        memory_figure="cpu_peak_rss_bytes", samples_per_step=4, flops_per_step=None, gpu_busy_fraction=None,
        tolerance=0.10, memory_tolerance=0.10, runs=stored,
    )
    fields.update(changes)
    return BaselineEntry(**fields)


# --- no baseline -----------------------------------------------------------------------------------------


def test_no_baseline_is_shown_and_not_gated():
    verdict = judge(measurement(), None, MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("no-baseline", False)


def test_no_baseline_names_where_it_looked_and_how_to_record_one():
    verdict = judge(measurement(), None, MACHINE, baseline_source="baselines/cpu/amd-epyc-7763.json")
    assert "no baseline in baselines/cpu/amd-epyc-7763.json" in verdict_message(verdict)
    assert f"`{RECORD_COMMAND}`" in verdict_message(verdict)


# --- incompatible ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry_changes, reason",
    [
        ({"machine": {**MACHINE, "cpu_model": "Intel Xeon"}},
         "machine cpu_model: baseline 'Intel Xeon', current 'AMD EPYC 7763 64-Core Processor'"),
        ({"config_digest": "ffffffffffff"}, "config_digest: baseline 'ffffffffffff', current 'a1b2c3d4e5f6'"),
        ({"torch_version": "2.12.0"}, "torch_version: baseline '2.12.0', current '2.13.0'"),
        ({"threads": 8}, "threads: baseline 8, current 2"),
    ],
    ids=["machine", "config_digest", "torch_version", "threads"],
)
def test_a_baseline_of_another_setting_is_incompatible_and_says_why(entry_changes, reason):
    verdict = judge(measurement(), baseline(**entry_changes), MACHINE)
    assert (verdict.status, verdict.reasons) == ("incompatible", (reason,))
    assert reason in verdict_message(verdict)


def test_a_machine_fact_missing_on_one_side_is_a_reason():
    current_machine = {**MACHINE, "memory_gib": "24"}
    verdict = judge(measurement(), baseline(), current_machine)
    assert verdict.reasons == ("machine memory_gib: baseline None, current '24'",)


def test_a_baseline_with_unknown_threads_is_compared_whatever_the_threads():
    assert judge(measurement(), baseline(threads=None), MACHINE).status == "unchanged"


def test_a_case_changed_against_its_history_fails_the_gate_by_default_even_when_as_fast():
    verdict = judge(measurement(), baseline(torch_version="2.12.0"), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("incompatible", True)


def test_a_changed_case_is_only_a_warning_when_changes_do_not_fail():
    verdict = judge(measurement(scale=3.0), baseline(torch_version="2.12.0"), MACHINE, change_fails=False)
    assert (verdict.status, verdict.gate_failed) == ("incompatible", False)
    assert "a warning (--perf-on-change warn)" in verdict_message(verdict)


def test_a_changed_parameter_count_is_named_with_both_counts():
    verdict = judge(measurement(parameter_count=19_146), baseline(parameter_count=18_122), MACHINE)
    assert "parameter_count: baseline 18122, current 19146" in verdict.reasons


def test_a_changed_verdict_says_changed_and_offers_rebaseline_and_ab():
    verdict = judge(measurement(scale=1.5), baseline(torch_version="2.12.0"), MACHINE)
    message = verdict_message(verdict)
    assert verdict.ratio == pytest.approx(1.5)
    assert "changed against its history" in message and "fails the gate" in message
    assert "x1.500" in message
    assert f"`{REBASELINE_COMMAND}`" in message
    assert "`pytest --benchmark-only --perf-ab merge-base`" in message


def test_the_record_hint_records_enough_processes_to_calibrate_the_gate():
    assert "--perf-processes 3" in RECORD_COMMAND


# --- time outcomes ------------------------------------------------------------------------------------------


def test_an_unchanged_measurement_passes():
    verdict = judge(measurement(scale=1.02), baseline(), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("unchanged", False)


def test_a_regression_fails_the_gate():
    verdict = judge(measurement(scale=1.3), baseline(), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("regressed", True)


def test_an_improvement_passes():
    verdict = judge(measurement(scale=0.7), baseline(), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("improved", False)


def test_a_regression_message_names_the_id_the_ratio_the_runs_and_the_floor():
    verdict = judge(measurement(scale=1.3), baseline(), MACHINE)
    assert verdict_message(verdict).startswith(f"{BENCHMARK_ID} regressed: median 12 ms -> 15.6 ms")
    assert f"(x{verdict.ratio:.3f}, 5 run(s) vs 5 baseline run(s))" in verdict_message(verdict)
    assert "x1.300" in verdict_message(verdict)
    assert re.search(r"detects >= [\d.]+% here", verdict_message(verdict))


def test_a_regression_message_gives_the_band_and_the_p_value():
    # Every current run slower than every baseline run: the exact p is the smallest, 1/252 = 0.004.
    verdict = judge(measurement(scale=1.3), baseline(), MACHINE)
    assert "slower beyond the band 1.1 with p = 0.004 < 0.01 (CI [" in verdict_message(verdict)


def test_a_regression_message_gives_the_floor_of_one_session_against_the_baselines():
    # The baseline's squares 0.00025 on 4 df: sd sqrt(0.00025 / 4), one recording session: se = sd * sqrt(2).
    # The alarm t_0.99 * se (0.042) is under log(1.1), so the band dominates and t_0.95 * se comes on top.
    se = session_standard_error(math.sqrt(0.00025 / 4), 1)
    assert student_t.ppf(0.99, 4) * se < math.log(1.10)
    floor = math.expm1(math.log(1.10) + student_t.ppf(0.95, 4) * se)
    verdict = judge(measurement(scale=1.3), baseline(), MACHINE)
    assert verdict.detectable_slowdown == pytest.approx(floor)
    assert verdict_message(verdict).endswith(f"; detects >= {floor * 100:.3g}% here")


def test_the_verdict_carries_the_figures_of_the_comparison():
    verdict = judge(measurement(scale=1.3, logs=(-0.01, 0.0, 0.01)), baseline(logs=SEVEN_LOGS), MACHINE)
    assert (verdict.status, verdict.current_runs, verdict.baseline_runs) == ("regressed", 3, 7)
    assert verdict.ratio == pytest.approx(1.3)
    assert verdict.ci_low < 1.3 < verdict.ci_high
    assert verdict.p_value == pytest.approx(1 / math.comb(10, 3))
    assert verdict.processes_needed == 3


def test_the_p_value_of_an_improvement_is_the_faster_sides():
    verdict = judge(measurement(scale=0.7), baseline(), MACHINE)
    assert verdict.p_value == pytest.approx(1 / math.comb(10, 5))
    assert "faster beyond the band 0.9 with p = 0.004 < 0.01" in verdict_message(verdict)


def test_the_verdict_shows_the_medians_of_run_medians():
    verdict = judge(measurement(scale=1.3), baseline(), MACHINE)
    assert (verdict.baseline_median_s, verdict.current_median_s) == (pytest.approx(0.012), pytest.approx(0.0156))


def test_a_noisy_machine_spread_keeps_a_steady_case_from_failing_on_a_change_the_noise_explains():
    # The rank test sees three runs all slower than seven; the machine's spread (the baseline's 0 on 6 df filled
    # up to 10 df with prior_runs=10: sqrt(0.09 * 4 / 10) = 19% on 10 df, one session) puts the noise's 1% alarm level
    # t_0.99 * 0.19 * sqrt(2) = 0.74 above log(1.2), so the case is not failed, and the floor says so.
    current, entry = measurement(scale=1.2, logs=(0.0,) * 3), baseline(logs=(0.0,) * 7)
    alone = judge(current, entry, MACHINE)
    shrunk = judge(current, entry, MACHINE, machine_spread=Spread(0.3, 50), config=DecisionConfig(prior_runs=10))
    assert (alone.status, shrunk.status) == ("regressed", "unchanged")
    assert shrunk.p_value == pytest.approx(1 / math.comb(10, 3))
    assert alone.detectable_slowdown == pytest.approx(0.10)
    se = session_standard_error(math.sqrt(0.036), 1)
    assert student_t.ppf(0.99, 10) * se > math.log(1.2)
    noise = math.expm1((student_t.ppf(0.99, 10) + student_t.ppf(0.95, 10)) * se)
    assert shrunk.detectable_slowdown == pytest.approx(noise)
    assert "the noise floor is above the 10% band: this machine's runs scatter by 19% (sd); " in verdict_message(shrunk)
    assert "noise floor" not in verdict_message(alone)


def test_the_tolerance_given_is_the_band_applied():
    verdict = judge(measurement(scale=1.3), baseline(), MACHINE, tolerance=0.40)
    assert (verdict.status, verdict.tolerance) == ("unchanged", 0.40)


@pytest.mark.parametrize("keyword", ["tolerance", "memory_tolerance"])
def test_a_band_of_ten_is_refused_naming_the_benchmark(keyword):
    with pytest.raises(ValueError, match=f"^{BENCHMARK_ID}: "):
        judge(measurement(), baseline(), MACHINE, **{keyword: 10})


def test_a_noisy_case_says_no_process_count_lowers_its_floor():
    # The baseline's squares 0.025 on 9 df: sd 5.27%; one session: (t_0.99 + t_0.95 on 9 df) * sd * sqrt(2)
    # = 0.35 above log(1.1). Three processes or fifteen, the floor is the same and none is suggested.
    sd = math.sqrt(0.025 / 9)
    floor = math.expm1((student_t.ppf(0.99, 9) + student_t.ppf(0.95, 9)) * session_standard_error(sd, 1))
    entry = baseline(logs=(-0.05, 0.05) * 5)
    few = judge(measurement(logs=(-0.05, 0.0, 0.05)), entry, MACHINE)
    many = judge(measurement(logs=(-0.05, 0.0, 0.05) * 5), entry, MACHINE)
    assert many.current_runs == 15
    for verdict in (few, many):
        assert (verdict.status, verdict.processes_needed) == ("unchanged", None)
        assert verdict.detectable_slowdown == pytest.approx(floor)
        assert verdict_message(verdict).endswith(
            f"; detects >= {floor * 100:.3g}% here; the noise floor is above the 10% band: this machine's runs "
            "scatter by 5.27% (sd); no process count lowers it, since one session's runs share the machine's "
            "state: judge on a quieter runner, with --perf-threads 1 or longer runs (--benchmark-max-time 5), or "
            "give this case a wider band"
        )
    assert "--perf-processes" not in verdict_message(few)


def test_a_case_too_noisy_for_the_band_says_how_much_its_runs_scatter():
    # The baseline's squares 0.16 on 6 df: sd 16.3%, far beyond what a 10% band can hold.
    noisy = (-0.2, 0.0, 0.2)
    verdict = judge(measurement(logs=noisy), baseline(logs=noisy * 2 + (0.0,)), MACHINE)
    assert (verdict.status, verdict.processes_needed) == ("unchanged", None)
    assert f"{math.sqrt(0.16 / 6) * 100:.3g}" == "16.3"
    assert "the noise floor is above the 10% band: this machine's runs scatter by 16.3% (sd); " in verdict_message(
        verdict
    )


def test_a_case_whose_floor_is_under_the_band_has_no_advice():
    verdict = judge(measurement(scale=1.02), baseline(), MACHINE)
    assert "noise floor" not in verdict_message(verdict)
    assert "within the band +-10% or within the noise (CI [" in verdict_message(verdict)


def test_judge_counts_the_baselines_sessions_by_their_distinct_recording_stamps():
    # Nine runs recorded in three sessions of three processes (squares 0.0015 on 8 df): S = 3, so
    # se = sd * sqrt(1 + 1/3); the alarm t_0.99 * se is under log(1.1), and the floor is the band plus t_0.95 * se.
    # The same runs under one stamp count as one session, under nine stamps as nine.
    logs = (-0.02, -0.015, -0.01, -0.005, 0.0, 0.005, 0.01, 0.015, 0.02)
    sd = math.sqrt(0.0015 / 8)
    stamps = tuple(f"2026-12-0{day}T15:00:00Z" for day in (1, 2, 3) for _ in range(3))
    assert len(set(stamps)) == 3
    expected = {
        sessions: math.expm1(math.log(1.10) + student_t.ppf(0.95, 8) * session_standard_error(sd, sessions))
        for sessions in (1, 3, 9)
    }
    assert student_t.ppf(0.99, 8) * session_standard_error(sd, 1) < math.log(1.10)
    three = judge(measurement(), baseline(logs=logs, recorded_at=stamps), MACHINE)
    one = judge(measurement(), baseline(logs=logs), MACHINE)
    each_its_own = tuple(f"2026-12-02T15:0{i}:00Z" for i in range(9))
    nine = judge(measurement(), baseline(logs=logs, recorded_at=each_its_own), MACHINE)
    assert (three.status, three.baseline_runs) == ("unchanged", 9)
    assert three.detectable_slowdown == pytest.approx(expected[3], rel=1e-9)
    assert one.detectable_slowdown == pytest.approx(expected[1], rel=1e-9)
    assert nine.detectable_slowdown == pytest.approx(expected[9], rel=1e-9)
    assert nine.detectable_slowdown < three.detectable_slowdown < one.detectable_slowdown


# --- uncalibrated --------------------------------------------------------------------------------------------


def test_one_run_against_one_baseline_run_is_uncalibrated_and_not_gated():
    verdict = judge(measurement(scale=1.5, logs=(0.0,)), baseline(logs=(0.0,)), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("uncalibrated", False)
    assert (verdict.p_value, verdict.ci_low, verdict.ci_high) == (None, None, None)


def test_an_uncalibrated_message_says_why_and_asks_for_three_processes_against_seven_runs():
    # One run against one: the smallest p is 1/C(2, 1) = 0.5. Three processes need seven baseline runs
    # (C(10, 3) = 120 > 100 > C(9, 3) = 84): three recordings of three processes.
    verdict = judge(measurement(scale=1.5, logs=(0.0,)), baseline(logs=(0.0,)), MACHINE)
    assert verdict_message(verdict) == (
        f"{BENCHMARK_ID} uncalibrated: median 12 ms -> 18 ms (x1.500, 1 run(s) vs 1 baseline run(s)); "
        "uncalibrated: with these runs no p below 0.5 is possible, not the 0.01 the gate needs, so only a change "
        "x2 beyond the baseline's slowest run (and beyond the noise) is called; judge with --perf-processes 3 "
        "against >= 7 baseline runs "
        f"(`{RECORD_COMMAND}`, recorded 3 times)"
    )


def test_an_uncalibrated_message_keeps_more_processes_than_three():
    # Five runs against two: 1/C(7, 5) = 1/21 = 0.048. Five processes need four baseline runs
    # (C(9, 5) = 126 > 100 > C(8, 5) = 56): two recordings of three processes.
    verdict = judge(measurement(scale=1.5), baseline(logs=(-0.01, 0.01)), MACHINE)
    assert verdict.status == "uncalibrated"
    assert "no p below 0.048 is possible" in verdict_message(verdict)
    assert "judge with --perf-processes 5 against >= 4 baseline runs" in verdict_message(verdict)
    assert f"(`{RECORD_COMMAND}`, recorded 2 times)" in verdict_message(verdict)


def test_one_run_against_twenty_baseline_runs_nearly_twice_as_slow_is_uncalibrated():
    # The one run slower than all twenty gives p = 1/21 at best.
    logs = tuple(-0.02 + 0.04 * i / 19 for i in range(20))
    verdict = judge(measurement(scale=1.9, logs=(0.0,)), baseline(logs=logs), MACHINE)
    assert (verdict.status, verdict.gate_failed, verdict.p_value) == ("uncalibrated", False, None)
    assert "no p below 0.048 is possible" in verdict_message(verdict)


def test_an_uncalibrated_change_beyond_twice_as_slow_fails_the_gate():
    verdict = judge(measurement(scale=2.5, logs=(0.0,)), baseline(logs=(0.0,)), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("regressed", True)
    assert verdict_message(verdict).endswith(
        "(x2.500, 1 run(s) vs 1 baseline run(s)); x2 beyond the baseline's slowest run, called although the runs "
        "are too few to calibrate the test"
    )


def test_one_run_against_twenty_baseline_runs_beyond_twice_as_slow_fails_the_gate():
    logs = tuple(-0.02 + 0.04 * i / 19 for i in range(20))
    verdict = judge(measurement(scale=2.5, logs=(0.0,)), baseline(logs=logs), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("regressed", True)
    assert "x2 beyond the baseline's slowest run, called although the runs are too few to calibrate" in verdict_message(
        verdict
    )


def test_an_uncalibrated_change_beyond_twice_as_fast_is_improved_and_passes():
    verdict = judge(measurement(scale=0.4, logs=(0.0,)), baseline(logs=(0.0,)), MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("improved", False)
    assert "x2 below the baseline's fastest run, called although the runs are too few to calibrate" in verdict_message(
        verdict
    )


# --- memory --------------------------------------------------------------------------------------------------


def test_memory_is_not_gated_without_the_cases_own_figure():
    # The runs measured 2x the memory, but no figure that belongs to the case alone was given.
    verdict = judge(measurement(memory_bytes=1_000_000_000), baseline(), MACHINE)
    assert (verdict.memory_status, verdict.gate_failed) == ("not-compared", False)


def test_a_memory_regression_fails_the_gate_when_the_time_is_unchanged():
    verdict = judge(measurement(), baseline(), MACHINE, current_memory_bytes=1_000_000_000)
    assert (verdict.status, verdict.memory_status, verdict.gate_failed) == ("unchanged", "regressed", True)
    assert verdict.memory_ratio == pytest.approx(2.0)


def test_a_memory_regression_message_names_the_figure_and_the_band():
    verdict = judge(measurement(), baseline(), MACHINE, current_memory_bytes=1_000_000_000)
    assert "memory regressed: cpu_peak_rss_bytes 477 MiB -> 954 MiB (x2.000, above the band 1.1)" in verdict_message(
        verdict
    )


def test_memory_within_its_band_is_unchanged():
    verdict = judge(measurement(), baseline(), MACHINE, current_memory_bytes=520_000_000)
    assert verdict.memory_status == "unchanged"


def test_memory_is_compared_with_the_memory_band_not_the_time_band():
    verdict = judge(measurement(), baseline(), MACHINE, memory_tolerance=0.5, current_memory_bytes=700_000_000)
    assert verdict.memory_status == "unchanged"


def test_different_memory_figures_are_not_compared_and_say_so():
    verdict = judge(
        measurement(), baseline(memory_figure="mps_driver_allocated_bytes"), MACHINE, current_memory_bytes=10**10
    )
    assert verdict.memory_status == "not-compared"
    assert verdict.notes == ("memory figures differ: baseline mps_driver_allocated_bytes, current cpu_peak_rss_bytes",)


# --- launch-bound and the JSON form ----------------------------------------------------------------------------


@pytest.mark.parametrize("busy, launch_bound", [(0.3, True), (0.5, False), (0.9, False), (None, False)])
def test_launch_bound_means_under_half_the_step_in_gpu_kernels(busy, launch_bound):
    verdict = judge(measurement(gpu_busy_fraction=busy), baseline(), MACHINE)
    assert verdict.launch_bound is launch_bound


def test_to_dict_holds_every_field_and_the_derived_flags():
    verdict = judge(measurement(scale=1.3, gpu_busy_fraction=0.3), baseline(), MACHINE)
    document = verdict.to_dict()
    field_names = {f.name for f in dataclasses.fields(Verdict)}
    assert set(document) == field_names | {"gate_failed", "launch_bound"}
    assert (document["gate_failed"], document["launch_bound"]) == (True, True)


def test_to_dict_is_json_ready():
    verdict = judge(measurement(), baseline(torch_version="2.12.0"), MACHINE)
    document = json.loads(json.dumps(verdict.to_dict(), allow_nan=False))
    assert document["reasons"] == ["torch_version: baseline '2.12.0', current '2.13.0'"]
