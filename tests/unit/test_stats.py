"""The regression decision on run medians: a one-sided Mann-Whitney test on the runs and a band on the ratio
of medians, both needed; a comparison whose run counts cannot reach the test's level calls only a change
beyond x2.

Expected values are worked out here, not taken from the module: exact p-values by counting every way the
current runs' ranks can fall among all runs, the smallest p by `math.comb`, the floors from the documented
formula with Student-t quantiles.
"""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from scipy.stats import mannwhitneyu
from scipy.stats import t as student_t

from perfsuite.judge.stats import (
    MAX_SUGGESTED_PROCESSES,
    DecisionConfig,
    Spread,
    asv_fails,
    baseline_runs_needed,
    combined_spread,
    compare_memory,
    compare_runs,
    processes_needed,
    pytest_benchmark_fails,
    smallest_p_value,
    within_spread,
)

CONFIG = DecisionConfig()


def runs(*logs: float, scale_s: float = 0.010) -> list[float]:
    """Run medians in seconds whose logarithms are log(scale_s) + `logs`."""
    return [scale_s * math.exp(x) for x in logs]


def shifted(log_shift: float, logs=(-0.1, 0.0, 0.1)) -> list[float]:
    return runs(*(x + log_shift for x in logs))


# Seven baseline runs, the fewest against which three current runs can reach p < 0.01 (C(10, 3) = 120).
BASELINE_LOGS = (-0.15, -0.10, -0.05, 0.0, 0.05, 0.10, 0.15)
BASELINE = runs(*BASELINE_LOGS)
# Squares about the mean: 0.07 over 6 degrees of freedom for the baseline, 0.02 over 2 for (-0.1, 0, 0.1).
POOLED_SD = math.sqrt((0.07 + 0.02) / 8)


def exact_p_values(current: list[float], baseline: list[float]) -> tuple[float, float]:
    """(p slower, p faster) of the exact one-sided rank test, by counting every way of placing the current
    runs' ranks among all runs: the share of placements whose rank sum is >= (<=) the observed one."""
    pooled = sorted(current + baseline)
    assert len(set(pooled)) == len(pooled), "the count assumes no ties"
    observed = sum(pooled.index(x) + 1 for x in current)
    sums = [sum(ranks) for ranks in itertools.combinations(range(1, len(pooled) + 1), len(current))]
    return sum(s >= observed for s in sums) / len(sums), sum(s <= observed for s in sums) / len(sums)


def standard_error(sd: float, current: int, baseline: int) -> float:
    """The rank test's standard error of a log ratio: the t-test's over the square root of the Mann-Whitney
    test's asymptotic relative efficiency 3 / pi."""
    return sd * math.sqrt(1 / current + 1 / baseline) / math.sqrt(3 / math.pi)


def noise_floor_log(sd: float, df: int, current: int, baseline: int) -> float:
    return (student_t.ppf(0.99, df) + student_t.ppf(0.95, df)) * standard_error(sd, current, baseline)


def fewest_processes(sd: float, df: int, baseline: int, tolerance: float, limit: int) -> int | None:
    """By brute force: the fewest K <= limit with more than 100 rank arrangements (p < 0.01 reachable) and a
    noise floor under the band."""
    for current in range(1, limit + 1):
        if math.comb(current + baseline, current) > 100 and noise_floor_log(sd, df, current, baseline) <= math.log(
            1 + tolerance
        ):
            return current
    return None


# --- the smallest p a rank test can give, and the baseline runs it takes -------------------------------------


@pytest.mark.parametrize(
    "current, baseline, arrangements",
    # Ways to choose which of n + K ranks are the current runs': 1 + 1, 20 + 1, (15 * 14) / 2, (10 * 9 * 8) / 6,
    # (9 * 8 * 7 * 6) / 24, (8 * 7 * 6) / 6.
    [(1, 1, 2), (1, 20, 21), (2, 13, 105), (3, 7, 120), (4, 5, 126), (3, 5, 56)],
)
def test_the_smallest_p_value_is_one_over_the_number_of_rank_arrangements(current, baseline, arrangements):
    assert math.comb(current + baseline, current) == arrangements
    assert smallest_p_value(current, baseline) == pytest.approx(1 / arrangements)


def test_the_smallest_p_value_is_what_the_exact_test_gives_fully_separated_runs():
    current, baseline = shifted(1.0), BASELINE
    assert exact_p_values(current, baseline)[0] == pytest.approx(1 / 120)
    assert mannwhitneyu(current, baseline, alternative="greater").pvalue == pytest.approx(smallest_p_value(3, 7))


@pytest.mark.parametrize(
    "current, needed",
    [
        (1, 100),  # 1 / (n + 1) < 0.01 needs n + 1 > 100; n = 99 gives exactly 0.01, not below it.
        (2, 13),  # C(15, 2) = 105 > 100, C(14, 2) = 91.
        (3, 7),  # C(10, 3) = 120 > 100, C(9, 3) = 84.
        (4, 5),  # C(9, 4) = 126 > 100, C(8, 4) = 70.
    ],
)
def test_baseline_runs_needed_is_the_fewest_with_more_than_a_hundred_arrangements(current, needed):
    assert baseline_runs_needed(current, 0.01) == needed


def test_one_process_needs_a_hundred_baseline_runs_as_exactly_one_percent_is_not_below_it():
    assert smallest_p_value(1, 99) == pytest.approx(0.01)
    assert smallest_p_value(1, 100) < 0.01


def test_baseline_runs_needed_follows_the_false_alarm_rate():
    # 1 / (n + 1) < 0.05 needs n + 1 > 20; C(3 + 3, 3) = 20 is not enough, C(7, 3) = 35 is.
    assert (baseline_runs_needed(1, 0.05), baseline_runs_needed(3, 0.05)) == (20, 4)


# --- outcomes ------------------------------------------------------------------------------------------------


def test_a_clear_slowdown_beyond_the_band_is_regressed():
    comparison = compare_runs(shifted(math.log(1.5)), BASELINE, 0.10)
    assert (comparison.outcome, comparison.calibrated) == ("regressed", True)
    assert comparison.ratio == pytest.approx(1.5)
    assert comparison.p_value_slower == pytest.approx(1 / math.comb(10, 3))


def test_a_clear_speedup_beyond_the_band_is_improved():
    comparison = compare_runs(shifted(math.log(0.6)), BASELINE, 0.10)
    assert (comparison.outcome, comparison.ratio) == ("improved", pytest.approx(0.6))
    assert comparison.p_value_faster == pytest.approx(1 / math.comb(10, 3))


def test_the_same_runs_are_unchanged():
    comparison = compare_runs(BASELINE, BASELINE, 0.10)
    assert (comparison.outcome, comparison.calibrated, comparison.ratio) == ("unchanged", True, pytest.approx(1.0))
    # U is exactly its null mean K * n / 2, so either tail holds more than half the arrangements.
    assert comparison.p_value_slower > 0.5 and comparison.p_value_faster > 0.5


def test_the_ratio_is_the_ratio_of_the_medians_not_of_the_geometric_means():
    # Medians 20 ms and 10 ms; the geometric means, 58.5 ms and 13.9 ms, would give x4.2.
    comparison = compare_runs([0.010, 0.020, 1.000], [0.009, 0.010, 0.030], 0.10)
    assert comparison.ratio == pytest.approx(2.0)


def test_with_an_even_count_the_median_is_the_mean_of_the_two_middle_runs():
    # The median of 10 ms and 20 ms is 15 ms, as the verdict shows it (the mean of their logs would give 14.1 ms).
    comparison = compare_runs([0.030], [0.010, 0.020], 0.10)
    assert comparison.ratio == pytest.approx(2.0)


def test_the_comparison_counts_the_runs_of_each_side():
    comparison = compare_runs(runs(0.0, 0.01), runs(0.0, 0.01, 0.02, 0.03), 0.10)
    assert (comparison.current_runs, comparison.baseline_runs) == (2, 4)


def test_a_significant_slowdown_inside_the_band_is_unchanged():
    # 5% slower and every current run slower than every baseline run (the smallest p, 1/120), but the band is 10%.
    logs = (-0.003, -0.002, -0.001, 0.0, 0.001, 0.002, 0.003)
    comparison = compare_runs(shifted(math.log(1.05), (-0.001, 0.0, 0.001)), runs(*logs), 0.10)
    assert comparison.p_value_slower == pytest.approx(1 / 120)
    assert comparison.outcome == "unchanged"


def test_a_slowdown_beyond_the_band_that_is_not_significant_is_unchanged():
    # 30% slower in the median, but the runs scatter by a factor of two and their ranks interleave.
    current, baseline = shifted(math.log(1.3), (-0.7, 0.0, 0.7)), runs(-0.7, -0.45, -0.2, 0.0, 0.2, 0.45, 0.7)
    comparison = compare_runs(current, baseline, 0.10)
    expected_slower, _ = exact_p_values(current, baseline)
    assert comparison.ratio == pytest.approx(1.3)
    assert comparison.p_value_slower == pytest.approx(expected_slower)
    assert expected_slower > 0.1
    assert comparison.outcome == "unchanged"


def test_a_significant_speedup_inside_the_band_is_unchanged():
    logs = (-0.003, -0.002, -0.001, 0.0, 0.001, 0.002, 0.003)
    comparison = compare_runs(shifted(math.log(0.95), (-0.001, 0.0, 0.001)), runs(*logs), 0.10)
    assert comparison.p_value_faster == pytest.approx(1 / 120)
    assert comparison.outcome == "unchanged"


def test_identical_runs_on_each_side_call_any_change_beyond_the_band():
    current, baseline = runs(0.0, 0.0, 0.0, scale_s=0.012), runs(*(0.0,) * 7)
    comparison = compare_runs(current, baseline, 0.10)
    # Only the arrangement with all three current runs on top gives U = 3 * 7: exactly 1/120, or less with
    # scipy's tie-corrected normal approximation.
    assert comparison.p_value_slower <= 1 / 120 + 1e-12
    assert comparison.outcome == "regressed"


def test_identical_runs_on_each_side_have_the_band_as_their_floor():
    comparison = compare_runs(runs(0.0, 0.0, 0.0, scale_s=0.0105), runs(*(0.0,) * 7), 0.10)
    assert (comparison.detectable_slowdown, comparison.noise_slowdown) == (pytest.approx(0.10), pytest.approx(0.0))


def test_p_values_are_the_exact_one_sided_rank_test_on_the_run_medians():
    # Current ranks 5, 8 and 10 among the ten runs.
    current = runs(0.02, 0.12, 0.17)
    comparison = compare_runs(current, BASELINE, 0.10)
    expected_slower, expected_faster = exact_p_values(current, BASELINE)
    assert (comparison.p_value_slower, comparison.p_value_faster) == (
        pytest.approx(expected_slower), pytest.approx(expected_faster),
    )
    assert 0.01 < expected_slower < 0.5 < expected_faster


def test_a_heavy_tailed_baseline_with_one_slow_run_does_not_make_typical_runs_regressed():
    # Six baseline runs near 10 ms and one four times slower; three current runs among the six typical ones.
    baseline = runs(-0.03, -0.02, -0.01, 0.0, 0.01, 0.02, math.log(4.0))
    current = runs(-0.015, 0.005, 0.015)
    comparison = compare_runs(current, baseline, 0.10)
    expected_slower, expected_faster = exact_p_values(current, baseline)
    # The baseline's median is its fourth run (log 0.0), whatever the slow run's size; the geometric means
    # would give x0.82, an improvement beyond the band.
    assert comparison.ratio == pytest.approx(math.exp(0.005))
    assert (comparison.p_value_slower, comparison.p_value_faster) == (
        pytest.approx(expected_slower), pytest.approx(expected_faster),
    )
    assert comparison.outcome == "unchanged"


def test_one_slow_run_among_three_current_runs_is_not_a_regression():
    # Two current runs at the baseline's typical speed and one four times slower: the median has not moved.
    current, baseline = runs(-0.005, 0.005, math.log(4.0)), runs(-0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03)
    comparison = compare_runs(current, baseline, 0.10, machine_spread=Spread(0.02, 50))
    assert comparison.ratio == pytest.approx(math.exp(0.005))
    assert comparison.outcome == "unchanged"


def test_the_interval_bounds_the_ratio_at_the_tests_level():
    comparison = compare_runs(shifted(0.2), BASELINE, 0.10)
    half_width = student_t.ppf(0.99, 8) * standard_error(POOLED_SD, 3, 7)
    assert (comparison.ci_low, comparison.ci_high) == (
        pytest.approx(math.exp(0.2 - half_width)), pytest.approx(math.exp(0.2 + half_width)),
    )


# --- calibrated or not ---------------------------------------------------------------------------------------


def test_three_runs_against_seven_are_calibrated():
    assert compare_runs(shifted(0.0), BASELINE, 0.10).calibrated is True


def test_three_runs_against_six_are_uncalibrated_even_when_every_one_is_slower():
    # 1 / C(9, 3) = 1/84 cannot go below 0.01: a 50% slowdown is not called.
    comparison = compare_runs(shifted(math.log(1.5)), BASELINE[:6], 0.10)
    assert (comparison.calibrated, comparison.outcome) == (False, "uncalibrated")


def test_a_larger_false_alarm_rate_calibrates_fewer_baseline_runs():
    # 1 / C(7, 3) = 1/35 is below 0.05, not below 0.01.
    current, baseline = shifted(math.log(1.5)), runs(-0.1, -0.03, 0.03, 0.1)
    strict = compare_runs(current, baseline, 0.10)
    lenient = compare_runs(current, baseline, 0.10, config=DecisionConfig(false_alarm_rate=0.05))
    assert (strict.outcome, lenient.outcome) == ("uncalibrated", "regressed")
    assert lenient.p_value_slower == pytest.approx(1 / 35)


def test_one_run_against_twenty_is_uncalibrated_even_when_it_is_nearly_twice_as_slow():
    # The one run slower than all twenty gives p = 1/21 at best.
    baseline = runs(*np.linspace(-0.05, 0.05, 20))
    comparison = compare_runs([0.019], baseline, 0.10, machine_spread=Spread(0.01, 50))
    assert (comparison.outcome, comparison.calibrated, comparison.p_value_slower) == ("uncalibrated", False, None)
    assert comparison.ratio == pytest.approx(0.019 / statistics.median(baseline))
    assert comparison.ratio == pytest.approx(1.9, abs=1e-4)


def test_one_run_against_twenty_is_regressed_beyond_twice_as_slow():
    baseline = runs(*np.linspace(-0.05, 0.05, 20))
    comparison = compare_runs([0.025], baseline, 0.10)
    assert (comparison.outcome, comparison.calibrated) == ("regressed", False)


def test_an_uncalibrated_comparison_with_a_spread_still_says_how_many_processes_would_do():
    baseline_logs = np.linspace(-0.05, 0.05, 20)
    comparison = compare_runs([0.019], runs(*baseline_logs), 0.10)
    sd = float(np.std(baseline_logs, ddof=1))
    assert (comparison.log_sd, comparison.degrees_of_freedom) == (pytest.approx(sd), 19)
    expected = fewest_processes(sd, 19, 20, 0.10, MAX_SUGGESTED_PROCESSES)
    # Two processes could reach p < 0.01 (C(22, 2) = 231) but leave the noise floor (0.101) above log(1.1).
    assert expected == 3
    assert comparison.processes_needed == expected


def test_one_run_each_side_with_no_machine_spread_is_uncalibrated():
    comparison = compare_runs([0.015], [0.010], 0.10)
    assert (comparison.outcome, comparison.calibrated) == ("uncalibrated", False)
    assert (comparison.log_sd, comparison.degrees_of_freedom, comparison.processes_needed) == (None, 0, None)


def test_uncalibrated_comparisons_have_no_p_value_and_no_interval():
    comparison = compare_runs(shifted(math.log(1.5)), BASELINE[:6], 0.10)
    assert (comparison.p_value_slower, comparison.p_value_faster) == (None, None)
    assert (comparison.ci_low, comparison.ci_high, comparison.noise_slowdown) == (None, None, None)


def test_uncalibrated_just_under_twice_as_slow_is_not_called():
    assert compare_runs([0.0199], [0.010], 0.10).outcome == "uncalibrated"


def test_uncalibrated_beyond_twice_as_slow_is_regressed():
    assert compare_runs([0.0201], [0.010], 0.10).outcome == "regressed"


def test_uncalibrated_just_under_twice_as_fast_is_not_called():
    assert compare_runs([0.0051], [0.010], 0.10).outcome == "uncalibrated"


def test_uncalibrated_beyond_twice_as_fast_is_improved():
    assert compare_runs([0.0049], [0.010], 0.10).outcome == "improved"


def test_uncalibrated_floor_is_the_factor_minus_one():
    assert compare_runs([0.010], [0.010], 0.10).detectable_slowdown == pytest.approx(1.0)
    assert compare_runs([0.010], [0.010], 0.10, config=DecisionConfig(uncalibrated_factor=3.0)).detectable_slowdown == (
        pytest.approx(2.0)
    )


def test_the_uncalibrated_factor_is_configurable():
    config = DecisionConfig(uncalibrated_factor=1.5)
    assert compare_runs([0.016], [0.010], 0.10, config=config).outcome == "regressed"
    assert compare_runs([0.016], [0.010], 0.10).outcome == "uncalibrated"


def test_a_machine_spread_does_not_calibrate_a_single_run_on_each_side():
    # The spread is known, but one run against one can give p = 1/2 at best.
    comparison = compare_runs([0.015], [0.010], 0.10, machine_spread=Spread(0.02, 40))
    assert (comparison.calibrated, comparison.outcome) == (False, "uncalibrated")
    assert (comparison.log_sd, comparison.degrees_of_freedom) == (pytest.approx(0.02), 4)


def test_with_no_prior_runs_the_machine_spread_is_not_borrowed():
    comparison = compare_runs([0.015], [0.010], 0.10, Spread(0.02, 40), DecisionConfig(prior_runs=0))
    assert (comparison.outcome, comparison.log_sd) == ("uncalibrated", None)


def test_several_runs_on_one_side_give_a_spread_but_do_not_calibrate_the_comparison():
    comparison = compare_runs([0.015], [0.0100, 0.0101, 0.0099], 0.10)
    assert (comparison.calibrated, comparison.degrees_of_freedom) == (False, 2)
    assert comparison.log_sd == pytest.approx(float(np.std(np.log([0.0100, 0.0101, 0.0099]), ddof=1)))


# --- the spread: within cases, shrunk toward the machine ------------------------------------------------


def test_within_spread_pools_the_squares_of_each_group_over_their_degrees_of_freedom():
    # Group logs {0, 0.2}: squares 0.02 on 1 df; {0.1, 0.3, 0.5}: 0.08 on 2 df; a single run adds nothing.
    spread = within_spread([runs(0.0, 0.2), runs(0.1, 0.3, 0.5), runs(3.0)])
    assert (spread.log_sd, spread.degrees_of_freedom) == (pytest.approx(math.sqrt(0.10 / 3)), 3)


def test_within_spread_does_not_depend_on_the_level_of_each_group():
    spread = within_spread([runs(0.0, 0.2, scale_s=1e-4), runs(0.0, 0.2, scale_s=10.0)])
    assert spread.log_sd == pytest.approx(math.sqrt(0.04 / 2))


def test_within_spread_of_single_runs_is_none():
    assert within_spread([[0.01], [0.02], [0.5]]) is None


def test_combined_spread_weights_the_machine_by_at_most_prior_runs_degrees_of_freedom():
    spread = combined_spread(Spread(0.1, 2), Spread(0.3, 100), prior_runs=4)
    assert (spread.log_sd, spread.degrees_of_freedom) == (pytest.approx(math.sqrt((0.01 * 2 + 0.09 * 4) / 6)), 6)


def test_combined_spread_weights_a_machine_with_few_degrees_of_freedom_by_those():
    spread = combined_spread(Spread(0.1, 2), Spread(0.3, 1), prior_runs=4)
    assert (spread.log_sd, spread.degrees_of_freedom) == (pytest.approx(math.sqrt((0.01 * 2 + 0.09 * 1) / 3)), 3)


def test_combined_spread_without_own_runs_is_the_machines():
    spread = combined_spread(None, Spread(0.3, 100), prior_runs=4)
    assert (spread.log_sd, spread.degrees_of_freedom) == (pytest.approx(0.3), 4)


def test_combined_spread_without_any_spread_is_none():
    assert combined_spread(None, None, prior_runs=4) is None


def test_the_spread_of_a_comparison_pools_both_sides():
    comparison = compare_runs(shifted(0.2), BASELINE, 0.10)
    assert (comparison.log_sd, comparison.degrees_of_freedom) == (pytest.approx(POOLED_SD), 8)


def test_a_noisier_machine_spread_widens_the_floor_of_a_steady_case_but_does_not_decide_it():
    # Alone, three identical runs against seven make a 20% slowdown certain, and so does the rank test with
    # the machine's 30% scatter: the spread only sets the floor and the interval.
    current, baseline = runs(0.0, 0.0, 0.0, scale_s=0.012), runs(*(0.0,) * 7)
    alone = compare_runs(current, baseline, 0.10)
    shrunk = compare_runs(current, baseline, 0.10, machine_spread=Spread(0.3, 50))
    assert (alone.outcome, shrunk.outcome) == ("regressed", "regressed")
    assert (shrunk.log_sd, shrunk.degrees_of_freedom) == (pytest.approx(math.sqrt(0.09 * 4 / 12)), 12)
    assert (alone.ci_low, alone.ci_high) == (pytest.approx(1.2), pytest.approx(1.2))
    half_width = student_t.ppf(0.99, 12) * standard_error(math.sqrt(0.03), 3, 7)
    assert shrunk.ci_low == pytest.approx(1.2 * math.exp(-half_width))
    assert shrunk.detectable_slowdown > alone.detectable_slowdown == pytest.approx(0.10)


def test_a_spread_needs_a_finite_non_negative_sd():
    with pytest.raises(ValueError, match="finite log_sd >= 0"):
        Spread(math.nan, 3)


# --- the detectable floor ---------------------------------------------------------------------------------


def test_detectable_slowdown_is_the_band_plus_the_power_margin_when_the_band_dominates():
    # Squares 0.0002 (2 df) and 0.0007 (6 df): sd 0.0106; the alarm t_0.99 * se (0.022) is under log(1.1)
    # (0.095), so the band sets the threshold and the power margin t_0.95 * se comes on top.
    sd = math.sqrt(0.0009 / 8)
    comparison = compare_runs(runs(-0.01, 0.0, 0.01), runs(-0.015, -0.01, -0.005, 0.0, 0.005, 0.01, 0.015), 0.10)
    assert student_t.ppf(0.99, 8) * standard_error(sd, 3, 7) < math.log(1.10)
    expected = math.expm1(math.log(1.10) + student_t.ppf(0.95, 8) * standard_error(sd, 3, 7))
    assert comparison.detectable_slowdown == pytest.approx(expected)
    assert comparison.detectable_slowdown == pytest.approx(0.1154, abs=5e-4)


def test_detectable_slowdown_is_the_noise_floor_when_noise_dominates():
    # sd 0.106 on 8 df: the alarm t_0.99 * se (0.217) exceeds log(1.1), so the floor is exp((t_0.99 + t_0.95) * se) - 1.
    comparison = compare_runs(shifted(0.0), BASELINE, 0.10)
    assert student_t.ppf(0.99, 8) * standard_error(POOLED_SD, 3, 7) > math.log(1.10)
    expected = math.expm1(noise_floor_log(POOLED_SD, 8, 3, 7))
    assert comparison.detectable_slowdown == pytest.approx(expected)
    assert comparison.detectable_slowdown == pytest.approx(0.428, abs=2e-3)


def test_noise_slowdown_is_the_floor_of_the_test_alone_without_the_band():
    sd = math.sqrt(0.0009 / 8)
    comparison = compare_runs(runs(-0.01, 0.0, 0.01), runs(-0.015, -0.01, -0.005, 0.0, 0.005, 0.01, 0.015), 0.10)
    assert comparison.noise_slowdown == pytest.approx(math.expm1(noise_floor_log(sd, 8, 3, 7)))


def test_the_power_in_the_config_sets_the_floor():
    comparison = compare_runs(shifted(0.0), BASELINE, 0.10, config=DecisionConfig(power=0.8))
    expected = (student_t.ppf(0.99, 8) + student_t.ppf(0.8, 8)) * standard_error(POOLED_SD, 3, 7)
    assert comparison.detectable_slowdown == pytest.approx(math.expm1(expected))


def test_more_runs_lower_the_floor():
    few = compare_runs(shifted(0.0), BASELINE, 0.10)
    many = compare_runs(shifted(0.0) * 3, BASELINE * 3, 0.10)
    assert many.detectable_slowdown < few.detectable_slowdown


# --- how many processes would calibrate the test and bring the noise floor under the band -----------------


def test_processes_needed_is_the_fewest_that_bring_the_noise_floor_under_the_band():
    # t_0.99 + t_0.95 on 20 df is 4.25: 4.25 * 0.05 * sqrt(1/K + 1/10) / sqrt(3/pi) <= log(1.1) needs K >= 10.9.
    needed = processes_needed(Spread(0.05, 20), baseline_runs=10, tolerance=0.10, config=CONFIG)
    assert needed == 11
    assert noise_floor_log(0.05, 20, 11, 10) <= math.log(1.10) < noise_floor_log(0.05, 20, 10, 10)


@pytest.mark.parametrize(
    "baseline, needed",
    # C(12, 2) = 66 and C(13, 3) = 286; C(14, 2) = 91, C(15, 3) = 455; C(15, 2) = 105; C(22, 2) = 231; C(10, 3) = 120.
    [(10, 3), (12, 3), (13, 2), (20, 2), (7, 3)],
)
def test_with_little_noise_processes_needed_is_the_fewest_that_can_reach_the_level(baseline, needed):
    assert processes_needed(Spread(0.001, 20), baseline_runs=baseline, tolerance=0.10, config=CONFIG) == needed


def test_processes_needed_follows_the_false_alarm_rate():
    # 1 / C(10 + 1, 1) = 1/11 is below 0.1.
    config = DecisionConfig(false_alarm_rate=0.1)
    assert processes_needed(Spread(0.001, 20), baseline_runs=10, tolerance=0.10, config=config) == 1


def test_processes_needed_can_be_the_processes_already_run():
    comparison = compare_runs(runs(-0.01, 0.0, 0.01), runs(-0.015, -0.01, -0.005, 0.0, 0.005, 0.01, 0.015), 0.10)
    assert comparison.processes_needed == 3


def test_processes_needed_is_none_when_the_baseline_has_too_few_runs_for_any_count():
    # Even endless processes leave 4.25 * 0.2 * sqrt(1/3) / sqrt(3/pi) = 0.50 above log(1.1).
    assert processes_needed(Spread(0.2, 20), baseline_runs=3, tolerance=0.10, config=CONFIG) is None


def test_processes_needed_is_none_against_one_baseline_run_however_steady():
    # 1 / (K + 1) < 0.01 needs K >= 100.
    assert MAX_SUGGESTED_PROCESSES < 100
    assert processes_needed(Spread(0.0, 20), baseline_runs=1, tolerance=0.10, config=CONFIG) is None


def test_processes_needed_is_none_beyond_the_largest_suggestion():
    expected = fewest_processes(0.064, 20, 10, 0.10, limit=1000)
    assert expected == 59
    assert MAX_SUGGESTED_PROCESSES < expected
    assert processes_needed(Spread(0.064, 20), baseline_runs=10, tolerance=0.10, config=CONFIG) is None


def test_processes_needed_is_none_without_spread():
    assert processes_needed(None, baseline_runs=10, tolerance=0.10, config=CONFIG) is None


def test_compare_runs_suggests_processes_from_its_pooled_spread():
    # sd of three current runs (squares 0.005, 2 df) and ten baseline runs (squares 0.025, 9 df).
    comparison = compare_runs(runs(-0.05, 0.0, 0.05), runs(*(-0.05, 0.05) * 5), 0.10)
    sd = math.sqrt(0.03 / 11)
    assert (comparison.log_sd, comparison.degrees_of_freedom) == (pytest.approx(sd), 11)
    assert comparison.processes_needed == fewest_processes(sd, 11, 10, 0.10, MAX_SUGGESTED_PROCESSES) == 18


# --- invalid input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "current, baseline",
    [([], [0.01]), ([0.01], []), ([0.0], [0.01]), ([0.01], [-0.01]), ([math.nan], [0.01]), ([0.01], [math.inf])],
    ids=["no-current", "no-baseline", "zero", "negative", "nan", "inf"],
)
def test_invalid_run_medians_raise_value_error(current, baseline):
    with pytest.raises(ValueError, match="runs"):
        compare_runs(current, baseline, 0.10)


@pytest.mark.parametrize("tolerance", [-0.1, 1.0, 10, math.nan, True])
def test_a_tolerance_outside_zero_to_one_raises_value_error(tolerance):
    with pytest.raises(ValueError, match="tolerance must be a fraction in \\[0, 1\\)"):
        compare_runs([0.01], [0.01], tolerance)


@pytest.mark.parametrize(
    "changes",
    [{"false_alarm_rate": 0.0}, {"false_alarm_rate": 0.5}, {"power": 0.5}, {"power": 1.0}, {"prior_runs": -1},
     {"uncalibrated_factor": 1.0}],
)
def test_a_decision_config_out_of_range_raises_value_error(changes):
    with pytest.raises(ValueError):
        DecisionConfig(**changes)


# --- the rule on simulated runs ----------------------------------------------------------------------------

SIMULATION_TRIALS = 500
RUN_LOG_SD = 0.05


def simulated_logs(rng: np.random.Generator, shape: tuple[int, int], slow_share: float) -> np.ndarray:
    """Log run medians: normal with sd RUN_LOG_SD, and a `slow_share` of runs two to five times slower
    (a busy spell on a shared machine)."""
    slow = rng.random(shape) < slow_share
    return rng.normal(0.0, RUN_LOG_SD, shape) + slow * np.log(rng.uniform(2.0, 5.0, shape))


def called_regressed(
    log_shift: float, tolerance: float, seed: int, current_runs: int, baseline_runs: int, slow_share: float = 0.0,
    machine_spread: Spread | None = None,
) -> float:
    """The share of trials called regressed, the current runs `log_shift` slower than the baseline's."""
    rng = np.random.default_rng(seed)
    baseline = 0.010 * np.exp(simulated_logs(rng, (SIMULATION_TRIALS, baseline_runs), slow_share))
    current = 0.010 * np.exp(simulated_logs(rng, (SIMULATION_TRIALS, current_runs), slow_share) + log_shift)
    calls = sum(
        compare_runs(c, b, tolerance, machine_spread).outcome == "regressed"
        for c, b in zip(current, baseline, strict=True)
    )
    return calls / SIMULATION_TRIALS


def test_with_no_change_and_no_band_at_most_two_percent_of_cases_are_false_alarms():
    # With a zero band only the rank test guards: its level is at most 1%.
    assert called_regressed(0.0, tolerance=0.0, seed=11, current_runs=5, baseline_runs=10) <= 0.02


def test_with_a_heavy_slow_tail_at_most_two_percent_of_unchanged_cases_are_false_alarms():
    # One run in ten two to five times slower on both sides, and a steady machine spread: a t-test on the mean
    # log run median with the spread shrunk toward the machine's calls about 5% of these cases regressed.
    share = called_regressed(
        0.0, tolerance=0.05, seed=13, current_runs=3, baseline_runs=20, slow_share=0.1,
        machine_spread=Spread(0.03, 50),
    )
    assert share <= 0.02


def test_a_slowdown_half_again_above_the_floor_is_detected_at_least_nine_times_in_ten():
    current_runs, baseline_runs, df = 5, 10, 13
    se = standard_error(RUN_LOG_SD, current_runs, baseline_runs)
    floor = math.expm1(max(math.log(1.02), student_t.ppf(0.99, df) * se) + student_t.ppf(0.95, df) * se)
    share = called_regressed(math.log1p(1.5 * floor), 0.02, seed=12, current_runs=5, baseline_runs=10)
    assert share >= 0.90


# --- memory -------------------------------------------------------------------------------------------------


def test_memory_beyond_the_band_is_regressed_with_its_ratio():
    assert compare_memory(1101, 1000, 0.10) == ("regressed", pytest.approx(1.101))


def test_memory_at_the_band_edge_is_unchanged():
    assert compare_memory(1100, 1000, 0.10)[0] == "unchanged"


def test_memory_below_the_band_is_improved():
    assert compare_memory(899, 1000, 0.10)[0] == "improved"


@pytest.mark.parametrize("current, baseline", [(None, 1000), (1000, None), (1000, 0)])
def test_memory_without_both_figures_is_not_compared(current, baseline):
    assert compare_memory(current, baseline, 0.10) == ("not-compared", None)


def test_a_memory_tolerance_of_ten_is_refused():
    with pytest.raises(ValueError, match="memory tolerance must be a fraction"):
        compare_memory(1000, 1000, 10)


# --- the rules of other tools, for comparison -------------------------------------------------------------


def test_pytest_benchmark_fails_above_its_percentage():
    assert pytest_benchmark_fails(1.11, 1.0, 0.10) is True


def test_pytest_benchmark_passes_within_its_percentage():
    assert pytest_benchmark_fails(1.09, 1.0, 0.10) is False


def test_asv_fails_on_a_large_separated_slowdown_with_enough_samples():
    assert asv_fails([1.5 + i * 0.001 for i in range(10)], [1.0 + i * 0.001 for i in range(10)]) is True


def test_asv_passes_a_large_separated_slowdown_with_too_few_samples_for_its_p_value():
    # Three against three fully separated: the smallest two-sided Mann-Whitney p is 0.1.
    assert asv_fails([1.5, 1.51, 1.52], [1.0, 1.01, 1.02]) is False


def test_asv_passes_a_slowdown_under_its_factor():
    assert asv_fails([1.05 + i * 0.001 for i in range(50)], [1.0 + i * 0.0001 for i in range(50)]) is False


def test_a_tie_among_the_runs_keeps_the_exact_rank_test():
    # Stored times are rounded, so two baseline runs can tie; every current run is still slower than all seven,
    # which has probability 1/C(10, 3) = 1/120 under no change.
    baseline = [0.0100, 0.0100, 0.0101, 0.0102, 0.0103, 0.0104, 0.0105]
    comparison = compare_runs([0.015, 0.0151, 0.0152], baseline, 0.10)
    assert comparison.p_value_slower == pytest.approx(1 / 120)
    assert comparison.outcome == "regressed"


def test_exactly_twice_as_slow_is_called_while_uncalibrated():
    assert compare_runs([0.020], [0.010], 0.10).outcome == "regressed"


def test_baseline_runs_needed_refuses_zero_current_runs():
    with pytest.raises(ValueError, match="current_runs >= 1"):
        baseline_runs_needed(0, 0.01)
