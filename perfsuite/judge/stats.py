"""The regression decision on runs: pure functions on run medians, no I/O, no torch.

The unit of replication is a process, not a round: rounds of one process share its memory layout, allocator
state, CPU placement and host, so they scatter far less than runs of separate processes do, and an
interval built from rounds is too narrow (docs/gate.md). Each side is therefore summarised by its runs'
median round times, one number per process, and the two sides are compared as samples of runs:

- The ratio shown is the median of the current run medians over the median of the baseline's.
- Regressed: a one-sided Mann-Whitney U test on the run medians says the current runs are slower with
  p < `false_alarm_rate` (0.01), *and* the ratio is above both 1 + band and the noise's own alarm level
  (the one-sided 99% bound of the ratio under no change, from the between-run spread below). A rank test,
  because run medians on a shared machine are skewed with a heavy slow tail (a busy spell makes one process
  x2-x5 slower): a t-test on them raised 3-9% false alarms in the selftest; a rank test's false-alarm rate is
  at most its level whatever the shape, as long as both sides' runs come from the same conditions. The size
  condition guards the case where they do not: a machine busier than when the baseline was recorded orders
  every current run after the baseline's (p small) by a margin the runs' own spread explains. Improved is
  the mirror image.
- A rank test on K current and n baseline runs cannot give a p below 1 / C(n + K, K): one process can never
  reach 0.01 against a history of 20 runs. Such a comparison is `uncalibrated`, says how many processes and
  runs would calibrate it, and calls only a change `uncalibrated_factor` (x2) beyond the baseline's slowest
  run (or below its fastest) and beyond the noise's alarm level where the spread is known.
- The noise's alarm level and the detectable floor (the smallest slowdown the rule calls with probability
  `power`) come from the between-run spread of the baseline's log run medians, shrunk toward the machine's
  pooled spread (so a case with few runs borrows strength from the machine), with the current session
  counted as one draw (its runs share the machine's state). Every verdict shows the floor, and says when
  noise puts it above the band.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats as scipy_stats

from perfsuite.records import check_band

TimeOutcome = Literal["regressed", "improved", "unchanged", "uncalibrated"]
MemoryOutcome = Literal["regressed", "improved", "unchanged", "not-compared"]
# The processes per gate run and per recording the README recommends: 3 current runs can reach p < 0.01
# against 7 baseline runs (three recordings of 3 processes give 9).
RECOMMENDED_PROCESSES = 3
# Largest process count suggested; beyond it the answer is "record more baseline runs".
MAX_SUGGESTED_PROCESSES = 50


@dataclass(frozen=True)
class DecisionConfig:
    """How the time decision is made; the defaults are the documented rule.

    - `false_alarm_rate`: one-sided significance level of the rank test (0.01: at most 1% of unchanged cases
      flagged when both sides' runs come from the same conditions).
    - `power`: the detection probability the reported floor is computed for.
    - `prior_runs`: the degrees of freedom below which a case's own spread is filled up with the machine's.
    - `uncalibrated_factor`: when the runs are too few for the test, only a change this many times beyond the
      baseline's slowest run (or below its fastest) is called.
    """

    false_alarm_rate: float = 0.01
    power: float = 0.95
    prior_runs: int = 4
    uncalibrated_factor: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.false_alarm_rate < 0.5:
            raise ValueError(f"false_alarm_rate must lie in (0, 0.5), e.g. 0.01; got {self.false_alarm_rate!r}")
        if not 0.5 < self.power < 1:
            raise ValueError(f"power must lie in (0.5, 1), e.g. 0.95; got {self.power!r}")
        if self.prior_runs < 0:
            raise ValueError(f"prior_runs must be >= 0, got {self.prior_runs!r}")
        if self.uncalibrated_factor <= 1:
            raise ValueError(f"uncalibrated_factor must be > 1, got {self.uncalibrated_factor!r}")


DEFAULT_DECISION = DecisionConfig()


@dataclass(frozen=True)
class Spread:
    """A between-run spread: the standard deviation of log run medians and its degrees of freedom."""

    log_sd: float
    degrees_of_freedom: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.log_sd) and self.log_sd >= 0) or self.degrees_of_freedom < 0:
            raise ValueError(f"a spread needs a finite log_sd >= 0 and degrees of freedom >= 0, got {self!r}")


@dataclass(frozen=True)
class RunComparison:
    """The outcome of comparing current runs with baseline runs.

    `ratio` is the median of current run medians over that of the baseline's. `calibrated` says whether the
    rank test could reach the false-alarm rate with these run counts (otherwise only the x2 rule applied).
    `p_value_slower` and `p_value_faster` are the Mann-Whitney test's one-sided p-values (None when
    uncalibrated); `ci_low`/`ci_high` bound the ratio at the test's level from the spread (None when
    uncalibrated). `log_sd` is the between-run spread used and `degrees_of_freedom` its degrees of freedom;
    `baseline_sessions` how many recording sessions the baseline runs came from. `detectable_slowdown` is the
    floor: the smallest slowdown (as a fraction) called with the configured power; `noise_slowdown` the same
    without the band; `processes_needed` the fewest current processes with which the rank test can reach the
    false-alarm rate (None when the noise floor is above the band, which processes cannot lower, or when no
    count up to MAX_SUGGESTED_PROCESSES can: the baseline needs more runs).
    """

    outcome: TimeOutcome
    ratio: float
    current_runs: int
    baseline_runs: int
    baseline_sessions: int
    calibrated: bool
    log_sd: float | None
    degrees_of_freedom: int
    ci_low: float | None
    ci_high: float | None
    p_value_slower: float | None
    p_value_faster: float | None
    detectable_slowdown: float
    noise_slowdown: float | None
    processes_needed: int | None


def check_run_medians(run_medians_s: Sequence[float], what: str) -> np.ndarray:
    """The logarithms of `run_medians_s`; ValueError unless they are finite times > 0 seconds, at least one."""
    values = np.asarray(run_medians_s, dtype=float).reshape(-1)
    if values.size == 0:
        raise ValueError(f"{what}: no runs; at least one run is needed to judge")
    if not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(f"{what}: run medians must be finite times > 0 seconds, got {values[:5].tolist()!r}")
    return np.log(values)


def within_spread(groups: Sequence[Sequence[float]]) -> Spread | None:
    """The pooled spread of log run medians within each group (each a case's runs); None with no degree of
    freedom (every group a single run)."""
    squares, freedom = 0.0, 0
    for group in groups:
        logs = np.log(np.asarray(group, dtype=float))
        if logs.size >= 2:
            squares += float(np.sum((logs - logs.mean()) ** 2))
            freedom += logs.size - 1
    if freedom == 0:
        return None
    return Spread(math.sqrt(squares / freedom), freedom)


def combined_spread(own: Spread | None, machine: Spread | None, prior_runs: int) -> Spread | None:
    """`own` spread shrunk toward the `machine`'s while the case has few runs: a weighted mean of variances,
    the machine's weighted by the degrees of freedom the case lacks to reach `prior_runs` (none once it has
    them), at most the machine's own. A case with a history of its own keeps its spread: pooled over cases as
    unlike as a 1 ms matmul chain (3% between runs on the H200) and a launch-bound ResNet18 step (30%), the
    machine's spread would drown the steady ones."""
    own_df = own.degrees_of_freedom if own else 0
    prior_df = min(max(prior_runs - own_df, 0), machine.degrees_of_freedom) if machine else 0
    if own_df + prior_df == 0:
        return None
    variance = (
        (own.log_sd**2 * own_df if own else 0.0) + (machine.log_sd**2 * prior_df if machine else 0.0)
    ) / (own_df + prior_df)
    return Spread(math.sqrt(variance), own_df + prior_df)


def smallest_p_value(current_runs: int, baseline_runs: int) -> float:
    """The smallest one-sided p-value a rank test on `current_runs` against `baseline_runs` can give:
    every current run slower than every baseline run, 1 / C(n + K, K)."""
    return 1 / math.comb(current_runs + baseline_runs, current_runs)


def rank_test_p_values(current: np.ndarray, baseline: np.ndarray) -> tuple[float, float]:
    """One-sided Mann-Whitney p-values (slower, faster) of `current` against `baseline`: exact without ties;
    with ties (stored times are rounded) an exact or, past 9999 arrangements, a seeded permutation test,
    since scipy's normal approximation is far off for a handful of runs."""
    method: Any = "exact"
    if np.unique(np.concatenate([current, baseline])).size < current.size + baseline.size:
        method = scipy_stats.PermutationMethod(n_resamples=9999, random_state=0)
    return (
        float(scipy_stats.mannwhitneyu(current, baseline, alternative="greater", method=method).pvalue),
        float(scipy_stats.mannwhitneyu(current, baseline, alternative="less", method=method).pvalue),
    )


def baseline_runs_needed(current_runs: int, false_alarm_rate: float) -> int:
    """The fewest baseline runs with which `current_runs` runs can reach p < `false_alarm_rate`."""
    if current_runs < 1 or not 0 < false_alarm_rate < 1:
        raise ValueError(f"need current_runs >= 1 and a rate in (0, 1), got {current_runs!r}, {false_alarm_rate!r}")
    baseline_runs = 1
    while smallest_p_value(current_runs, baseline_runs) >= false_alarm_rate:
        baseline_runs += 1
    return baseline_runs


def _quantiles(spread: Spread, config: DecisionConfig) -> tuple[float, float]:
    """Student quantiles (alarm, power) at the spread's degrees of freedom."""
    df = max(spread.degrees_of_freedom, 1)
    return float(scipy_stats.t.ppf(1 - config.false_alarm_rate, df)), float(scipy_stats.t.ppf(config.power, df))


def _noise_log(spread: Spread, baseline_sessions: int, quantiles: tuple[float, float]) -> tuple[float, float]:
    """(the noise's alarm level, its floor at the configured power), as log ratios: the one-sided bounds of one
    new session's median against the median of `baseline_sessions` recorded ones, with the between-run spread.

    A session's runs share its machine state (the load beside it, a slow spell), so they move together: on this
    project's shared VM the runs of one session were all slower than a history recorded minutes earlier, at a
    ratio its spread explained. The current session therefore counts as one draw, whatever its process count."""
    standard_error = spread.log_sd * math.sqrt(1 + 1 / baseline_sessions)
    return quantiles[0] * standard_error, (quantiles[0] + quantiles[1]) * standard_error


def compare_runs(
    current_medians_s: Sequence[float],
    baseline_medians_s: Sequence[float],
    tolerance: float,
    machine_spread: Spread | None = None,
    config: DecisionConfig = DEFAULT_DECISION,
    baseline_sessions: int | None = None,
) -> RunComparison:
    """Decide whether the current runs regressed against the baseline runs beyond `tolerance`.

    `current_medians_s` and `baseline_medians_s` are run medians in seconds (one per process), the current
    ones from one session; `baseline_sessions` is how many recording sessions the baseline runs came from
    (None: each run its own); `tolerance` a fraction (0.10: 10%); `machine_spread` the pooled spread of this
    machine's other cases. Raises ValueError on empty, zero, negative or non-finite medians, or a tolerance
    outside [0, 1).
    """
    check_band(tolerance, "tolerance")
    current = check_run_medians(current_medians_s, "current runs")
    baseline = check_run_medians(baseline_medians_s, "baseline runs")
    sessions = int(baseline.size) if baseline_sessions is None else baseline_sessions
    if not 1 <= sessions <= baseline.size:
        raise ValueError(f"baseline_sessions must lie in [1, {baseline.size}] (the baseline runs), got {sessions!r}")
    baseline_median_s = float(np.median(baseline_medians_s))
    ratio = float(np.median(current_medians_s)) / baseline_median_s
    log_ratio = math.log(ratio)
    spread = combined_spread(within_spread([baseline_medians_s]), machine_spread, config.prior_runs)
    counts = {"current_runs": int(current.size), "baseline_runs": int(baseline.size), "baseline_sessions": sessions}
    band_log = math.log1p(tolerance)
    noise = None if spread is None else _noise_log(spread, sessions, _quantiles(spread, config))
    needed = processes_needed(spread, int(baseline.size), sessions, tolerance, config)
    if spread is None or noise is None or smallest_p_value(current.size, baseline.size) >= config.false_alarm_rate:
        return _beyond_the_factor(log_ratio, ratio, baseline, baseline_median_s, spread, noise, needed, counts, config)
    return _rank_test(current, baseline, log_ratio, ratio, band_log, tolerance, spread, noise, needed, counts, config)


def _beyond_the_factor(
    log_ratio: float, ratio: float, baseline: np.ndarray, baseline_median_s: float, spread: Spread | None,
    noise: tuple[float, float] | None, needed: int | None, counts: dict[str, int], config: DecisionConfig,
) -> RunComparison:
    """The uncalibrated rule (too few runs for the rank test, or no spread): only a change beyond the factor (x2)
    is called, and where the spread is known, only beyond what the noise explains too: with 4 busy processes beside
    it one ResNet18 run in three was over x2 slower. And only by the factor beyond the baseline's slowest (fastest)
    run: noise that put recorded runs at x2-x5 puts a current one there as often (K = 1 beside 4 busy processes:
    1.7% false alarms when the factor counted from the median, docs/gate.md). `baseline` holds log medians."""
    fastest_log = float(baseline.min()) - math.log(baseline_median_s)
    slowest_log = float(baseline.max()) - math.log(baseline_median_s)
    factor_log = math.log(config.uncalibrated_factor)
    cut_log, margin_log = factor_log, 0.0
    if noise is not None:
        alarm_log, noise_log = noise
        cut_log, margin_log = max(cut_log, alarm_log), noise_log - alarm_log
    slower_cut_log, faster_cut_log = max(cut_log, slowest_log + factor_log), max(cut_log, factor_log - fastest_log)
    outcome: TimeOutcome = (
        "regressed" if log_ratio >= slower_cut_log
        else "improved" if log_ratio <= -faster_cut_log
        else "uncalibrated"
    )
    return RunComparison(
        outcome=outcome, ratio=ratio, **counts, calibrated=False, log_sd=None if spread is None else spread.log_sd,
        degrees_of_freedom=0 if spread is None else spread.degrees_of_freedom, ci_low=None, ci_high=None,
        p_value_slower=None, p_value_faster=None, detectable_slowdown=math.expm1(slower_cut_log + margin_log),
        noise_slowdown=None, processes_needed=needed,
    )


def _rank_test(
    current: np.ndarray, baseline: np.ndarray, log_ratio: float, ratio: float, band_log: float, tolerance: float,
    spread: Spread, noise: tuple[float, float], needed: int | None, counts: dict[str, int], config: DecisionConfig,
) -> RunComparison:
    """The calibrated rule: the one-sided rank test at the false-alarm rate, and a change beyond both the band
    and the noise's alarm level."""
    p_slower, p_faster = rank_test_p_values(current, baseline)
    alarm_log, noise_log = noise
    power_log = noise_log - alarm_log
    outcome: TimeOutcome
    if p_slower < config.false_alarm_rate and log_ratio > max(band_log, alarm_log):
        outcome = "regressed"
    elif p_faster < config.false_alarm_rate and log_ratio < -max(-math.log1p(-tolerance), alarm_log):
        outcome = "improved"
    else:
        outcome = "unchanged"
    return RunComparison(
        outcome=outcome, ratio=ratio, **counts, calibrated=True, log_sd=spread.log_sd,
        degrees_of_freedom=spread.degrees_of_freedom,
        ci_low=math.exp(log_ratio - alarm_log), ci_high=math.exp(log_ratio + alarm_log),
        p_value_slower=p_slower, p_value_faster=p_faster,
        detectable_slowdown=math.expm1(max(band_log, alarm_log) + power_log),
        noise_slowdown=math.expm1(noise_log),
        processes_needed=needed,
    )


def processes_needed(
    spread: Spread | None, baseline_runs: int, baseline_sessions: int, tolerance: float, config: DecisionConfig
) -> int | None:
    """The fewest current processes K with which the rank test can reach the false-alarm rate against
    `baseline_runs` runs, when the noise floor (which no process count lowers: a session counts as one draw)
    lies under the band; None when it does not, when the spread is unknown, or when no K up to
    MAX_SUGGESTED_PROCESSES can reach the rate (then the baseline needs more runs)."""
    if spread is None or _noise_log(spread, baseline_sessions, _quantiles(spread, config))[1] > math.log1p(tolerance):
        return None
    # The smallest p, 1 / C(n + K, K), is symmetric in the two counts: the fewest processes against n baseline
    # runs are the fewest baseline runs against n processes.
    current_runs = baseline_runs_needed(baseline_runs, config.false_alarm_rate)
    return current_runs if current_runs <= MAX_SUGGESTED_PROCESSES else None


def compare_memory(
    current_bytes: int | None, baseline_bytes: int | None, tolerance: float
) -> tuple[MemoryOutcome, float | None]:
    """Compare one memory figure with its baseline: (outcome, current / baseline).

    Memory is one number per case, so there is no test: regressed when current > baseline * (1 + tolerance),
    improved when current < baseline * (1 - tolerance). `not-compared` when either figure is missing or the
    baseline is 0.
    """
    check_band(tolerance, "memory tolerance")
    if current_bytes is None or baseline_bytes is None or baseline_bytes <= 0:
        return "not-compared", None
    ratio = current_bytes / baseline_bytes
    if current_bytes > baseline_bytes * (1 + tolerance):
        return "regressed", ratio
    if current_bytes < baseline_bytes * (1 - tolerance):
        return "improved", ratio
    return "unchanged", ratio


def pytest_benchmark_fails(current_median_s: float, baseline_median_s: float, threshold_fraction: float) -> bool:
    """pytest-benchmark's `--benchmark-compare-fail=median:N%` with N = 100 * `threshold_fraction`: fails when
    current / baseline * 100 - 100 > N (its PercentageRegressionCheck), on the medians of all rounds."""
    return current_median_s / baseline_median_s * 100 - 100 > threshold_fraction * 100


ASV_FACTOR = 1.1
ASV_P_VALUE = 0.002


def asv_fails(current_round_times_s: Sequence[float], baseline_round_times_s: Sequence[float]) -> bool:
    """asv's rule (asv/commands/compare.py with asv/statistics.py): a regression when the ratio of medians
    exceeds the factor 1.1 and a Mann-Whitney U test on the samples gives p < 0.002."""
    current = np.asarray(current_round_times_s, dtype=float)
    baseline = np.asarray(baseline_round_times_s, dtype=float)
    if float(np.median(current)) <= ASV_FACTOR * float(np.median(baseline)):
        return False
    p_value = float(scipy_stats.mannwhitneyu(current, baseline, alternative="two-sided").pvalue)
    return not math.isnan(p_value) and p_value < ASV_P_VALUE
