"""The A/B decision on made-up window pairs: the estimate, the interval over process pairs, the family correction,
the floor, and each status with its sentence."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsuite.judge.ab import AbVerdict, judge_ab, pair_estimate, t_quantile
from perfsuite.records import AbMeasurement, AbPair, AbSide, Case, Run
from perfsuite.render.ab import ab_message, outcome_line, render_table, summary_document

CASE = Case("cpu", "fp32", "resnet18", 4, "infer", "smoke")


def run(memory_bytes: int | None = None) -> Run:
    return Run(CASE, (0.01,), 4, None, "cuda_max_allocated_bytes", memory_bytes, "abc", "2.13.0", 1, 10)


def measured(ratios_by_pair: list[list[float]], base_s: float = 0.01, base_memory: int | None = None,
             head_memory: int | None = None) -> AbMeasurement:
    pairs = tuple(
        AbPair(tuple((base_s, base_s * ratio) for ratio in ratios), run(base_memory), run(head_memory), 1.0, 1.0)
        for ratios in ratios_by_pair
    )
    return AbMeasurement(CASE, pairs, 0.0)


def noisy(rng: random.Random, ratio: float, pairs: int, windows: int, offset_sd: float, window_sd: float):
    result = []
    for _ in range(pairs):
        offset = rng.gauss(0, offset_sd)
        result.append([ratio * math.exp(offset + rng.gauss(0, window_sd)) for _ in range(windows)])
    return result


def test_a_pair_estimate_is_the_median_window_log_ratio_so_one_hit_window_does_not_move_it():
    windows = [(1.0, 1.1)] * 6 + [(1.0, 5.0)]
    assert pair_estimate(windows) == pytest.approx(math.log(1.1))


def test_the_interval_is_student_t_over_pair_estimates_simultaneous_over_the_matrix():
    ratios = [[1.02] * 4, [1.04] * 4, [1.00] * 4, [1.06] * 4]
    verdict = judge_ab(measured(ratios), [], tolerance=0.10, memory_tolerance=0.10, family_size=8)
    logs = [math.log(r[0]) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = t_quantile(4, 8) * sd / 2
    assert verdict.ratio == pytest.approx(math.exp(mean))
    assert (verdict.ci_low, verdict.ci_high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert verdict.floor == pytest.approx(math.expm1(half))
    assert t_quantile(4, 8) > t_quantile(4, 1) > 3.18  # 8 cases widen each case's interval


def test_a_slowdown_beyond_the_band_with_its_interval_above_one_is_regressed_and_fails():
    verdict = judge_ab(measured([[1.30, 1.31]] * 2 + [[1.29, 1.30]] * 2), [], 0.10, 0.10, family_size=2)
    assert verdict.status == "regressed" and verdict.gate_failed
    assert "regressed: head is slower than base beyond the band" in ab_message(verdict)


def test_a_speed_up_beyond_the_band_is_improved_and_does_not_fail():
    verdict = judge_ab(measured([[0.70, 0.71], [0.69, 0.70], [0.70, 0.70]]), [], 0.10, 0.10, family_size=1)
    assert verdict.status == "improved" and not verdict.gate_failed


def test_a_change_inside_the_band_is_unchanged_even_when_the_interval_excludes_one():
    verdict = judge_ab(measured([[1.05, 1.05], [1.051, 1.05], [1.049, 1.05]]), [], 0.10, 0.10, family_size=1)
    assert verdict.ci_low is not None and verdict.ci_low > 1
    assert verdict.status == "unchanged"


def test_a_floor_wider_than_the_band_is_inconclusive_never_unchanged():
    verdict = judge_ab(measured([[0.8] * 3, [1.3] * 3, [1.0] * 3]), [], 0.10, 0.10, family_size=1)
    assert verdict.floor is not None and verdict.floor > 0.10
    assert verdict.status == "inconclusive" and not verdict.gate_failed
    assert verdict.fails_job() and not verdict.fails_job(inconclusive_fails=False)
    assert "could not tell a change of the band's size from noise, so it fails" in ab_message(verdict)
    assert "is only a warning" in ab_message(verdict, inconclusive_fails=False)


@pytest.mark.parametrize("statuses, line", [
    (["unchanged", "unchanged"], "perfsuite A/B passed: 2 unchanged"),
    (["inconclusive", "unchanged"], "perfsuite A/B FAILED: 1 unchanged, 1 inconclusive"),
    (["improved"], "perfsuite A/B passed: 1 improved"),
    (["errored", "regressed"], "perfsuite A/B FAILED: 1 regressed, 1 errored"),
])
def test_the_outcome_line_fails_on_a_regression_an_error_or_a_verdict_that_cannot_judge(statuses, line):
    verdicts = [replace(judge_ab(measured([[1.0] * 3] * 3), [], 0.10, 0.10, family_size=1), status=status)
                for status in statuses]
    assert outcome_line(verdicts) == line
    if "inconclusive" in statuses and "regressed" not in statuses and "errored" not in statuses:
        assert outcome_line(verdicts, inconclusive_fails=False).startswith("perfsuite A/B passed")


def test_fewer_than_two_pairs_or_a_failed_side_is_errored_with_the_reason():
    one = judge_ab(measured([[1.5] * 4]), [], 0.10, 0.10, family_size=1)
    assert one.status == "errored" and "an interval needs at least 2" in one.reasons[0]
    failed = judge_ab(measured([[1.0] * 4] * 3), ["base side: out of memory"], 0.10, 0.10, family_size=1)
    assert failed.status == "errored" and failed.reasons == ("base side: out of memory",)
    assert "A/B could not judge it: base side: out of memory" in ab_message(failed)


def test_memory_is_compared_per_side_where_the_figure_is_the_cases_own():
    grown = judge_ab(measured([[1.0] * 3] * 3, base_memory=100, head_memory=150), [], 0.10, 0.10, family_size=1)
    assert grown.memory_status == "regressed" and grown.gate_failed and grown.status == "unchanged"
    same = judge_ab(measured([[1.0] * 3] * 3, base_memory=100, head_memory=105), [], 0.10, 0.10, family_size=1)
    assert same.memory_status == "unchanged" and not same.gate_failed


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pairs=st.integers(3, 8), family=st.integers(1, 16))
def test_a_false_alarm_needs_the_estimate_beyond_the_band(seed, pairs, family):
    """Whatever the noise, a case with no change is never `regressed` unless its estimate left the band."""
    rng = random.Random(seed)
    verdict = judge_ab(measured(noisy(rng, 1.0, pairs, 6, 0.03, 0.05)), [], 0.10, 0.10, family_size=family)
    assert verdict.status != "regressed" or (verdict.ratio is not None and verdict.ratio > 1.10)


def test_the_rule_calls_unchanged_matrices_unchanged_and_sees_a_30_percent_slowdown():
    """Simulated jobs with a process offset sd of 2% and window noise of 5% (this VM's order), 6 pairs, 2 cases:
    no false alarm in 200 unchanged matrices; x1.3 caught in every one of 200."""
    rng = random.Random(7)
    false_alarms = sum(
        any(judge_ab(measured(noisy(rng, 1.0, 6, 8, 0.02, 0.05)), [], 0.10, 0.10, 2).status == "regressed"
            for _ in range(2))
        for _ in range(200)
    )
    caught = sum(
        judge_ab(measured(noisy(rng, 1.3, 6, 8, 0.02, 0.05)), [], 0.10, 0.10, 2).status == "regressed"
        for _ in range(200)
    )
    assert false_alarms <= 2 and caught == 200


def test_the_table_and_the_summary_document_carry_the_verdict():
    verdict: AbVerdict = judge_ab(measured([[1.3] * 3] * 3), [], 0.10, 0.10, family_size=1)
    measurement = measured([[1.3] * 3] * 3)
    table = render_table([verdict], {CASE.benchmark_id: measurement})
    assert CASE.benchmark_id in table and "regressed" in table and "10" in table
    side = AbSide("main", "abc", "/usr/bin/python3", "2.13.0")
    document = summary_document([verdict], {CASE.benchmark_id: measurement}, side, side, "2026-12-05T00:00:00Z")
    (case,) = document["cases"]
    assert document["schema"] == "perfsuite-ab" and case["status"] == "regressed"
    assert case["ratio"] == pytest.approx(1.3) and len(case["process_pairs"]) == 3
