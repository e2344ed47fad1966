"""Case histories: every run of a case on one machine, in time order, gathered from archives and baseline files.

A history is keyed by (device, machine, case): the same case on two machines is two histories, never one. The
archive holds whole sessions (their verdicts, whether they were updates or rebaselines); a baseline file holds
only its window of the newest runs, which become points too, except a run the archive already holds (the same
case, recorded_at and median). The functions after the records are pure: data in, data out.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from perfsuite.judge.conditions import changes_between
from perfsuite.matrix.axes import compile_mode_rank
from perfsuite.records import STEP_FIGURE, BaselineEntry, Case, Conditions, StoredRun, median_s
from perfsuite.store.archive import ArchivedFile, ArchivedSession, ArchivedVerdict
from perfsuite.store.baselines import BaselineFile

# A session read from a baseline file: whether it appended or started the history over is not kept there.
FROM_BASELINE = "baseline file"
# The trend sets the last session against this many runs before it (the gate's window).
TREND_WINDOW_RUNS = 20


@dataclass(frozen=True)
class HistorySession:
    """A case's runs of one session: when and at which commit, with which torch and model config, what kind of
    recording (`update`, `rebaseline`, or `FROM_BASELINE` when only a baseline file tells of it), the verdict
    judged then (None where not archived), the file it was read from, and which figure its rounds measured
    (`step`: steps back to back and one drain a round; `latency`: one step and a drain a round)."""

    recorded_at: str
    commit: str | None
    torch_version: str
    config_digest: str
    kind: str
    samples_per_step: int
    runs: tuple[StoredRun, ...]
    verdict: ArchivedVerdict | None
    source: str
    figure: str = STEP_FIGURE

    @cached_property
    def median_s(self) -> float:
        """The median of the runs' medians, in seconds."""
        # statistics.median: numpy's costs more than the rest of a session's page for a list this short.
        return statistics.median([r.median_s for r in self.runs])

    @property
    def samples_per_s(self) -> float:
        """Samples per second at the session's median time."""
        return self.samples_per_step / self.median_s

    @property
    def conditions(self) -> tuple[Conditions, ...]:
        """Every reading of conditions around the session's runs (none where they were not recorded)."""
        return tuple(reading for run in self.runs for reading in run.conditions)

    @property
    def memory_bytes(self) -> int | None:
        """The median of the runs' memory figures in bytes; None when no run measured one."""
        values = [r.memory_bytes for r in self.runs if r.memory_bytes is not None]
        return int(statistics.median(values)) if values else None


@dataclass(frozen=True)
class CaseHistory:
    """Every session of `case` on the machine named `machine` (its file name in the store), oldest first.
    `memory_figure` names the runs' memory figure; `identity` is the machine's identity as last recorded."""

    device: str
    machine: str
    case: Case
    memory_figure: str
    identity: Mapping[str, str]
    sessions: tuple[HistorySession, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        """(device, machine, benchmark id): what tells two histories apart."""
        return (self.device, self.machine, self.case.benchmark_id)

    @property
    def runs(self) -> tuple[StoredRun, ...]:
        """Every run, oldest first."""
        return tuple(r for s in self.sessions for r in s.runs)

    @property
    def last(self) -> HistorySession:
        """The newest session."""
        return self.sessions[-1]


@dataclass(frozen=True)
class Mark:
    """Something to point at on a history: at session `index`, a `kind` (torch, config, figure, conditions,
    rebaseline, regressed, improved) and a short `label` (`torch 2.11.0 -> 2.13.0`, `figure latency -> step`,
    `power source AC -> battery`, `x1.23`)."""

    index: int
    kind: str
    label: str


@dataclass(frozen=True)
class CaseSummary:
    """One row of the index: the newest session's median time, its trend (that median over the median of up to
    TREND_WINDOW_RUNS earlier runs of the same torch, config and figure; None without such runs), the newest verdict's
    status and floor (a fraction) where archived, the run count and the run medians for the sparkline."""

    last_median_s: float
    trend: float | None
    last_verdict: str | None
    floor: float | None
    run_count: int
    sparkline_s: tuple[float, ...]


def run_quartiles_s(runs: Sequence[StoredRun]) -> np.ndarray:
    """The first and third quartiles of each run's stored rounds in seconds, as an array of shape (runs, 2)
    (numpy's linear interpolation); runs with as many stored rounds are computed together."""
    quartiles = np.empty((len(runs), 2))
    by_length: dict[int, list[int]] = {}
    for index, run in enumerate(runs):
        by_length.setdefault(len(run.round_times_s), []).append(index)
    for indices in by_length.values():
        times = np.array([runs[i].round_times_s for i in indices])
        quartiles[indices] = np.percentile(times, [25, 75], axis=1).T
    return quartiles


def summarize(history: CaseHistory, sparkline_runs: int) -> CaseSummary:
    """The index row of `history`; the sparkline holds the medians of its newest `sparkline_runs` runs."""
    last = history.last
    earlier = [
        r.median_s for s in history.sessions[:-1]
        if (s.torch_version, s.config_digest, s.figure) == (last.torch_version, last.config_digest, last.figure)
        for r in s.runs
    ][-TREND_WINDOW_RUNS:]
    runs = history.runs
    return CaseSummary(
        last_median_s=last.median_s,
        trend=last.median_s / median_s(earlier) if earlier else None,
        last_verdict=None if last.verdict is None else last.verdict.status,
        floor=None if last.verdict is None else last.verdict.floor,
        run_count=len(runs),
        sparkline_s=tuple(r.median_s for r in runs[-sparkline_runs:]),
    )


def marks(history: CaseHistory) -> tuple[Mark, ...]:
    """Where the history changes torch version, model config, the figure its rounds measure or the conditions that
    move speed (power source, energy mode, heat, a GPU slowdown: `perfsuite.judge.conditions`; a session without
    readings marks nothing), starts over (rebaseline), and where a session was judged regressed or improved (with the
    ratio), in session order."""
    found: list[Mark] = []
    previous: HistorySession | None = None
    for index, session in enumerate(history.sessions):
        if previous is not None and session.torch_version != previous.torch_version:
            found.append(Mark(index, "torch", f"torch {previous.torch_version} -> {session.torch_version}"))
        if previous is not None and session.config_digest != previous.config_digest:
            found.append(Mark(index, "config", f"config {previous.config_digest} -> {session.config_digest}"))
        if previous is not None and session.figure != previous.figure:
            found.append(Mark(index, "figure", f"figure {previous.figure} -> {session.figure}"))
        if previous is not None:
            for change in changes_between(previous.conditions, session.conditions):
                found.append(Mark(index, "conditions", f"{change.fact} {'/'.join(change.before)} -> "
                                                       f"{'/'.join(change.after)}"))
        if session.kind == "rebaseline":
            found.append(Mark(index, "rebaseline", "rebaseline"))
        verdict = session.verdict
        if verdict is not None and verdict.status in ("regressed", "improved"):
            ratio = "" if verdict.ratio is None else f" x{verdict.ratio:.3g}"
            found.append(Mark(index, verdict.status, f"{verdict.status}{ratio}"))
        previous = session
    return tuple(found)


# --- merging -----------------------------------------------------------------------------------------------

def session_of_archived_case(session: ArchivedSession, index: int, source: str) -> HistorySession:
    """The `index`-th case of an archived session as a history session; `source` names the archive file."""
    archived = session.cases[index]
    return HistorySession(
        recorded_at=archived.runs[0].recorded_at, commit=session.commit, torch_version=session.torch_version,
        config_digest=archived.config_digest, kind=session.kind, samples_per_step=archived.samples_per_step,
        runs=archived.runs, verdict=archived.verdict, source=source, figure=archived.figure,
    )


def sessions_of_entry(entry: BaselineEntry, source: str) -> list[HistorySession]:
    """A baseline entry's runs as sessions: consecutive runs of one recorded_at and commit are one session."""
    groups: list[list[StoredRun]] = []
    for run in entry.runs:
        if groups and (groups[-1][0].recorded_at, groups[-1][0].commit) == (run.recorded_at, run.commit):
            groups[-1].append(run)
        else:
            groups.append([run])
    return [
        HistorySession(
            recorded_at=runs[0].recorded_at, commit=runs[0].commit, torch_version=entry.torch_version,
            config_digest=entry.config_digest, kind=FROM_BASELINE, samples_per_step=entry.samples_per_step,
            runs=tuple(runs), verdict=None, source=source, figure=entry.figure,
        )
        for runs in groups
    ]


@dataclass(frozen=True)
class BaselineSource:
    """A baseline file read for the site: its path, the machine its name gives (the store names a machine's file
    `<device>/<machine>.json`) and its entries."""

    path: Path
    machine: str
    baseline: BaselineFile


@dataclass
class _Gathered:
    case: Case
    memory_figure: str
    identity: Mapping[str, str]
    newest_at: str
    sessions: list[HistorySession]


def merge_histories(archived: Sequence[ArchivedFile], baselines: Sequence[BaselineSource]) -> tuple[CaseHistory, ...]:
    """One history per (device, machine, case) from archived sessions and baseline files; a baseline run already
    archived (same case, recorded_at and median) is left out. The machine's identity and the memory figure are
    the newest recorded. Sorted by `history_order`."""
    gathered: dict[tuple[str, str, str], _Gathered] = {}

    def add(key: tuple[str, str, str], case: Case, memory_figure: str, identity: Mapping[str, str],
            sessions: Iterable[HistorySession]) -> None:
        found = list(sessions)
        if not found:
            return
        newest_at = max(s.recorded_at for s in found)
        known = gathered.get(key)
        if known is None:
            gathered[key] = _Gathered(case, memory_figure, identity, newest_at, found)
            return
        known.sessions.extend(found)
        if newest_at > known.newest_at:
            known.memory_figure, known.identity, known.newest_at = memory_figure, identity, newest_at

    for source in archived:
        session = source.session
        for index, archived_case in enumerate(session.cases):
            key = (session.device, session.machine_slug, archived_case.case.benchmark_id)
            add(key, archived_case.case, archived_case.memory_figure, session.machine,
                [session_of_archived_case(session, index, str(source.path))])
    archived_runs = {
        key: {(r.recorded_at, r.median_s) for s in found.sessions for r in s.runs} for key, found in gathered.items()
    }
    for baseline in baselines:
        for benchmark_id, entry in baseline.baseline.entries.items():
            key = (entry.case.device, baseline.machine, benchmark_id)
            known_runs = archived_runs.get(key, set())
            fresh = []
            for window_session in sessions_of_entry(entry, str(baseline.path)):
                runs = tuple(r for r in window_session.runs if (r.recorded_at, r.median_s) not in known_runs)
                if runs:
                    fresh.append(replace(window_session, runs=runs))
            add(key, entry.case, entry.memory_figure, entry.machine, fresh)
    histories = [
        CaseHistory(key[0], key[1], found.case, found.memory_figure, found.identity,
                    tuple(sorted(found.sessions, key=lambda s: s.recorded_at)))
        for key, found in gathered.items()
    ]
    return tuple(sorted(histories, key=history_order))


def history_order(history: CaseHistory) -> tuple[object, ...]:
    """Device, machine, model, mode, dtype, batch size, compile mode (in its declared order), profile."""
    case = history.case
    return (history.device, history.machine, case.model, case.mode, case.dtype, case.batch_size,
            compile_mode_rank(case.compile), case.profile)
