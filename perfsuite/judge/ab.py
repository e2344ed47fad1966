"""The A/B decision: is the head side slower than the base side, case by case, across the matrix judged together,
looked at after every block until it is decided?

A block builds a case once on each side and alternates short windows of the two (ABBA), so a window pair shares the
machine's state of that moment; its log ratio head/base cancels what the machine did to both. Where the variance
lies is estimated per case at two levels:
- between windows, within a block: a block's estimate is the 20% trimmed mean of its window log ratios (a window
  that a burst of other work hit weighs little), with its standard error (Tukey and McLaughlin's, from the
  winsorised variance: `scipy.stats.mstats.trimmed_stde`);
- between blocks: each block is a fresh build, in another process or the other warm worker, so a placement,
  allocator or autotuning offset that touched the two sides differently shows as blocks that disagree by more than
  their own errors. Its variance tau^2 is DerSimonian and Laird's random-effects estimate (Controlled Clinical
  Trials 7, 1986), and the case's estimate weighs each block by 1 / (its error^2 + tau^2): one bad block widens the
  interval and weighs less instead of moving the verdict. With few blocks that estimate of tau^2 is often 0 where
  the blocks do differ, so from SCATTER_FLOOR_FROM_BLOCKS blocks on the estimate's variance is never taken below
  the blocks' own scatter around it: Hartung and Knapp's variance, taken only where it is the larger (the
  modification of Roever, Knapp and Friede, BMC Medical Research Methodology 15:99, 2015).
The next block spends where the variance is: longer (more windows) while the window noise dominates, the same length
(more fresh builds and processes) while the between-block part does.

The error guarantee survives the looking: every case is looked at after each of its blocks from the MIN_BLOCKS-th to
the MAX_BLOCKS-th, and the intervals are simultaneous over all looks of all cases of the matrix by Bonferroni's
inequality (each look at 1 - 0.01 / (2 x cases x looks) on each side): an alpha-spending design with the error spent
evenly over the looks (Lan and DeMets, Biometrika 70, 1983, with a constant spending function), so stopping as soon
as a case is decided keeps the chance of any false alarm in an unchanged matrix at or below 1%.

A case is decided at the first look where, with at least MIN_BLOCKS blocks:
- regressed: the interval lies above 1, the estimate exceeds the band (the case's tolerance), and the blocks left
  after leaving out any one of them say the same (one block that a bad placement or a burst of other work offset
  must not carry a verdict; with two blocks each must say it on its own; this only ever withholds a verdict; in 150
  simulated one-case A/A jobs whose builds scatter by 3%, 8 false alarms without it, 1 with it);
  improved: the mirror image;
- unchanged: the interval lies inside the band, (1 + band)^-1 .. 1 + band; or, at the band's edge, the interval is
  precise (half width at most half the band) and reaches past the edge while the estimate lies inside: a change of
  about the band's size, which more blocks would only pin to the edge (EDGE_PRECISION).
When the budget or the block limit ends first, it is inconclusive (never a pass: it says the spread it saw and about
how much more measuring would decide it); errored: a side failed or fewer than MIN_BLOCKS blocks were measured.

A/B's band defaults to AB_DEFAULT_TOLERANCE (5%), narrower than the history gate's 10%: both sides are measured at
the same moment on the same machine, so a smaller change is worth failing on; a tolerance given on the command line
or in [tool.perfsuite] applies to both.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
from scipy import stats
from scipy.stats import mstats

from perfsuite.judge.conditions import ConditionChange, changes_between
from perfsuite.records import AbMeasurement, AbPair, Case, Conditions

AbStatus = Literal["regressed", "improved", "unchanged", "inconclusive", "errored", "interrupted", "no-base"]
AB_STATUSES: tuple[AbStatus, ...] = ("regressed", "improved", "unchanged", "inconclusive", "errored", "interrupted",
                                     "no-base")
# The statuses of a case the job judged (the others say why it could not).
JUDGED_STATUSES: tuple[AbStatus, ...] = ("regressed", "improved", "unchanged", "inconclusive")
# The chance of any false alarm in an unchanged matrix, and of an interval missing the true ratio at any look: 1%, so
# that a team running A/B on every pull request meets a false alarm about once in a hundred pull requests.
FAMILY_ERROR_RATE = 0.01
MIN_BLOCKS = 2
# From this many blocks on the combined variance is never below the blocks' own scatter (Hartung and Knapp's): from
# two, that scatter has one degree of freedom and says little.
SCATTER_FLOOR_FROM_BLOCKS = 3
MAX_BLOCKS = 16
AB_DEFAULT_TOLERANCE = 0.05
TRIM = 0.2
# The window count of a block never grows past this many times the first block's.
MAX_WINDOW_GROWTH = 4
# A case whose interval is this precise (half width at most this share of the band) but still reaches past the band's
# edge is decided by its estimate: a true change of about the band's size would otherwise spend the whole budget
# and end inconclusive. It misses a change beyond the band only where the estimate errs by more than the band's
# excess, at most this share of the band (a 5% band: detects >= 7.5%, with the interval's own error rate).
EDGE_PRECISION = 0.5


@dataclass(frozen=True)
class AbVerdict:
    """The verdict on one case: `ratio` head/base time per step with its simultaneous interval [`ci_low`,
    `ci_high`]; `floor` the smallest change this job could see and `tolerance` the band, as fractions; `pairs` and
    `windows` the blocks and window pairs judged, in `processes` processes (`in_one_process`: both sides shared
    each), taking `seconds`; `base_median_s` and `head_median_s` each side's median step over every round of those
    blocks (the ratio compares the windows' times, each the fast tenth of its steps where it holds enough of them);
    `between_blocks` and `within_block` the spread seen (log-ratio standard deviation between blocks, and a block's
    standard error); memory per side (the case's own figure, else None) and its
    status; the largest difference of the two sides' first outputs; `reasons` why it errored; `family_size` the
    cases judged together; `one_side_at_a_time_pairs` the pairs that could not hold the case on both sides at once
    and measured one side at a time; `changed_blocks` the blocks during which the machine's conditions changed
    (against the job's start, or within the block: on battery, Low Power, thermal pressure, a GPU slowdown), and
    `status_without_changed_blocks` the verdict the other blocks give (None where no block changed)."""

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
    processes: int = 0
    in_one_process: bool = False
    seconds: float = 0.0
    between_blocks: float | None = None
    within_block: float | None = None
    changed_blocks: tuple[BlockConditions, ...] = ()
    status_without_changed_blocks: AbStatus | None = None

    @property
    def conditions_moved_verdict(self) -> bool:
        """Whether the blocks during which the conditions changed decide the verdict: without them the case reads
        otherwise."""
        return bool(self.changed_blocks) and self.status_without_changed_blocks != self.status

    @property
    def gate_failed(self) -> bool:
        """Whether the time or the memory figure regressed."""
        return self.status == "regressed" or self.memory_status == "regressed"

    def fails_job(self, inconclusive_fails: bool = True, no_base_fails: bool = False) -> bool:
        """Whether this verdict fails the A/B job: a regression, a case that could not be measured (errored) or was
        not decided before the job was stopped (interrupted), or one that could not be judged (inconclusive: never a
        pass, unless `inconclusive_fails` is off); a model the base does not have (no-base) only when
        `no_base_fails`."""
        return (self.gate_failed or self.status in ("errored", "interrupted")
                or (inconclusive_fails and self.status == "inconclusive")
                or (no_base_fails and self.status == "no-base"))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reasons": list(self.reasons), "gate_failed": self.gate_failed}


@dataclass(frozen=True)
class BlockConditions:
    """A block during which the conditions changed: its number (1 for the first block measured) and the changes
    against the job's start (or, without a reading at the start, against the block's first reading)."""

    block: int
    changes: tuple[ConditionChange, ...]


def changed_blocks(measured: Sequence[AbPair], start: Sequence[Conditions]) -> tuple[BlockConditions, ...]:
    """The blocks of `measured` whose conditions differ from the job's `start` readings or change within them."""
    found = []
    for number, pair in enumerate(measured, 1):
        readings = pair.conditions
        changes = changes_between(start or readings[:1], readings)
        if changes:
            found.append(BlockConditions(number, changes))
    return tuple(found)


@dataclass(frozen=True)
class BlockEstimate:
    """One block's log ratio head/base (trimmed mean of its windows) and its standard error."""

    log_ratio: float
    standard_error: float
    windows: int


def block_estimate(windows_s: Sequence[tuple[float, float]]) -> BlockEstimate:
    """A block's estimate from its (base, head) window pairs; with fewer than 3 windows the error is unknown (inf)."""
    return _block_estimate(tuple((base_s, head_s) for base_s, head_s in windows_s))


# Each look recomputes every earlier block's estimate, and a case's blocks never change once measured: the cache
# makes a case's looks cost one new estimate each instead of one per block so far (scipy's trimmed standard error
# goes through masked arrays, about a millisecond a block). A job has at most a few hundred blocks.
@functools.lru_cache(maxsize=4096)
def _block_estimate(windows_s: tuple[tuple[float, float], ...]) -> BlockEstimate:
    logs = np.log([head_s / base_s for base_s, head_s in windows_s])
    if len(logs) < 3:
        return BlockEstimate(float(np.mean(logs)), math.inf, len(logs))
    error = float(mstats.trimmed_stde(logs, limits=(TRIM, TRIM)))
    # Windows that agree to the timer's resolution give an error of 0; a floor keeps the weights finite.
    return BlockEstimate(float(stats.trim_mean(logs, TRIM)), max(error, 1e-6), len(logs))


@dataclass(frozen=True)
class Combined:
    """The blocks combined: the estimate of the log ratio, its standard error, the between-block standard deviation
    tau, and the typical within-block error."""

    log_ratio: float
    standard_error: float
    between_blocks: float
    within_block: float


def combine(blocks: Sequence[BlockEstimate]) -> Combined:
    """DerSimonian and Laird's random-effects combination of the blocks' estimates, its variance never below Hartung
    and Knapp's from SCATTER_FLOOR_FROM_BLOCKS blocks on."""
    estimates = np.array([block.log_ratio for block in blocks])
    variances = np.array([block.standard_error ** 2 for block in blocks])
    within = float(np.sqrt(np.median(variances)))
    if not np.all(np.isfinite(variances)):
        return Combined(float(np.mean(estimates)), math.inf, math.nan, within)
    weights = 1 / variances
    fixed = float(np.sum(weights * estimates) / np.sum(weights))
    q = float(np.sum(weights * (estimates - fixed) ** 2))
    scale = float(np.sum(weights) - np.sum(weights ** 2) / np.sum(weights))
    tau_squared = max(0.0, (q - (len(blocks) - 1)) / scale) if scale > 0 else 0.0
    random_weights = 1 / (variances + tau_squared)
    estimate = float(np.sum(random_weights * estimates) / np.sum(random_weights))
    # Hartung and Knapp's scale: the blocks' weighted scatter around the estimate against what their variances
    # predict; above 1 the blocks disagree more than tau^2 allowed for, and the variance grows with it.
    scatter = float(np.sum(random_weights * (estimates - estimate) ** 2)) / max(len(blocks) - 1, 1)
    variance = (max(1.0, scatter) if len(blocks) >= SCATTER_FLOOR_FROM_BLOCKS else 1.0) / float(np.sum(random_weights))
    return Combined(estimate, math.sqrt(variance), math.sqrt(tau_squared), within)


@functools.lru_cache(maxsize=256)  # each look asks it again, and scipy's normal quantile takes about 0.1 ms
def z_quantile(family_size: int, max_blocks: int = MAX_BLOCKS) -> float:
    """The normal quantile of one look's two-sided interval, simultaneous over `family_size` cases and the looks at
    each (after its MIN_BLOCKS-th to its `max_blocks`-th block)."""
    looks = max(1, max_blocks - MIN_BLOCKS + 1)
    return float(stats.norm.ppf(1 - FAMILY_ERROR_RATE / (2 * max(family_size, 1) * looks)))


def decision(low: float, mean: float, high: float, band: float) -> AbStatus | None:
    """The verdict an interval [low, high] around `mean` (log ratios) supports against `band` (a fraction), or None
    while it supports none. An interval whose half width is at most EDGE_PRECISION of the band and that still
    reaches past the band's edge says the change is about the band's size: more measuring would only narrow it
    around the edge, so it is decided by its estimate (`at_band_edge`)."""
    log_band = math.log1p(band)
    if low > 0 and mean > log_band:
        return "regressed"
    if high < 0 and mean < -log_band:
        return "improved"
    if low > -log_band and high < log_band:
        return "unchanged"
    if at_band_edge(low, mean, high, band):
        return "unchanged"  # the estimate lies inside the band (beyond it, the first rules decided)
    return None


def at_band_edge(low: float, mean: float, high: float, band: float) -> bool:
    """Whether an interval reaches past the band's edge while its half width is at most EDGE_PRECISION of the band:
    the change is about the band's size, and more blocks would not decide it."""
    log_band = math.log1p(band)
    return (high - mean) <= EDGE_PRECISION * log_band and (high >= log_band or low <= -log_band)


@dataclass(frozen=True)
class Look:
    """What the blocks so far say of a case: the decision (None: still open), the interval, and how many windows its
    next block should take; `by_band_edge`: unchanged by the band's-edge rule; `withheld`: why a change its interval
    supports was not called yet."""

    status: AbStatus | None
    combined: Combined | None
    half_width: float
    next_windows: int
    by_band_edge: bool = False
    withheld: str | None = None


def look(measurement: AbMeasurement, tolerance: float, family_size: int, max_blocks: int = MAX_BLOCKS) -> Look:
    """Look at a case after a block: decided or not, and the next block's windows (after the first block, as many as
    its error calls for, `first_block_windows`; then doubled, up to MAX_WINDOW_GROWTH times the first's, while the
    within-block error outweighs the between-block spread)."""
    measured = [pair for pair in measurement.pairs if pair.windows_s]
    first_windows = len(measured[0].windows_s) if measured else 0
    if len(measured) < MIN_BLOCKS:
        return Look(None, None, math.inf, first_block_windows(measured, tolerance, family_size, max_blocks))
    estimates = [block_estimate(pair.windows_s) for pair in measured]
    combined = combine(estimates)
    half_width = z_quantile(family_size, max_blocks) * combined.standard_error
    low, high = combined.log_ratio - half_width, combined.log_ratio + half_width
    status = decision(low, combined.log_ratio, high, tolerance)
    withheld = None
    if status in ("regressed", "improved"):
        if not survives_any_one_block_left_out(estimates, status, tolerance, family_size, max_blocks):
            withheld = f"its interval reads {status}, but not without one of its blocks (a placement outlier?)"
        status = None if withheld else status
    last = len(measured[-1].windows_s)
    within_share = combined.within_block ** 2 / max(len(measured), 1)
    grow = math.isfinite(combined.between_blocks) and within_share > combined.between_blocks ** 2
    next_windows = min(2 * last, MAX_WINDOW_GROWTH * first_windows) if grow else last
    by_band_edge = status == "unchanged" and at_band_edge(low, combined.log_ratio, high, tolerance)
    return Look(status, combined, half_width, next_windows, by_band_edge, withheld)


def survives_any_one_block_left_out(estimates: Sequence[BlockEstimate], status: AbStatus, tolerance: float,
                                    family_size: int, max_blocks: int) -> bool:
    """Whether the blocks left after leaving out any one of them still support `status` (a change): one block that
    a bad placement or a burst of other work offset must not carry a verdict on its own."""
    z = z_quantile(family_size, max_blocks)
    for left_out in range(len(estimates)):
        rest = combine([block for index, block in enumerate(estimates) if index != left_out])
        half_width = z * rest.standard_error
        if decision(rest.log_ratio - half_width, rest.log_ratio, rest.log_ratio + half_width, tolerance) != status:
            return False
    return True


def first_block_windows(measured: Sequence[AbPair], tolerance: float, family_size: int,
                        max_blocks: int = MAX_BLOCKS) -> int:
    """The windows of the blocks after the first, from the first's own error: as many as would let MIN_BLOCKS such
    blocks decide an unchanged case with half the band to spare (their interval's half width at most half the band),
    never fewer than the first's and at most MAX_WINDOW_GROWTH times as many. A block's error shrinks as
    1 / sqrt(windows), and opening a case costs what several windows do, so a noisy case (a launch-bound step) takes
    its windows in a few long blocks rather than in many short ones."""
    if not measured:
        return 0
    first = len(measured[0].windows_s)
    error = block_estimate(measured[0].windows_s).standard_error
    if not math.isfinite(error):
        return first
    wanted_error = math.log1p(tolerance) / 2 * math.sqrt(MIN_BLOCKS) / z_quantile(family_size, max_blocks)
    return min(MAX_WINDOW_GROWTH * first, max(first, math.ceil(first * (error / wanted_error) ** 2)))


def judge_ab(
    measurement: AbMeasurement | None,
    failures: Sequence[str],
    tolerance: float,
    memory_tolerance: float,
    family_size: int,
    budget_s: float | None = None,
    max_blocks: int = MAX_BLOCKS,
    interrupted: bool = False,
    no_base: str | None = None,
    start_conditions: Sequence[Conditions] = (),
) -> AbVerdict:
    """Judge one case from its blocks (`measurement`; None when no block measured it) and the messages of the blocks
    that failed, with the case's band `tolerance` and `memory_tolerance`, among `family_size` cases; `budget_s` is
    the job's budget (said in an inconclusive verdict). `interrupted`: the job was stopped before the case was
    decided; `no_base`: why the base side does not have the case's model (nothing measured); `start_conditions`:
    the machine's conditions as the job started, against which each block's are compared (`changed_blocks`); where
    some changed, the verdict of the other blocks is given beside it."""
    if measurement is None:
        raise ValueError("judge_ab needs the case's measurement; give an empty one when every block failed")
    case = measurement.case
    measured = [pair for pair in measurement.pairs if pair.windows_s]
    base_rounds_s = [time_s for pair in measured for time_s in pair.base.round_times_s]
    head_rounds_s = [time_s for pair in measured for time_s in pair.head.round_times_s]
    common = dict(
        case=case, tolerance=tolerance, pairs=len(measured), windows=sum(len(pair.windows_s) for pair in measured),
        family_size=family_size,
        base_median_s=statistics.median(base_rounds_s) if base_rounds_s else None,
        head_median_s=statistics.median(head_rounds_s) if head_rounds_s else None,
        largest_output_difference=measurement.largest_output_difference,
        one_side_at_a_time_pairs=sum(pair.one_side_at_a_time for pair in measured),
        processes=len({pair.process for pair in measured}),
        in_one_process=bool(measured) and all(pair.in_one_process for pair in measured),
        seconds=measurement.seconds,
    )
    if no_base is not None:
        return AbVerdict(status="no-base", ratio=None, ci_low=None, ci_high=None, floor=None, reasons=(no_base,),
                         **common)  # type: ignore[arg-type]
    if interrupted and not failures:
        stopped = f"the job was stopped (Ctrl-C) after {len(measured)} block(s) of this case, before it was decided"
        return AbVerdict(status="interrupted", ratio=None, ci_low=None, ci_high=None, floor=None, reasons=(stopped,),
                         **common)  # type: ignore[arg-type]
    if failures or len(measured) < MIN_BLOCKS:
        why = tuple(failures) or (
            f"{case.benchmark_id}: {len(measured)} block(s) measured it; an interval needs at least {MIN_BLOCKS}",
        )
        return AbVerdict(status="errored", ratio=None, ci_low=None, ci_high=None, floor=None, reasons=why,
                         **common)  # type: ignore[arg-type]
    seen = look(measurement, tolerance, family_size, max_blocks)
    combined = seen.combined
    assert combined is not None
    status: AbStatus = seen.status or "inconclusive"
    reasons: tuple[str, ...] = ()
    if seen.status is None:
        reasons = (f"not decided after {len(measured)} blocks ({measurement.seconds:.0f} s): {seen.withheld}; "
                   f"the job's budget or block limit ended first",) if seen.withheld else (
            undecided_reason(combined, seen.half_width, tolerance, len(measured), measurement.seconds, budget_s,
                             max_blocks),)
    elif seen.by_band_edge:
        reasons = (f"at the band's edge: a change of about the band's size, its estimate inside the band and its "
                   f"interval reaching past it, measured to within {100 * math.expm1(seen.half_width):.1f}% (half "
                   f"the band or less), where more blocks would only narrow it around the edge",)
    memory = memory_verdict(measurement, memory_tolerance)
    changed = changed_blocks(measured, start_conditions)
    without = None
    if changed:
        numbers = {block.block for block in changed}
        kept = tuple(pair for number, pair in enumerate(measured, 1) if number not in numbers)
        without = judge_ab(replace(measurement, pairs=kept), (), tolerance, memory_tolerance, family_size, budget_s,
                           max_blocks).status
    return AbVerdict(
        changed_blocks=changed, status_without_changed_blocks=without,
        status=status, ratio=math.exp(combined.log_ratio), ci_low=math.exp(combined.log_ratio - seen.half_width),
        ci_high=math.exp(combined.log_ratio + seen.half_width), floor=math.expm1(seen.half_width),
        between_blocks=combined.between_blocks if math.isfinite(combined.between_blocks) else None,
        within_block=combined.within_block if math.isfinite(combined.within_block) else None,
        reasons=reasons, **memory, **common,  # type: ignore[arg-type]
    )


def undecided_reason(combined: Combined, half_width: float, tolerance: float, blocks: int, seconds: float,
                     budget_s: float | None, max_blocks: int) -> str:
    """Why a case was not decided, the spread seen, and about how much more measuring would decide it: the interval
    shrinks as 1 / sqrt(blocks), so deciding needs the half width below the distance from the estimate to the
    nearer decision edge (the band, or 1 beyond it)."""
    log_band = math.log1p(tolerance)
    distance = abs(abs(combined.log_ratio) - log_band) if abs(combined.log_ratio) < log_band else abs(
        combined.log_ratio)
    factor = (half_width / distance) ** 2 if distance > 0 else math.inf
    needed_blocks = math.ceil(blocks * factor) if math.isfinite(factor) else None
    per_block_s = seconds / blocks if blocks else 0.0
    spread = (f"a block's own error {100 * math.expm1(combined.within_block):.1f}%, between blocks "
              f"{100 * math.expm1(combined.between_blocks):.1f}%"
              if math.isfinite(combined.between_blocks) else "spread unknown")
    if needed_blocks is None or needed_blocks > max_blocks:
        more = (f"more than the {max_blocks} blocks a case may take: a quieter machine, longer windows "
                "(--benchmark-max-time) or a wider band would decide it")
    else:
        more = (f"about {needed_blocks} blocks ({needed_blocks * per_block_s:.0f} s for this case) would decide it"
                + (f"; the job's budget was {budget_s:.0f} s (--perf-ab-budget)" if budget_s is not None else ""))
    return (f"not decided after {blocks} blocks ({seconds:.0f} s): floor {100 * math.expm1(half_width):.1f}% "
            f"against a band of {100 * tolerance:.1f}% ({spread}); {more}")


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
