"""The rule of a bisect: which position to judge next, against which, and what the judgements found. Pure: it reads
the judgements made so far and returns the next one to make, or the finding.

Positions 0..last of an ordered range: 0 is good and `last` bad (commits oldest first, or environments holding
successive torch releases). A judgement is an A/B of `head` against `base` read as one status (`commit_status`).

1. `last` against 0: unless it reads regressed, the slowdown does not reproduce here and the bisect stops.
2. Binary search: each position between the nearest unchanged one (`low`) and the nearest regressed one (`high`)
   is judged against the segment's good end; regressed moves `high` down, unchanged (or improved) moves `low` up.
   A position that cannot be measured (errored: it does not build or import) is skipped, and so is one still
   inconclusive after MAX_ATTEMPTS judgements (each judgement after the first is given more budget): the search takes
   the free position nearest the middle instead, as `git bisect skip` does. When no free position is left, `high`
   is the first bad position, or, where skipped positions lie between `low` and `high`, one of them or `high`.
3. The first bad position against its parent (`high - 1`, or `low` where the parent was skipped): its own ratio.
   Regressed: a step at that position; unchanged: the slowdown is gradual (that position only crossed the band).
4. `last` against the first bad position: regressed means the range holds another change after it, and steps 2-4
   repeat on the rest of the range with that position as its good end; otherwise the bisect ends.

With one change and every judgement decided, a bisect of `last` positions makes at most ceil(log2(last)) + 3
judgements: 1 reproduces, ceil(log2(last)) search, 1 to the parent, 1 for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from perfsuite.judge.ab import AbStatus

# Judgements of one pair before a position counts as undecided (the second with more budget).
MAX_ATTEMPTS = 2
# How much more budget each further attempt of one pair is given: the budget times this, per attempt after the first.
BUDGET_GROWTH = 2.0
Purpose = Literal["reproduce", "search", "parent", "rest"]
NOT_SLOWER: tuple[AbStatus, ...] = ("unchanged", "improved")
# The status of head against base (raising _Pending with the judgement to make while there is none).
_Settled = Callable[[int, int, Purpose], AbStatus]


@dataclass(frozen=True)
class Judgement:
    """One A/B judgement: the position `head` against the position `base`, and the status it read."""

    head: int
    base: int
    status: AbStatus


@dataclass(frozen=True)
class Judge:
    """The next judgement to make: `head` against `base`, why (`purpose`), and which attempt of that pair it is
    (1 first; later ones get `budget_scale` times the budget)."""

    head: int
    base: int
    purpose: Purpose
    attempt: int

    @property
    def budget_scale(self) -> float:
        """The factor on the A/B budget for this attempt."""
        return float(BUDGET_GROWTH ** (self.attempt - 1))


@dataclass(frozen=True)
class Change:
    """A change found in the segment that starts at the good position `segment_good`: the first bad position
    (`first_bad`) or, where skipped positions hide which one, every candidate (`candidates`, `first_bad` last);
    the position its own ratio was judged against (`against`: its parent, or the nearest good one) and that
    judgement's status (`alone`: regressed is a step; unchanged or improved, a gradual slowdown that only crossed
    the band there; None when it was not judged)."""

    segment_good: int
    first_bad: int
    candidates: tuple[int, ...]
    against: int
    alone: AbStatus | None

    @property
    def single(self) -> bool:
        """Whether one position is named (no skipped position could be it)."""
        return len(self.candidates) == 1

    @property
    def step(self) -> bool:
        """Whether the position alone makes a slowdown (its judgement against its parent regressed)."""
        return self.alone == "regressed"


@dataclass(frozen=True)
class Finding:
    """What the bisect found: `reproduced` (the status of `last` against 0: only "regressed" reproduces), the
    changes in range order, the positions skipped because they could not be measured (`errored`) or judged
    (`undecided`), and the status of the last judgement of `last` against the last change (`after_last_change`:
    "regressed" never stays, None when not judged or there is no change)."""

    reproduced: AbStatus
    changes: tuple[Change, ...]
    errored: tuple[int, ...]
    undecided: tuple[int, ...]
    after_last_change: AbStatus | None

    @property
    def gradual(self) -> bool:
        """Whether the slowdown is spread over several positions: more than one change, or one that does not make a
        slowdown on its own."""
        return len(self.changes) > 1 or any(change.alone in NOT_SLOWER for change in self.changes)


def commit_status(statuses: Sequence[AbStatus]) -> AbStatus:
    """One status for a judgement of several cases: regressed when any case regressed; errored when every case
    errored (nothing could be measured: a commit that does not build or import); inconclusive when any case could
    not be judged or measured; improved when every case is unchanged or improved and one improved; else unchanged."""
    if not statuses:
        return "errored"
    if "regressed" in statuses:
        return "regressed"
    if all(status == "errored" for status in statuses):
        return "errored"
    if any(status in ("inconclusive", "errored") for status in statuses):
        return "inconclusive"
    return "improved" if "improved" in statuses else "unchanged"


class _Pending(Exception):
    """The next judgement is known: the replay stops there."""

    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge


def next_step(last: int, judgements: Sequence[Judgement]) -> Judge | Finding:
    """The next judgement of a bisect over positions 0 (good) .. `last` (bad) after `judgements` (in the order they
    were made), or the finding when the bisect is over. Raises ValueError for a range of fewer than two positions
    or a judgement outside it."""
    if last < 1:
        raise ValueError(f"a bisect needs a good and a bad position; got positions 0..{last}")
    for judgement in judgements:
        if not (0 <= judgement.base < judgement.head <= last):
            raise ValueError(f"judgement {judgement} lies outside 0..{last} or judges a position against a later one")
    made: dict[tuple[int, int], list[AbStatus]] = {}
    for judgement in judgements:
        made.setdefault((judgement.head, judgement.base), []).append(judgement.status)

    def settled(head: int, base: int, purpose: Purpose) -> AbStatus:
        """The status of `head` against `base`: the first decided one, or inconclusive after MAX_ATTEMPTS; raises
        _Pending with the judgement to make while neither."""
        statuses = made.get((head, base), [])
        decided = [status for status in statuses if status != "inconclusive"]
        if decided:
            return decided[0]
        if len(statuses) >= MAX_ATTEMPTS:
            return "inconclusive"
        raise _Pending(Judge(head, base, purpose, len(statuses) + 1))

    try:
        return _replay(last, made, settled)
    except _Pending as pending:
        return pending.judge


def _replay(last: int, made: dict[tuple[int, int], list[AbStatus]], settled: _Settled) -> Finding:
    reproduced = settled(last, 0, "reproduce")
    if reproduced != "regressed":
        return Finding(reproduced, (), (), (), None)
    changes: list[Change] = []
    errored: set[int] = set()
    undecided: set[int] = set()
    good = 0
    while True:
        low, high, skipped = _search(good, last, made, settled)
        errored |= {position for position, status in skipped.items() if status == "errored"}
        undecided |= {position for position, status in skipped.items() if status != "errored"}
        hidden = tuple(position for position in sorted(skipped) if low < position < high)
        alone = settled(high, low, "parent")
        changes.append(Change(good, high, (*hidden, high), low, alone))
        if high == last:
            return Finding(reproduced, tuple(changes), tuple(sorted(errored)), tuple(sorted(undecided)), None)
        rest = settled(last, high, "rest")
        if rest != "regressed":
            return Finding(reproduced, tuple(changes), tuple(sorted(errored)), tuple(sorted(undecided)), rest)
        good = high


def _search(good: int, last: int, made: dict[tuple[int, int], list[AbStatus]],
            settled: _Settled) -> tuple[int, int, dict[int, AbStatus]]:
    """Binary search of the segment good..last (last regressed against good): (low, high, skipped positions with
    their status), once no free position lies between low and high."""
    while True:
        verdicts: dict[int, AbStatus] = {}
        for position in range(good + 1, last):
            if (position, good) in made:
                try:
                    verdicts[position] = settled(position, good, "search")
                except _Pending:
                    pass  # judged once, inconclusive: still free, and its next attempt comes when it is chosen
        high = min((p for p, status in verdicts.items() if status == "regressed"), default=last)
        low = max((p for p, status in verdicts.items() if status in NOT_SLOWER and p < high), default=good)
        skipped: dict[int, AbStatus] = {p: status for p, status in verdicts.items()
                                        if status in ("errored", "inconclusive")}
        free = [p for p in range(low + 1, high) if p not in verdicts]
        if not free:
            return low, high, skipped
        middle = (low + high) / 2
        chosen = min(free, key=lambda p: (abs(p - middle), p))
        raise _Pending(Judge(chosen, good, "search", len(made.get((chosen, good), [])) + 1))


@dataclass(frozen=True)
class Position:
    """One position of a bisect's range: a commit (`commit`, its `subject` and `author_date`), or an environment
    (`python`, the path of its interpreter, and its `torch_version`)."""

    commit: str | None = None
    subject: str | None = None
    author_date: str | None = None
    python: str | None = None
    torch_version: str | None = None

    @property
    def label(self) -> str:
        """How a person names it: the short hash and subject, or torch's version and the interpreter."""
        if self.commit is not None:
            return f"{self.commit[:12]} {self.subject or ''}".strip()
        return f"torch {self.torch_version} ({self.python})"


@dataclass(frozen=True)
class CaseReading:
    """One case of a judgement as the A/B job judged it: its status, head/base ratio with its interval, the floor
    (the smallest change the job could see, a fraction) and the job's message."""

    benchmark_id: str
    status: AbStatus
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    floor: float | None
    message: str | None = None


@dataclass(frozen=True)
class Step:
    """A judgement made: what was asked (`judge`), the status read over the tracked cases, each case's reading, the
    seconds it took, why it could not measure (`reason`, when errored) and where its A/B summary was written."""

    judge: Judge
    status: AbStatus
    cases: tuple[CaseReading, ...]
    seconds: float
    reason: str | None = None
    summary_path: str | None = None

    @property
    def judgement(self) -> Judgement:
        return Judgement(self.judge.head, self.judge.base, self.status)

    @property
    def headline(self) -> CaseReading | None:
        """The case that speaks for the step: the one with the largest ratio among those that regressed, else
        among all measured."""
        measured = [case for case in self.cases if case.ratio is not None]
        regressed = [case for case in measured if case.status == "regressed"]
        return max(regressed or measured, key=lambda case: case.ratio or 0.0, default=None)
