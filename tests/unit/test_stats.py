"""The time and memory decisions on synthetic round times (seeded lognormal noise), no files, no torch."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from perfsuite.judge.stats import DecisionConfig, check_tolerance, compare_memory, compare_times, drift_factor

MEDIAN_S = 0.012


def rounds(seed: int, n: int = 30, scale: float = 1.0, noise: float = 0.04) -> np.ndarray:
    """`n` round times around MEDIAN_S * scale with lognormal noise of `noise` (0.04: about 4%)."""
    return np.random.default_rng(seed).lognormal(math.log(MEDIAN_S * scale), noise, n)


def bimodal_rounds(seed: int, n: int, slow_share: float, scale: float = 1.0) -> np.ndarray:
    """Rounds where `slow_share` of them ran 1.7x slower, as a contended 2-core VM does."""
    rng = np.random.default_rng(seed)
    times = rng.lognormal(math.log(MEDIAN_S * scale), 0.04, n)
    return np.where(rng.random(n) < slow_share, times * 1.7, times)


# --- the decision on raw rounds ----------------------------------------------------------------------


def test_same_distribution_is_unchanged():
    assert compare_times(rounds(1), rounds(2), tolerance=0.10).outcome == "unchanged"


def test_five_percent_slower_is_unchanged_within_a_ten_percent_band():
    comparison = compare_times(rounds(1, n=200, scale=1.05), rounds(2, n=200), tolerance=0.10)
    assert comparison.outcome == "unchanged"
    assert comparison.ci_low > 1.0  # the change is real, only inside the band


def test_thirty_percent_slower_is_regressed():
    comparison = compare_times(rounds(1, scale=1.30), rounds(2), tolerance=0.10)
    assert comparison.outcome == "regressed"
    assert comparison.ci_low > 1.10
    assert comparison.p_value_slower < 0.025


def test_thirty_percent_faster_is_improved():
    comparison = compare_times(rounds(1, scale=0.70), rounds(2), tolerance=0.10)
    assert comparison.outcome == "improved"
    assert comparison.ci_high < 0.90


def test_thirty_percent_slower_is_unchanged_with_a_forty_percent_band():
    assert compare_times(rounds(1, scale=1.30), rounds(2), tolerance=0.40).outcome == "unchanged"


def test_fifteen_percent_slower_in_heavy_noise_is_not_called():
    # 30% noise on 10 rounds: the median ratio's interval is far wider than the 5% beyond the band.
    comparison = compare_times(rounds(1, n=10, scale=1.15, noise=0.30), rounds(2, n=10, noise=0.30), tolerance=0.10)
    assert comparison.outcome == "unchanged"
    assert comparison.ci_low < 1.10


def test_bimodal_noise_on_both_sides_never_regresses():
    outcomes = [
        compare_times(bimodal_rounds(seed, 20, 0.3), bimodal_rounds(seed + 1000, 20, 0.3), tolerance=0.10).outcome
        for seed in range(20)
    ]
    assert outcomes.count("regressed") == 0


def test_a_minority_of_slow_rounds_is_not_a_regression():
    # 30% of the current rounds 1.7x slower moves the mean a lot but leaves the median and ranks mostly alone.
    comparison = compare_times(bimodal_rounds(1, 40, 0.3), rounds(2, n=40), tolerance=0.10)
    assert comparison.outcome == "unchanged"


def test_identical_distributions_give_no_false_alarm_over_fifty_seeds():
    outcomes = [compare_times(rounds(seed), rounds(seed + 1000), tolerance=0.10).outcome for seed in range(50)]
    assert outcomes.count("unchanged") == 50


def test_fewer_than_five_rounds_is_never_called_even_when_twice_as_slow():
    comparison = compare_times(rounds(1, n=4, scale=2.0), rounds(2, n=30), tolerance=0.10)
    assert comparison.outcome == "too-few-rounds"
    assert comparison.ratio == pytest.approx(2.0, rel=0.1)
    assert comparison.ci_low is None


def test_five_rounds_each_are_enough_to_call_a_doubling():
    assert compare_times(rounds(1, n=5, scale=2.0), rounds(2, n=5), tolerance=0.10).outcome == "regressed"


def test_min_rounds_is_configurable():
    config = DecisionConfig(min_rounds=10)
    assert compare_times(rounds(1, n=8), rounds(2, n=8), tolerance=0.10, config=config).outcome == "too-few-rounds"


def test_all_equal_times_on_both_sides_are_unchanged_even_with_no_band():
    comparison = compare_times([0.01] * 10, [0.01] * 10, tolerance=0.0)
    assert (comparison.outcome, comparison.p_value_slower) == ("unchanged", 1.0)


def test_ratio_is_current_median_over_baseline_median():
    comparison = compare_times([2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 2.0, 2.0, 2.0, 3.0], tolerance=0.10)
    assert comparison.ratio == pytest.approx(4.0 / 2.0)


@pytest.mark.parametrize("bad", [0.0, -0.01, float("nan"), float("inf")])
def test_a_zero_negative_or_non_finite_current_time_is_an_error(bad):
    current = [*rounds(1, n=9), bad]
    with pytest.raises(ValueError, match="finite and > 0"):
        compare_times(current, rounds(2), tolerance=0.10)


def test_float32_rounds_are_judged_like_float64_ones():
    comparison = compare_times(rounds(1, scale=1.3).astype(np.float32), rounds(2), tolerance=0.10)
    assert comparison.outcome == "regressed"


def test_an_empty_baseline_is_an_error():
    with pytest.raises(ValueError, match="no timed rounds"):
        compare_times(rounds(1), [], tolerance=0.10)


def test_the_same_rounds_and_seed_give_the_same_interval():
    first = compare_times(rounds(1), rounds(2), tolerance=0.10)
    second = compare_times(rounds(1), rounds(2), tolerance=0.10)
    assert (first.ci_low, first.ci_high) == (second.ci_low, second.ci_high)


def test_a_higher_confidence_gives_a_wider_interval():
    narrow = compare_times(rounds(1), rounds(2), tolerance=0.10, config=DecisionConfig(confidence=0.90))
    wide = compare_times(rounds(1), rounds(2), tolerance=0.10, config=DecisionConfig(confidence=0.99))
    assert wide.ci_low < narrow.ci_low and wide.ci_high > narrow.ci_high


def test_a_decision_on_200_against_200_rounds_takes_well_under_100_ms():
    current, baseline = rounds(1, n=200, scale=1.3), rounds(2, n=200)
    durations_s = []
    for _ in range(3):
        start = time.perf_counter()
        compare_times(current, baseline, tolerance=0.10, drift=1.05)
        durations_s.append(time.perf_counter() - start)
    assert min(durations_s) < 0.100


def test_a_decision_on_5000_rounds_of_a_fast_benchmark_takes_under_100_ms():
    current, baseline = rounds(1, n=5000, scale=1.3), rounds(2, n=200)
    durations_s = []
    for _ in range(3):
        start = time.perf_counter()
        compare_times(current, baseline, tolerance=0.10)
        durations_s.append(time.perf_counter() - start)
    assert min(durations_s) < 0.100


def test_thousands_of_current_rounds_are_judged():
    assert compare_times(rounds(1, n=5000, scale=1.3), rounds(2, n=200), tolerance=0.10).outcome == "regressed"


@pytest.mark.parametrize("confidence", [95, 0.3, 1.0])
def test_a_confidence_that_is_not_a_fraction_above_one_half_is_rejected(confidence):
    with pytest.raises(ValueError, match="confidence"):
        DecisionConfig(confidence=confidence)


# --- drift normalisation by a reference workload ------------------------------------------------------


def test_drift_factor_is_current_over_baseline_reference_median():
    assert drift_factor(0.0012, 0.0010) == pytest.approx(1.2)


@pytest.mark.parametrize("current_s, baseline_s", [(None, 0.001), (0.001, None), (0.0, 0.001), (0.001, float("nan"))])
def test_drift_factor_is_none_without_a_usable_reference_on_both_sides(current_s, baseline_s):
    assert drift_factor(current_s, baseline_s) is None


def test_normalised_ratio_is_the_raw_ratio_divided_by_the_drift():
    comparison = compare_times(rounds(1, scale=1.4), rounds(2), tolerance=0.10, drift=1.4)
    assert comparison.normalised_ratio == pytest.approx(comparison.ratio / 1.4)


def test_a_slow_machine_seen_by_the_reference_is_not_a_regression():
    # The whole process ran 1.4x slower and so did the reference workload timed beside it.
    comparison = compare_times(rounds(1, scale=1.4), rounds(2), tolerance=0.10, drift=1.4)
    assert (comparison.raw_outcome, comparison.outcome) == ("regressed", "unchanged")


def test_a_regression_with_a_steady_reference_is_regressed():
    comparison = compare_times(rounds(1, scale=1.3), rounds(2), tolerance=0.10, drift=1.0)
    assert (comparison.raw_outcome, comparison.normalised_outcome, comparison.outcome) == (
        "regressed", "regressed", "regressed"
    )


def test_a_reference_that_alone_sped_up_does_not_raise_a_regression_by_default():
    # Raw rounds unchanged; the reference ran 0.7x, so normalisation alone would call the benchmark 1.4x slower.
    comparison = compare_times(rounds(1), rounds(2), tolerance=0.10, drift=0.7)
    assert (comparison.normalised_outcome, comparison.outcome) == ("regressed", "unchanged")


def test_the_normalised_drift_rule_follows_the_normalised_decision_alone():
    config = DecisionConfig(drift_rule="normalised")
    assert compare_times(rounds(1), rounds(2), tolerance=0.10, drift=0.7, config=config).outcome == "regressed"


def test_interval_is_about_the_normalised_ratio_when_there_is_a_drift():
    raw = compare_times(rounds(1), rounds(2), tolerance=0.10)
    normalised = compare_times(rounds(1), rounds(2), tolerance=0.10, drift=2.0)
    assert normalised.ci_low == pytest.approx(raw.ci_low / 2.0)


# --- memory and tolerances ----------------------------------------------------------------------------


def test_memory_above_its_band_is_regressed():
    assert compare_memory(1_150, 1_000, tolerance=0.10) == ("regressed", pytest.approx(1.15))


def test_memory_at_the_edge_of_its_band_is_unchanged():
    assert compare_memory(1_100, 1_000, tolerance=0.10)[0] == "unchanged"


def test_memory_below_its_band_is_improved():
    assert compare_memory(850, 1_000, tolerance=0.10)[0] == "improved"


@pytest.mark.parametrize("current_bytes, baseline_bytes", [(None, 1_000), (1_000, None), (1_000, 0)])
def test_memory_without_both_figures_is_not_compared(current_bytes, baseline_bytes):
    assert compare_memory(current_bytes, baseline_bytes, tolerance=0.10) == ("not-compared", None)


@pytest.mark.parametrize("tolerance", [10, -0.1, 1.0, float("nan"), True])
def test_a_tolerance_that_is_not_a_fraction_is_rejected_with_an_example(tolerance):
    with pytest.raises(ValueError, match=r"0\.10 for a 10% band"):
        check_tolerance(tolerance, "tolerance")
