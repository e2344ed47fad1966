"""A window's time in an A/B block (`perfsuite.run.ab.window_time_s`): the fast tenth of its rounds where it holds
enough of them, so that other work on the machine, which only ever adds time to a step, moves it little, while a
change of the code that slows every step moves it by the change; the median where a window holds a few long rounds."""

from __future__ import annotations

import statistics

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsuite.run.ab import MIN_ROUNDS_FOR_QUANTILE, WINDOW_QUANTILE, most_round_s, window_plan, window_time_s
from perfsuite.run.plan import RoundSettings, most_steps_per_round


def test_a_window_of_many_rounds_takes_their_lower_decile():
    rounds_s = [0.001 * (1 + index / 100) for index in range(100)]
    assert window_time_s(rounds_s) == float(np.quantile(rounds_s, WINDOW_QUANTILE))
    assert window_time_s(rounds_s) < statistics.median(rounds_s)


def test_a_window_of_few_rounds_takes_their_median():
    rounds_s = [0.010, 0.030, 0.011][: MIN_ROUNDS_FOR_QUANTILE - 1]
    assert window_time_s(rounds_s) == statistics.median(rounds_s)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), hit_share=st.floats(0.6, 0.7), factor=st.sampled_from([1.0, 1.05, 1.1, 1.3]))
def test_bursts_of_other_work_move_a_window_far_less_than_its_median_while_a_change_moves_it_fully(
        seed, hit_share, factor):
    """Steps of 1 ms with 1% jitter; other work adds 20-100% to a share of them (60-70% of the 120, which steps drawn
    at random: as a busy neighbour does to a shared core). The lower decile of the hit window stays within 2.5% of
    the quiet one's (1.7% at most in 6,000 draws) while the median moves by more than 20%, and a code change that
    slows every step by `factor` moves the lower decile by `factor`."""
    generator = np.random.default_rng(seed)
    quiet_s = 0.001 * (1 + 0.01 * generator.standard_normal(120))
    hit = np.zeros(120, dtype=bool)
    hit[generator.permutation(120)[: round(hit_share * 120)]] = True  # the share exactly, so the median is a hit step
    busy_s = quiet_s * np.where(hit, 1 + generator.uniform(0.2, 1.0, 120), 1.0)
    assert abs(window_time_s(list(busy_s)) / window_time_s(list(quiet_s)) - 1) < 0.025
    assert statistics.median(busy_s) / statistics.median(quiet_s) > 1.20
    changed = window_time_s(list(busy_s * factor)) / window_time_s(list(busy_s))
    assert abs(changed - factor) < 1e-9


@settings(max_examples=200, deadline=None)
@given(step_s=st.floats(1e-5, 0.02), max_time_s=st.sampled_from([0.1, 0.3, 1.0, 2.0]))
def test_a_blocks_rounds_are_short_enough_for_a_window_to_take_the_lower_decile(step_s, max_time_s):
    """A launch-bound step of 2 ms on a GPU calibrates to tens of steps a round; a block caps its rounds so that a
    window holds MIN_ROUNDS_FOR_QUANTILE of them (with rounds of 0.06 s a window of 0.125 s held two, and one burst of
    host work moved the window's median), wherever one step is short enough to allow it."""
    steps = most_steps_per_round(step_s, RoundSettings(min_rounds=1, max_time_s=most_round_s(max_time_s)))
    window_s, _ = window_plan(step_s, steps, max_time_s)
    if step_s <= most_round_s(max_time_s):
        assert window_s / (steps * step_s) >= MIN_ROUNDS_FOR_QUANTILE
    else:
        assert steps == 1  # a step longer than a short round is a round of its own
