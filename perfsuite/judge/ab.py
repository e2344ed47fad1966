"""The A/B decision: is the head side slower than the base side, case by case, across the matrix judged together?

Each process pair alternates short windows of the two sides, so a window pair shares the machine's state of that
moment; its log ratio head/base cancels what the machine did to both. A pair's estimate is the median of its window
log ratios (robust to a window that a burst of other work hit). The replicates are the process pairs, not the
windows: a process's offset (its allocator, memory layout, placement, a JIT's choices) is shared by all its windows,
so the interval is Student's t over the pair estimates with pairs - 1 degrees of freedom, and more pairs, not more
windows, narrow it.

A matrix of N cases makes N decisions: the intervals are simultaneous at 99% for the whole matrix (Bonferroni: each
case at 1 - 0.01/N), so an unchanged matrix raises a false alarm in at most 1% of jobs. The floor is the half width
of that interval as a change in time: the smallest change this job could tell from noise ("detects >= 4% here").

regressed: the interval lies above 1 and the estimate exceeds the band (the case's tolerance); improved: the mirror
image; inconclusive: neither, and the floor exceeds the band, so a change of the band's size could have been missed
(never a pass: it says what would judge it); unchanged: neither, with a floor within the band; errored: a side
failed or fewer than 2 pairs were measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from scipy import stats

from perfsuite.records import AbMeasurement, Case

AbStatus = Literal["regressed", "improved", "unchanged", "inconclusive", "errored"]
AB_STATUSES: tuple[AbStatus, ...] = ("regressed", "improved", "unchanged", "inconclusive", "errored")
# The chance of any false alarm in an unchanged matrix, and of the interval missing the true ratio: 1%, so that a
# team running A/B on every pull request meets a false alarm about once in a hundred pull requests, not once in 20.
FAMILY_ERROR_RATE = 0.01
MIN_PAIRS = 2


@dataclass(frozen=True)
class AbVerdict:
    """The verdict on one case: `ratio` head/base time per step with its simultaneous interval [`ci_low`,
    `ci_high`]; `floor` the smallest change this job could see and `tolerance` the band, as fractions; `pairs` and
    `windows` the process pairs and window pairs judged; memory per side (the case's own figure, else None) and its
    status; the largest difference of the two sides' first outputs; `reasons` why it errored; `family_size` the
    cases judged together; `one_side_at_a_time_pairs` the pairs that could not hold the case on both sides at once
    and measured one side at a time."""

    case: Case
    status: AbStatus
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    floor: float | None
    tolerance: float
    pairs: int
    windows: int
    base_median_s: float | None
    head_median_s: float | None
    family_size: int
    memory_figure: str | None = None
    base_memory_bytes: int | None = None
    head_memory_bytes: int | None = None
    memory_status: Literal["regressed", "unchanged"] | None = None
    largest_output_difference: float | None = None
    reasons: tuple[str, ...] = ()
    one_side_at_a_time_pairs: int = 0

    @property
    def gate_failed(self) -> bool:
        """Whether the time or the memory figure regressed."""
        return self.status == "regressed" or self.memory_status == "regressed"

    def fails_job(self, inconclusive_fails: bool = True) -> bool:
        """Whether this verdict fails the A/B job: a regression, a case that could not be measured (errored), or one
        that could not be judged (inconclusive: never a pass, unless `inconclusive_fails` is off)."""
        return self.gate_failed or self.status == "errored" or (inconclusive_fails and self.status == "inconclusive")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reasons": list(self.reasons), "gate_failed": self.gate_failed}


def pair_estimate(windows_s: Sequence[tuple[float, float]]) -> float:
    """The log ratio head/base of one process pair: the median over its window pairs."""
    return statistics.median(math.log(head_s / base_s) for base_s, head_s in windows_s)


def t_quantile(pairs: int, family_size: int) -> float:
    """Student's t quantile for a two-sided interval simultaneous over `family_size` cases, with pairs - 1 degrees
    of freedom."""
    return float(stats.t.ppf(1 - FAMILY_ERROR_RATE / (2 * max(family_size, 1)), pairs - 1))


def judge_ab(
    measurement: AbMeasurement | None,
    failures: Sequence[str],
    tolerance: float,
    memory_tolerance: float,
    family_size: int,
) -> AbVerdict:
    """Judge one case from its pairs (`measurement`; None when no pair measured it) and the messages of the pairs
    that failed, with the case's band `tolerance` and `memory_tolerance`, among `family_size` cases."""
    if measurement is None:
        raise ValueError("judge_ab needs the case's measurement; give an empty one when every pair failed")
    case = measurement.case
    measured = [pair for pair in measurement.pairs if pair.windows_s]
    base_windows = [base_s for pair in measured for base_s, _ in pair.windows_s]
    head_windows = [head_s for pair in measured for _, head_s in pair.windows_s]
    common = dict(
        case=case, tolerance=tolerance, pairs=len(measured), windows=len(base_windows), family_size=family_size,
        base_median_s=statistics.median(base_windows) if base_windows else None,
        head_median_s=statistics.median(head_windows) if head_windows else None,
        largest_output_difference=measurement.largest_output_difference,
        one_side_at_a_time_pairs=sum(pair.one_side_at_a_time for pair in measured),
    )
    if failures or len(measured) < MIN_PAIRS:
        reasons = tuple(failures) or (
            f"{case.benchmark_id}: {len(measured)} process pair(s) measured it; an interval needs at least "
            f"{MIN_PAIRS} (--perf-processes)",
        )
        return AbVerdict(status="errored", ratio=None, ci_low=None, ci_high=None, floor=None, reasons=reasons,
                         **common)  # type: ignore[arg-type]
    estimates = [pair_estimate(pair.windows_s) for pair in measured]
    mean = statistics.fmean(estimates)
    half_width = t_quantile(len(estimates), family_size) * statistics.stdev(estimates) / math.sqrt(len(estimates))
    low, high = mean - half_width, mean + half_width
    floor = math.expm1(half_width)
    band = math.log1p(tolerance)
    if low > 0 and mean > band:
        status: AbStatus = "regressed"
    elif high < 0 and mean < -band:
        status = "improved"
    elif floor > tolerance:
        status = "inconclusive"
    else:
        status = "unchanged"
    memory = memory_verdict(measurement, memory_tolerance)
    return AbVerdict(
        status=status, ratio=math.exp(mean), ci_low=math.exp(low), ci_high=math.exp(high), floor=floor,
        **memory, **common,  # type: ignore[arg-type]
    )


def memory_verdict(measurement: AbMeasurement, memory_tolerance: float) -> dict[str, Any]:
    """Each side's memory figure (the median over pairs, where every run's figure is the case's own) and whether
    the head's exceeds the base's by more than `memory_tolerance`."""
    base = measurement.measurement("base").own_memory_bytes if measurement.pairs else None
    head = measurement.measurement("head").own_memory_bytes if measurement.pairs else None
    figure = measurement.pairs[0].head.memory_figure if measurement.pairs else None
    if base is None or head is None or base <= 0:
        return {"memory_figure": figure, "base_memory_bytes": base, "head_memory_bytes": head, "memory_status": None}
    status = "regressed" if head > base * (1 + memory_tolerance) else "unchanged"
    return {"memory_figure": figure, "base_memory_bytes": base, "head_memory_bytes": head, "memory_status": status}
