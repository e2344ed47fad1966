"""Case histories for the site: merged from archives and baseline files without mixing machines or counting a
run twice; marks where torch, the config or the history changed and where the gate called a change; the index
row's figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfsuite.records import BaselineEntry, Case, StoredRun
from perfsuite.site.history import (
    FROM_BASELINE,
    BaselineSource,
    CaseHistory,
    HistorySession,
    marks,
    merge_histories,
    run_quartiles_s,
    sessions_of_entry,
    summarize,
)
from perfsuite.store.archive import ArchivedCase, ArchivedFile, ArchivedSession, ArchivedVerdict
from perfsuite.store.baselines import BaselineFile

CASE = Case("mps", "bf16", "resnet18", 64, "train", "standard")


def stored(median_s: float, recorded_at: str, commit: str | None = "abc1234", rounds=(0.9, 1.0, 1.1)) -> StoredRun:
    return StoredRun(median_s, len(rounds), tuple(median_s * r for r in rounds), 1_000_000, recorded_at, commit)


def entry(*runs: StoredRun, torch_version: str = "2.13.0", figure: str = "step") -> BaselineEntry:
    return BaselineEntry(
        case=CASE, config_digest="cfg1", torch_version=torch_version, threads=None, machine={"name": "m"},
        memory_figure="mps_driver_allocated_bytes", samples_per_step=64, flops_per_step=None, gpu_busy_fraction=None,
        tolerance=0.1, memory_tolerance=0.1, runs=runs, figure=figure,
    )


def baseline(machine: str, *runs: StoredRun, figure: str = "step") -> BaselineSource:
    return BaselineSource(Path(f"mps/{machine}.json"), machine,
                          BaselineFile("mps", {CASE.benchmark_id: entry(*runs, figure=figure)}))


def archived(machine: str, recorded_at: str, *medians: float, kind: str = "update",
             verdict: ArchivedVerdict | None = None, torch_version: str = "2.13.0", figure: str = "step"
             ) -> ArchivedFile:
    runs = tuple(stored(m, recorded_at) for m in medians)
    session = ArchivedSession("mps", machine, {"name": machine}, recorded_at, "abc1234", torch_version, kind,
                              (ArchivedCase(CASE, "cfg1", None, "mps_driver_allocated_bytes", 64, runs, verdict,
                                            figure),))
    return ArchivedFile(Path(f"archive/mps/{machine}/{recorded_at}.json"), session)


def session(recorded_at: str, *medians: float, torch_version: str = "2.13.0", config_digest: str = "cfg1",
            kind: str = "update", verdict: ArchivedVerdict | None = None, figure: str = "step") -> HistorySession:
    return HistorySession(recorded_at, "abc1234", torch_version, config_digest, kind, 64,
                          tuple(stored(m, recorded_at) for m in medians), verdict, "test", figure)


def history(*sessions: HistorySession) -> CaseHistory:
    return CaseHistory("mps", "ci-m2-max", CASE, "mps_driver_allocated_bytes", {"name": "ci-m2-max"}, sessions)


def test_the_same_case_on_two_machines_is_two_histories():
    merged = merge_histories([], [baseline("ci-m2-max", stored(0.010, "2026-12-01T10:00:00Z")),
                                  baseline("ci-m3-pro", stored(0.008, "2026-12-01T10:00:00Z"))])
    assert [(h.machine, [r.median_s for r in h.runs]) for h in merged] == [("ci-m2-max", [0.010]),
                                                                            ("ci-m3-pro", [0.008])]


def test_a_baseline_run_already_archived_is_not_counted_twice():
    merged = merge_histories(
        [archived("ci-m2-max", "2026-12-01T10:00:00Z", 0.010, 0.011)],
        [baseline("ci-m2-max", stored(0.010, "2026-12-01T10:00:00Z"), stored(0.011, "2026-12-01T10:00:00Z"),
                  stored(0.012, "2026-12-02T10:00:00Z"))],
    )
    (only,) = merged
    assert [r.median_s for r in only.runs] == [0.010, 0.011, 0.012]
    assert [s.kind for s in only.sessions] == ["update", FROM_BASELINE]


def test_histories_older_than_the_window_come_from_the_archive_in_time_order():
    merged = merge_histories(
        [archived("ci-m2-max", "2026-12-02T10:00:00Z", 0.011), archived("ci-m2-max", "2026-11-01T10:00:00Z", 0.02)],
        [baseline("ci-m2-max", stored(0.012, "2026-12-03T10:00:00Z"))],
    )
    assert [s.recorded_at[:10] for s in merged[0].sessions] == ["2026-11-01", "2026-12-02", "2026-12-03"]


def test_runs_of_one_recorded_at_and_commit_are_one_session():
    runs = (stored(0.01, "2026-12-01T10:00:00Z"), stored(0.02, "2026-12-01T10:00:00Z"),
            stored(0.03, "2026-12-01T10:00:00Z", commit="def5678"), stored(0.04, "2026-12-02T10:00:00Z"))
    assert [len(s.runs) for s in sessions_of_entry(entry(*runs), "f.json")] == [2, 1, 1]


def test_marks_name_torch_and_config_changes_rebaselines_and_called_changes():
    found = marks(history(
        session("2026-12-01T10:00:00Z", 0.010, torch_version="2.12.0"),
        session("2026-12-02T10:00:00Z", 0.009, kind="rebaseline"),
        session("2026-12-03T10:00:00Z", 0.0123, config_digest="cfg2",
                verdict=ArchivedVerdict("regressed", 1.23, 1.18, 1.29, 0.14, 0.10)),
        session("2026-12-04T10:00:00Z", 0.009, config_digest="cfg2",
                verdict=ArchivedVerdict("improved", 0.8, 0.75, 0.85, 0.14, 0.10)),
        session("2026-12-05T10:00:00Z", 0.009, config_digest="cfg2",
                verdict=ArchivedVerdict("unchanged", 1.0, 0.95, 1.05, 0.14, 0.10)),
    ))
    assert [(m.index, m.kind, m.label) for m in found] == [
        (1, "torch", "torch 2.12.0 -> 2.13.0"), (1, "rebaseline", "rebaseline"),
        (2, "config", "config cfg1 -> cfg2"), (2, "regressed", "regressed x1.23"), (3, "improved", "improved x0.8"),
    ]


def test_the_summary_sets_the_newest_session_against_earlier_runs_of_the_same_torch():
    summary = summarize(history(
        session("2026-12-01T10:00:00Z", 0.050, torch_version="2.12.0"),
        session("2026-12-02T10:00:00Z", 0.010, 0.012),
        session("2026-12-03T10:00:00Z", 0.013, 0.015, 0.014,
                verdict=ArchivedVerdict("regressed", 1.27, 1.1, 1.4, 0.14, 0.10)),
    ), sparkline_runs=4)
    assert summary.last_median_s == pytest.approx(0.014)
    assert summary.trend == pytest.approx(0.014 / 0.011)
    assert (summary.last_verdict, summary.floor, summary.run_count) == ("regressed", 0.14, 6)
    assert summary.sparkline_s == (0.012, 0.013, 0.015, 0.014)


def test_no_trend_without_earlier_runs_of_the_same_torch():
    summary = summarize(history(session("2026-12-01T10:00:00Z", 0.05, torch_version="2.12.0"),
                                session("2026-12-02T10:00:00Z", 0.01)), sparkline_runs=10)
    assert summary.trend is None and summary.last_verdict is None


def test_run_quartiles_are_numpys_for_runs_of_any_length():
    runs = [stored(1.0, "2026-12-01T10:00:00Z", rounds=r) for r in ((1.0,), (1, 2, 3, 4), (5, 1, 9), (2, 4, 6, 8))]
    expected = [np.percentile(r.round_times_s, [25, 75]) for r in runs]
    np.testing.assert_allclose(run_quartiles_s(runs), expected)


def test_a_change_of_figure_is_marked_as_a_torch_upgrade_is():
    found = marks(history(
        session("2026-12-01T10:00:00Z", 0.010, figure="latency"),
        session("2026-12-02T10:00:00Z", 0.008, figure="step", kind="rebaseline"),
        session("2026-12-03T10:00:00Z", 0.008, figure="step"),
    ))
    assert [(m.index, m.kind, m.label) for m in found] == [
        (1, "figure", "figure latency -> step"), (1, "rebaseline", "rebaseline"),
    ]


def test_each_session_keeps_the_figure_its_archive_or_baseline_file_states():
    merged = merge_histories(
        [archived("ci-m2-max", "2026-12-01T10:00:00Z", 0.010, figure="latency")],
        [baseline("ci-m2-max", stored(0.008, "2026-12-02T10:00:00Z"), figure="step")],
    )
    assert [s.figure for s in merged[0].sessions] == ["latency", "step"]


def test_the_trend_never_sets_one_figure_against_another():
    summary = summarize(history(session("2026-12-01T10:00:00Z", 0.05, figure="latency"),
                                session("2026-12-02T10:00:00Z", 0.04, figure="step")), 60)
    assert summary.trend is None
