"""The regression decision: pure functions on round times, no I/O, no torch.

A time is called regressed only when two things agree (docs/gate.md, "Decision rule"):

1. the bootstrap confidence interval of the ratio of medians (current / baseline) lies wholly above
   `1 + tolerance`, and
2. a one-sided Mann-Whitney U test says the current rounds are larger than the baseline rounds stretched
   by `1 + tolerance`, at the significance level matching the interval's one-sided tail.

Improved is the mirror image below `1 - tolerance`; anything else is unchanged.

With a reference workload timed in both sessions, the current rounds are also judged after dividing them
by the reference's drift factor. By default (`drift_rule="both"`) a change is called only when the raw
and the normalised comparisons call the same one: normalisation then removes a slow machine's false
alarms without letting a noisy reference add its own (measurements in docs/gate.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from perfsuite.records import check_round_times

TimeOutcome = Literal["regressed", "improved", "unchanged", "too-few-rounds"]
DriftRule = Literal["both", "normalised"]
MemoryOutcome = Literal["regressed", "improved", "unchanged", "not-compared"]

# Bootstrap resamples are drawn in blocks of at most this many numbers per side, so a case with
# many rounds does not allocate hundreds of megabytes at once.
_BOOTSTRAP_BLOCK_ELEMENTS = 2_000_000
# The interval uses at most this many rounds per side, evenly spaced, so a fast benchmark with thousands
# of rounds is still decided in tens of milliseconds; fewer rounds only widen the interval (conservative).
MAX_BOOTSTRAP_ROUNDS = 1000


@dataclass(frozen=True)
class DecisionConfig:
    """How the time decision is made; the defaults are the documented rule.

    - `confidence`: two-sided level of the bootstrap interval of the median ratio (0.95: 2.5% per tail);
      the Mann-Whitney test uses the one-sided level `(1 - confidence) / 2` so both criteria agree.
    - `bootstrap_resamples`: resamples of each side for the interval.
    - `seed`: seed of the resampling, so the same rounds always give the same verdict.
    - `min_rounds`: fewer rounds than this on either side and no regression is called at all.
    - `drift_rule`: with a reference on both sides, "both" calls a change only when the raw and the
      drift-normalised comparisons agree; "normalised" follows the normalised comparison alone.
    """

    confidence: float = 0.95
    bootstrap_resamples: int = 2000
    seed: int = 0
    min_rounds: int = 5
    drift_rule: DriftRule = "both"

    def __post_init__(self) -> None:
        if not 0.5 < self.confidence < 1:
            raise ValueError(f"confidence must lie between 0.5 and 1 (e.g. 0.95), got {self.confidence!r}")
        if self.bootstrap_resamples < 100:
            raise ValueError(f"bootstrap_resamples must be at least 100, got {self.bootstrap_resamples!r}")
        if self.min_rounds < 2:
            raise ValueError(f"min_rounds must be at least 2, got {self.min_rounds!r}")
        if self.drift_rule not in ("both", "normalised"):
            raise ValueError(f"drift_rule must be 'both' or 'normalised', got {self.drift_rule!r}")

    @property
    def one_sided_alpha(self) -> float:
        """Significance level of each one-sided criterion."""
        return (1 - self.confidence) / 2


DEFAULT_DECISION = DecisionConfig()


@dataclass(frozen=True)
class TimeComparison:
    """The outcome of comparing current round times with baseline round times.

    `ratio` is median(current) / median(baseline); `normalised_ratio` is that ratio divided by the
    reference workload's `drift` (None without a reference on both sides). `raw_outcome` is the decision
    on `ratio`, `normalised_outcome` the one on `normalised_ratio`; `outcome` combines them by the drift
    rule. `ci_low`, `ci_high` and the p-values are about the normalised ratio when there is one, else the
    raw ratio, and are None when the outcome is `too-few-rounds`.
    """

    outcome: TimeOutcome
    raw_outcome: TimeOutcome
    normalised_outcome: TimeOutcome | None
    baseline_median_s: float
    current_median_s: float
    ratio: float
    drift: float | None
    normalised_ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value_slower: float | None
    p_value_faster: float | None

    @property
    def decision_ratio(self) -> float:
        """The ratio the interval and p-values are about: normalised when a drift factor was given, else raw."""
        return self.ratio if self.normalised_ratio is None else self.normalised_ratio


def drift_factor(current_reference_median_s: float | None, baseline_reference_median_s: float | None) -> float | None:
    """How much slower the machine ran the reference workload now than when the baseline was recorded.

    Returns current / baseline reference median, or None unless both medians are finite and > 0.
    """
    if current_reference_median_s is None or baseline_reference_median_s is None:
        return None
    if not all(math.isfinite(x) and x > 0 for x in (current_reference_median_s, baseline_reference_median_s)):
        return None
    return current_reference_median_s / baseline_reference_median_s


def median_ratio_interval(
    current_s: np.ndarray, baseline_s: np.ndarray, confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(current) / median(baseline) at two-sided `confidence`.

    Each side is resampled with replacement independently, `resamples` times; the draws are seeded.
    A side with more than MAX_BOOTSTRAP_ROUNDS rounds is first thinned to that many, evenly spaced.
    """
    current_s, baseline_s = _thinned(current_s), _thinned(baseline_s)
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    block_rows = max(1, _BOOTSTRAP_BLOCK_ELEMENTS // max(len(current_s), len(baseline_s)))
    for start in range(0, resamples, block_rows):
        rows = min(block_rows, resamples - start)
        current_medians = np.median(current_s[rng.integers(0, len(current_s), (rows, len(current_s)))], axis=1)
        baseline_medians = np.median(baseline_s[rng.integers(0, len(baseline_s), (rows, len(baseline_s)))], axis=1)
        ratios[start : start + rows] = current_medians / baseline_medians
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def _thinned(times_s: np.ndarray) -> np.ndarray:
    if len(times_s) <= MAX_BOOTSTRAP_ROUNDS:
        return times_s
    return times_s[np.linspace(0, len(times_s) - 1, MAX_BOOTSTRAP_ROUNDS).round().astype(int)]


def p_value_beyond(current_s: np.ndarray, baseline_s: np.ndarray, factor: float, slower: bool) -> float:
    """One-sided Mann-Whitney U p-value that the current rounds exceed (`slower`) or fall below the
    baseline rounds multiplied by `factor`.

    Never NaN: a NaN (scipy versions differ on all-tied samples) counts as no evidence, 1.0.
    """
    result = scipy_stats.mannwhitneyu(current_s, baseline_s * factor, alternative="greater" if slower else "less")
    p_value = float(result.pvalue)
    return 1.0 if math.isnan(p_value) else p_value


def _outcome(
    interval: tuple[float, float], p_value_slower: float, p_value_faster: float, tolerance: float, alpha: float
) -> TimeOutcome:
    """The documented rule on one ratio: interval wholly beyond the band and the rank test agreeing."""
    if interval[0] > 1 + tolerance and p_value_slower < alpha:
        return "regressed"
    if interval[1] < 1 - tolerance and p_value_faster < alpha:
        return "improved"
    return "unchanged"


def compare_times(
    current_s: tuple[float, ...] | list[float] | np.ndarray,
    baseline_s: tuple[float, ...] | list[float] | np.ndarray,
    tolerance: float,
    drift: float | None = None,
    config: DecisionConfig = DEFAULT_DECISION,
) -> TimeComparison:
    """Decide whether `current_s` round times regressed against `baseline_s` beyond `tolerance`.

    `tolerance` is a fraction (0.10: a 10% band). `drift` is the reference workload's current / baseline
    median; when given, the rounds are also judged after dividing the current ones by it, and the two
    decisions are combined by `config.drift_rule`. Raises ValueError on empty, zero, negative or
    non-finite times, or a tolerance outside [0, 1).
    """
    check_tolerance(tolerance, "tolerance")
    check_round_times(current_s, "current round times")
    check_round_times(baseline_s, "baseline round times")
    if drift is not None and not (math.isfinite(drift) and drift > 0):
        raise ValueError(f"drift must be a finite factor > 0 or None, got {drift!r}")
    current = np.asarray(current_s, dtype=float)
    baseline = np.asarray(baseline_s, dtype=float)
    current_median_s = float(np.median(current))
    baseline_median_s = float(np.median(baseline))
    ratio = current_median_s / baseline_median_s
    normalised_ratio = None if drift is None else ratio / drift
    medians = {
        "baseline_median_s": baseline_median_s, "current_median_s": current_median_s, "ratio": ratio,
        "drift": drift, "normalised_ratio": normalised_ratio,
    }
    if min(len(current), len(baseline)) < config.min_rounds:
        return TimeComparison(
            **medians, outcome="too-few-rounds", raw_outcome="too-few-rounds",
            normalised_outcome=None if drift is None else "too-few-rounds",
            ci_low=None, ci_high=None, p_value_slower=None, p_value_faster=None,
        )
    alpha = config.one_sided_alpha
    raw_interval = median_ratio_interval(current, baseline, config.confidence, config.bootstrap_resamples, config.seed)
    raw_p_slower = p_value_beyond(current, baseline, 1 + tolerance, slower=True)
    raw_p_faster = p_value_beyond(current, baseline, 1 - tolerance, slower=False)
    raw_outcome = _outcome(raw_interval, raw_p_slower, raw_p_faster, tolerance, alpha)
    if drift is None:
        return TimeComparison(
            **medians, outcome=raw_outcome, raw_outcome=raw_outcome, normalised_outcome=None,
            ci_low=raw_interval[0], ci_high=raw_interval[1], p_value_slower=raw_p_slower, p_value_faster=raw_p_faster,
        )
    # Dividing every current round by the drift puts the interval and the rank test on the same scale;
    # with the same resamples the interval of the normalised ratio is exactly the raw one divided by it.
    normalised = current / drift
    interval = (raw_interval[0] / drift, raw_interval[1] / drift)
    p_slower = p_value_beyond(normalised, baseline, 1 + tolerance, slower=True)
    p_faster = p_value_beyond(normalised, baseline, 1 - tolerance, slower=False)
    normalised_outcome = _outcome(interval, p_slower, p_faster, tolerance, alpha)
    outcome = normalised_outcome
    if config.drift_rule == "both" and normalised_outcome != raw_outcome:
        outcome = "unchanged"
    return TimeComparison(
        **medians, outcome=outcome, raw_outcome=raw_outcome, normalised_outcome=normalised_outcome,
        ci_low=interval[0], ci_high=interval[1], p_value_slower=p_slower, p_value_faster=p_faster,
    )


def compare_memory(
    current_bytes: int | None, baseline_bytes: int | None, tolerance: float
) -> tuple[MemoryOutcome, float | None]:
    """Compare one memory figure with its baseline: (outcome, current / baseline).

    Memory is one number per case, so there is no test: regressed when current > baseline * (1 + tolerance),
    improved when current < baseline * (1 - tolerance). `not-compared` when either figure is missing or
    the baseline is 0.
    """
    check_tolerance(tolerance, "memory tolerance")
    if current_bytes is None or baseline_bytes is None or baseline_bytes <= 0:
        return "not-compared", None
    ratio = current_bytes / baseline_bytes
    if current_bytes > baseline_bytes * (1 + tolerance):
        return "regressed", ratio
    if current_bytes < baseline_bytes * (1 - tolerance):
        return "improved", ratio
    return "unchanged", ratio


def check_tolerance(tolerance: float, what: str) -> None:
    """Raise ValueError unless `tolerance` is a fraction in [0, 1): 0.10 means a 10% band."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(
            f"{what} must be a fraction in [0, 1), e.g. 0.10 for a 10% band; got {tolerance!r}"
        )
