"""The bisect's rule (perfsuite.judge.bisect): run against a simulated range whose changes are known, it names them,
within the promised number of judgements, skips what cannot be measured and says when it could not decide."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsuite.judge.bisect import MAX_ATTEMPTS, Finding, Judge, Judgement, commit_status, next_step

BAND = 0.05


def oracle(slowdowns: dict[int, float], errored: frozenset[int] = frozenset(),
           inconclusive: frozenset[tuple[int, int]] = frozenset()):
    """A judge of a range where position p makes the code slowdowns[p] times slower: head against base is regressed
    when the product of the slowdowns in (base, head] exceeds the band; `errored` positions cannot be measured;
    pairs in `inconclusive` are never decided."""

    def judge(head: int, base: int):
        if head in errored:
            return "errored"
        if (head, base) in inconclusive:
            return "inconclusive"
        ratio = math.prod(factor for position, factor in slowdowns.items() if base < position <= head)
        return "regressed" if ratio > 1 + BAND else "unchanged"

    return judge


def bisect(last: int, judge) -> tuple[Finding, list[Judge]]:
    """Run the rule to its finding with `judge`; the finding and every judgement asked for."""
    made: list[Judgement] = []
    asked: list[Judge] = []
    while True:
        step = next_step(last, made)
        if isinstance(step, Finding):
            return step, asked
        assert len(asked) < 10 * (last + 1), "the rule asked for more judgements than the range could need"
        asked.append(step)
        made.append(Judgement(step.head, step.base, judge(step.head, step.base)))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64).flatmap(lambda last: st.tuples(st.just(last), st.integers(1, last))))
def test_one_step_change_is_named_within_log2_plus_3_judgements(drawn):
    last, position = drawn
    finding, asked = bisect(last, oracle({position: 1.3}))
    assert [change.first_bad for change in finding.changes] == [position]
    assert finding.changes[0].single and finding.changes[0].step
    assert not finding.gradual
    assert len(asked) <= math.ceil(math.log2(last)) + 3 if last > 1 else len(asked) == 1


def test_sixteen_commits_take_at_most_seven_judgements_wherever_the_change_is():
    worst = max(len(bisect(15, oracle({position: 1.3}))[1]) for position in range(1, 16))
    assert worst <= math.log2(16) + 3


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 40).flatmap(lambda last: st.tuples(
    st.just(last), st.lists(st.integers(1, last), min_size=2, max_size=2, unique=True))))
def test_two_changes_are_both_found_and_reported_as_more_than_one(drawn):
    last, positions = drawn
    finding, _ = bisect(last, oracle({position: 1.15 for position in positions}))
    assert [change.first_bad for change in finding.changes] == sorted(positions)
    assert finding.gradual


def test_a_slowdown_spread_over_small_steps_is_reported_gradual_not_forced_on_one_commit():
    finding, _ = bisect(15, oracle({position: 1.02 for position in range(4, 12)}))
    assert finding.gradual
    assert all(change.alone == "unchanged" for change in finding.changes)


def test_a_pair_that_does_not_differ_stops_after_the_first_judgement():
    finding, asked = bisect(15, oracle({}))
    assert finding.reproduced == "unchanged" and finding.changes == ()
    assert len(asked) == 1


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 30).flatmap(lambda last: st.tuples(
    st.just(last), st.integers(1, last), st.sets(st.integers(1, last - 1), max_size=3))))
def test_positions_that_cannot_be_measured_are_skipped_and_named(drawn):
    last, position, broken = drawn
    broken = broken - {position}
    finding, asked = bisect(last, oracle({position: 1.3}, errored=frozenset(broken)))
    (change,) = finding.changes
    assert position in change.candidates and change.first_bad == position
    # Named exactly where a skipped position could hide the change (it lies between the last good and the first bad).
    assert set(change.candidates) - {position} <= broken
    assert set(finding.errored) <= broken and set(change.candidates) - {position} <= set(finding.errored)
    assert all(judge.head not in broken or judge.purpose == "search" for judge in asked)


def test_a_broken_commit_just_before_the_change_leaves_two_candidates():
    finding, _ = bisect(15, oracle({9: 1.3}, errored=frozenset({8})))
    assert finding.changes[0].candidates == (8, 9)
    assert finding.changes[0].against == 7
    assert finding.errored == (8,)


def test_an_undecided_midpoint_gets_more_budget_then_a_neighbour():
    last = 15
    never = frozenset({(7, 0), (8, 0)})
    finding, asked = bisect(last, oracle({11: 1.3}, inconclusive=never))
    tries_of_7 = [judge for judge in asked if (judge.head, judge.base) == (7, 0)]
    assert [judge.attempt for judge in tries_of_7] == list(range(1, MAX_ATTEMPTS + 1))
    assert tries_of_7[-1].budget_scale > tries_of_7[0].budget_scale
    assert finding.changes[0].first_bad == 11
    assert set(finding.undecided) == {7, 8}


def test_a_reproduction_that_cannot_be_judged_stops_and_says_so():
    finding, asked = bisect(15, oracle({4: 1.3}, inconclusive=frozenset({(15, 0)})))
    assert finding.reproduced == "inconclusive" and finding.changes == ()
    assert len(asked) == MAX_ATTEMPTS


def test_a_range_of_one_position_is_refused():
    with pytest.raises(ValueError, match="good and a bad"):
        next_step(0, [])


@pytest.mark.parametrize(("statuses", "expected"), [
    (("unchanged", "regressed", "inconclusive"), "regressed"),
    (("errored", "errored"), "errored"),
    (("unchanged", "errored"), "inconclusive"),
    (("unchanged", "inconclusive"), "inconclusive"),
    (("unchanged", "improved"), "improved"),
    (("unchanged", "unchanged"), "unchanged"),
    ((), "errored"),
])
def test_one_status_for_several_cases(statuses, expected):
    assert commit_status(statuses) == expected
