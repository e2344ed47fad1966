"""What the baseline store writes, it reads back: a property test over run histories.

Histories of 1 to 500 rounds per run (trimmed to 50 stored rounds above 50, the median of every round kept),
times from 1 ns to 100 s laid out so that the median of all rounds falls anywhere the data allow (inside the kept
rounds, below or above all of them), memory absent or any size the reader takes, and text fields of arbitrary
unicode, lone surrogates included. Each history goes through the real writer (`stored_run`, `record_runs`) and
the real reader (`load_baseline`) and must come back as the store promises; the archive the gate writes beside the
baselines (`write_session`, `read_archive`) too, for sessions of the same runs with the verdicts judged:

- every field equal, except that a high surrogate directly followed by a low one reads back as the one character
  that pair encodes (JSON cannot tell the two apart: RFC 8259, section 7);
- per run: the round count, at most MAX_STORED_ROUNDS rounds, the median of every round, times at 4 significant
  figures.
"""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.judge.verdicts import VERDICT_STATUSES
from perfsuite.matrix.axes import COMPILE_MODES
from perfsuite.records import FIGURES, MIN_ROUND_TIME_S, BaselineEntry, Case, StoredRun
from perfsuite.store.archive import (
    SESSION_KINDS,
    ArchivedCase,
    ArchivedSession,
    ArchivedVerdict,
    read_archive,
    session_to_json,
    write_session,
)
from perfsuite.store.baselines import (
    MAX_STORED_ROUNDS,
    STORED_SIGNIFICANT_FIGURES,
    baseline_to_json,
    load_baseline,
    record_runs,
    stored_run,
)
from perfsuite.store.jsonfile import MAX_JSON_INTEGER

EXAMPLES = 250
LONGEST_ROUND_S = 100.0
DEVICES = ("cpu", "cuda", "mps")

TEXT = st.text(
    st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), max_size=12
)
TIME_S = st.floats(np.log10(MIN_ROUND_TIME_S), np.log10(LONGEST_ROUND_S)).map(
    lambda exponent: min(max(10.0**exponent, MIN_ROUND_TIME_S), LONGEST_ROUND_S)
)
SPREAD = st.floats(1.0, 1000.0)
PATTERNS = ("scattered", "rising", "falling", "kept-slow", "kept-fast", "constant")


def kept_indices(rounds: int) -> set[int]:
    """The rounds `stored_run` keeps of `rounds` (evenly spaced), for laying out adversarial histories."""
    if rounds <= MAX_STORED_ROUNDS:
        return set(range(rounds))
    return set(np.linspace(0, rounds - 1, MAX_STORED_ROUNDS).round().astype(int).tolist())


@st.composite
def round_times_s(draw: st.DrawFn) -> list[float]:
    """A run's rounds: drawn one by one (up to 60, so that trimming starts), or up to 500 laid out in a pattern
    from a drawn base time, spread and seed: the median of all rounds then lies inside, below or above the kept
    rounds."""
    if draw(st.booleans()):
        return draw(st.lists(TIME_S, min_size=1, max_size=60))
    rounds = draw(st.integers(1, 500))
    base_s, spread, pattern = draw(TIME_S), draw(SPREAD), draw(st.sampled_from(PATTERNS))
    high_s = min(base_s * spread, LONGEST_ROUND_S)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if pattern == "constant":
        return [base_s] * rounds
    if pattern in ("kept-slow", "kept-fast"):
        kept = kept_indices(rounds)
        slow_kept = pattern == "kept-slow"
        return [high_s if (index in kept) == slow_kept else base_s for index in range(rounds)]
    times = np.exp(rng.uniform(np.log(base_s), np.log(high_s), rounds)) if high_s > base_s else np.full(rounds, base_s)
    times = np.clip(times, MIN_ROUND_TIME_S, LONGEST_ROUND_S)
    if pattern == "rising":
        times.sort()
    elif pattern == "falling":
        times = np.sort(times)[::-1]
    return [float(t) for t in times]


@st.composite
def stored_runs(draw: st.DrawFn) -> tuple[list[float], StoredRun]:
    times = draw(round_times_s())
    run = stored_run(
        times, draw(st.none() | st.integers(0, 2**50)), draw(TEXT), draw(st.none() | TEXT)
    )
    return times, run


@st.composite
def entries(draw: st.DrawFn, device: str) -> tuple[list[list[float]], BaselineEntry]:
    case = Case(
        device=device, dtype=draw(TEXT), model=draw(TEXT), batch_size=draw(st.integers(1, MAX_JSON_INTEGER)),
        mode=draw(TEXT), profile=draw(TEXT), compile=draw(st.sampled_from(COMPILE_MODES)),
    )
    histories = draw(st.lists(stored_runs(), min_size=1, max_size=3))
    return [times for times, _ in histories], BaselineEntry(
        case=case, config_digest=draw(TEXT), torch_version=draw(TEXT),
        threads=draw(st.none() | st.integers(0, MAX_JSON_INTEGER)),
        machine=draw(st.dictionaries(TEXT, TEXT, max_size=4)), memory_figure=draw(TEXT),
        samples_per_step=draw(st.integers(1, MAX_JSON_INTEGER)),
        flops_per_step=draw(st.none() | st.integers(0, MAX_JSON_INTEGER)),
        gpu_busy_fraction=draw(st.none() | st.floats(0.0, 1.0)),
        tolerance=draw(st.floats(0.0, 1.0, exclude_max=True)),
        memory_tolerance=draw(st.floats(0.0, 1.0, exclude_max=True)),
        runs=tuple(run for _, run in histories),
    )


def as_json_promises(text: str) -> str:
    """`text` as JSON keeps it: a high surrogate followed by a low one becomes the character they encode."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def promised(document: Any) -> Any:
    """A baseline's JSON document with every text as the store promises to read it back."""
    if isinstance(document, str):
        return as_json_promises(document)
    if isinstance(document, dict):
        return {as_json_promises(key): promised(value) for key, value in document.items()}
    if isinstance(document, list):
        return [promised(value) for value in document]
    return document


def significant(value: float) -> float:
    return float(f"{value:.{STORED_SIGNIFICANT_FIGURES}g}")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(device=st.sampled_from(DEVICES), data=st.data())
def test_what_the_store_writes_it_reads_back(device, data):
    drawn = data.draw(st.lists(entries(device), min_size=1, max_size=2))
    recorded = {entry.case.benchmark_id: entry for _, entry in drawn}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / device / "machine.json"
        written = record_runs(path, device, recorded)
        read = load_baseline(path)
    assert read is not None
    assert baseline_to_json(read) == promised(baseline_to_json(written))


@settings(max_examples=EXAMPLES, deadline=None)
@given(history=stored_runs())
def test_a_stored_run_keeps_the_round_count_the_median_of_every_round_and_at_most_50_rounds(history):
    times, run = history
    assert run.rounds == len(times)
    assert len(run.round_times_s) == min(len(times), MAX_STORED_ROUNDS)
    assert run.median_s == significant(float(np.median(times)))
    assert all(t == significant(t) for t in run.round_times_s)



# What a session gives the archive: names the matrix and the hardware make (never empty), UTC times as the gate
# writes them, a commit or none.
NAME = TEXT.filter(bool)
RECORDED_AT = st.datetimes(datetime(2000, 1, 1), datetime(2999, 12, 31)).map(
    lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")
)
RATIO = st.none() | st.floats(1e-6, 1e6)


@st.composite
def archived_verdicts(draw: st.DrawFn) -> ArchivedVerdict | None:
    if draw(st.booleans()):
        return None
    return ArchivedVerdict(
        status=draw(st.sampled_from(VERDICT_STATUSES)), ratio=draw(RATIO), ci_low=draw(RATIO), ci_high=draw(RATIO),
        floor=draw(RATIO), tolerance=draw(st.floats(0.0, 1.0, exclude_max=True)),
    )


@st.composite
def archived_sessions(draw: st.DrawFn, device: str) -> ArchivedSession:
    recorded_at, commit = draw(RECORDED_AT), draw(st.none() | NAME)
    cases = []
    for index in range(draw(st.integers(1, 3))):
        case = Case(device, draw(NAME), draw(NAME), draw(st.integers(1, MAX_JSON_INTEGER)), f"mode{index}",
                    draw(NAME), draw(st.sampled_from(COMPILE_MODES)))
        runs = tuple(
            stored_run(times, draw(st.none() | st.integers(0, 2**50)), recorded_at, commit)
            for times in draw(st.lists(round_times_s(), min_size=1, max_size=3))
        )
        cases.append(ArchivedCase(
            case, draw(NAME), draw(st.none() | st.integers(0, MAX_JSON_INTEGER)), draw(NAME),
            draw(st.integers(1, MAX_JSON_INTEGER)), runs, draw(archived_verdicts()), draw(st.sampled_from(FIGURES)),
        ))
    return ArchivedSession(
        device=device, machine_slug=draw(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)),
        machine=draw(st.dictionaries(TEXT, TEXT, max_size=4)), recorded_at=recorded_at, commit=commit,
        torch_version=draw(NAME), kind=draw(st.sampled_from(SESSION_KINDS)), cases=tuple(cases),
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(device=st.sampled_from(DEVICES), data=st.data())
def test_what_the_archive_writes_it_reads_back(device, data):
    session = data.draw(archived_sessions(device))
    with tempfile.TemporaryDirectory() as folder:
        write_session(folder, session)
        reading = read_archive(folder)
    assert reading.problems == ()
    (read,) = reading.sessions
    assert session_to_json(read) == promised(session_to_json(session))
