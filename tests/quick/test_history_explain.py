"""A history's op summary (`BaselineEntry.op_profile`): what the store keeps of it (bounded), how it is written, read
back and carried from session to session, how files without it still read, and how a verdict against the history is
explained with it (`explain_against_history`) in the gate's reports and the archive."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from perfsuite.errors import BadFileError
from perfsuite.judge.explain import NO_RECORDED_SUMMARY, Explanation, explain_against_history
from perfsuite.records import (
    HOST_TIMES_FASTEST_STEP,
    HOST_TIMES_SUMMED,
    MAX_PROFILE_KERNELS,
    MAX_PROFILE_OPS,
    OpProfile,
    OpTime,
)
from perfsuite.render import summary
from perfsuite.store import archive
from perfsuite.store.baselines import (
    MAX_STORED_NAME_CHARACTERS,
    BaselineFile,
    append_runs,
    baseline_to_json,
    load_baseline,
    record_runs,
    stored_op_profile,
)
from tests.quick.test_baselines import BENCHMARK_ID, entry, stored, write_document
from tests.quick.test_explain import BASE, profile
from tests.quick.test_summary import REGRESSED

REPOSITORY = Path(__file__).resolve().parents[2]
AT, COMMIT = "2026-12-06T20:00:00Z", "abc1234"
NORM_TWICE = {**BASE, "aten::native_layer_norm": (40, 0.008)}


def recorded(ops: dict[str, tuple[int, float]] = BASE, at: str = AT, commit: str | None = COMMIT) -> OpProfile:
    return stored_op_profile(profile(ops), at, commit)


def test_a_recorded_summary_is_written_beside_the_runs_and_reads_back_equal(tmp_path):
    path = tmp_path / "cpu" / "amd-epyc.json"
    record_runs(path, "cpu", {BENCHMARK_ID: entry(stored(), op_profile=recorded())})
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries[BENCHMARK_ID].op_profile == recorded()
    written = json.loads(path.read_text())
    assert written["schema_version"] == 3 and written["entries"][BENCHMARK_ID]["op_profile"]["commit"] == COMMIT


def test_entries_recorded_before_summaries_read_as_having_none():
    committed = load_baseline(REPOSITORY / "baselines" / "cpu" / "shared-2core-vm.json")
    assert committed is not None and committed.entries
    assert all(found.op_profile is None for found in committed.entries.values())


def test_a_file_recorded_without_a_summary_has_no_op_profile_field(tmp_path):
    document = baseline_to_json(BaselineFile("cpu", {BENCHMARK_ID: entry(stored())}))
    assert "op_profile" not in document["entries"][BENCHMARK_ID]


def test_a_stored_summary_keeps_at_most_the_profiles_caps_and_short_names_whatever_it_is_given():
    huge_name = "aten::" + "x" * 5000
    ops = tuple(OpTime(f"{huge_name}{index}", 3, 0.001 * (index + 1)) for index in range(100))
    warnings = tuple((f"{'w' * 3000}{index}", 1) for index in range(60))
    big = OpProfile("cpu", 8, 1.0, 0.1, ops=ops, other_ops=OpTime("(other ops)", 9, 0.5), kernels=ops[:60],
                    regions=ops[:60], fallback_warnings=warnings, limits=tuple("l" * 900 for _ in range(60)))
    kept = stored_op_profile(big, AT, COMMIT)
    assert len(kept.ops) == MAX_PROFILE_OPS and len(kept.kernels) == len(kept.regions) == MAX_PROFILE_KERNELS
    assert len(kept.fallback_warnings) == len(kept.limits) == MAX_PROFILE_KERNELS
    names = [op.name for op in (*kept.ops, *kept.kernels, *kept.regions)] + [m for m, _ in kept.fallback_warnings]
    assert max(map(len, names)) == MAX_STORED_NAME_CHARACTERS
    document = baseline_to_json(BaselineFile("cpu", {BENCHMARK_ID: entry(stored(), op_profile=kept)}))
    size_bytes = len(json.dumps(document["entries"][BENCHMARK_ID]["op_profile"]))
    # 40 ops and 60 kernels, regions, messages and limits of at most 200 characters, with their figures
    assert size_bytes < (MAX_PROFILE_OPS + 4 * MAX_PROFILE_KERNELS) * (MAX_STORED_NAME_CHARACTERS + 100)


def test_a_stored_summary_keeps_times_to_four_significant_figures():
    kept = stored_op_profile(profile({"aten::relu": (20, 0.0012345678)}), AT, None)
    assert kept.ops[0].host_self_s == 0.001235 and kept.commit is None and kept.recorded_at == AT


def test_a_history_keeps_the_newest_summary_and_an_older_one_where_the_new_session_stored_none():
    old, new = entry(stored(), op_profile=recorded(commit="old1")), entry(stored(), op_profile=recorded(commit="new2"))
    assert append_runs(old, new, rebaseline=False).op_profile == new.op_profile
    assert append_runs(old, entry(stored()), rebaseline=False).op_profile == old.op_profile
    assert append_runs(old, entry(stored()), rebaseline=True).op_profile is None


@pytest.mark.parametrize(("change", "named"), [
    (lambda p: p.update(ops=[{"name": "aten::relu", "calls": -1, "host_self_s": 0.1}]), "'calls'"),
    (lambda p: p.update(host_s=-1.0), "'host_s'"),
    (lambda p: p.update(device="cuda"), "profiled on 'cuda'"),
    (lambda p: p.update(ops=[{"name": "a", "calls": 1, "host_self_s": 0.1}] * (MAX_PROFILE_OPS + 1)), "at most 40"),
    (lambda p: p.update(fallback_warnings=[["message"]]), "'fallback_warnings'"),
    (lambda p: p.update(host_times="mean"), "'host_times' is 'mean'"),
])
def test_a_bad_summary_names_the_entry_and_field(tmp_path, change, named):
    document = baseline_to_json(BaselineFile("cpu", {BENCHMARK_ID: entry(stored(), op_profile=recorded())}))
    change(document["entries"][BENCHMARK_ID]["op_profile"])
    path = write_document(tmp_path, document, allow_nan=True)
    with pytest.raises(BadFileError) as error:
        load_baseline(path)
    assert f"entry {BENCHMARK_ID!r} op_profile" in str(error.value) and named in str(error.value)


@pytest.mark.parametrize(("step_s", "steps"), [(0.0005, 8), (0.003, 3), (0.005, 2), (0.02, 1), (3.0, 1)])
def test_a_summary_profiles_about_ten_ms_of_steps_at_least_one_and_at_most_eight(step_s, steps):
    from perfsuite.run.measure import op_profile_steps

    assert op_profile_steps(step_s) == steps


def test_a_regression_is_explained_against_the_recorded_summary_said_to_be_from_another_session():
    found = explain_against_history("changed", "regressed", recorded(), profile(NORM_TWICE), 0.0004)
    assert isinstance(found, Explanation)
    assert found.against == f"the op summary recorded in another session ({AT}, commit {COMMIT})"
    assert [(op.name, op.base_calls, op.head_calls) for op in found.calls_changed] == [
        ("aten::native_layer_norm", 2, 4)]


def test_a_summary_stored_before_profiles_said_how_they_took_host_times_reads_as_summed_and_the_explanation_says_so(
        tmp_path):
    document = baseline_to_json(BaselineFile("cpu", {BENCHMARK_ID: entry(stored(), op_profile=recorded())}))
    assert document["entries"][BENCHMARK_ID]["op_profile"]["host_times"] == HOST_TIMES_FASTEST_STEP
    del document["entries"][BENCHMARK_ID]["op_profile"]["host_times"]
    loaded = load_baseline(write_document(tmp_path, document))
    assert loaded is not None
    older = loaded.entries[BENCHMARK_ID].op_profile
    assert older is not None and older.host_times == HOST_TIMES_SUMMED
    found = explain_against_history("changed", "regressed", older, profile(NORM_TWICE), 0.0004)
    assert isinstance(found, Explanation)
    assert any("the base summary was stored by an older perfsuite" in limit for limit in found.limits), found.limits
    # A summary stored now and a profile taken now say nothing of it.
    same = explain_against_history("changed", "regressed", recorded(), profile(NORM_TWICE), 0.0004)
    assert isinstance(same, Explanation) and not any("older perfsuite" in limit for limit in same.limits)


def test_a_summary_of_unknown_date_and_commit_says_so():
    unknown = dataclasses.replace(recorded(), recorded_at=None, commit=None)
    found = explain_against_history("all", "unchanged", unknown, profile(BASE), 0.0)
    assert isinstance(found, Explanation)
    assert found.against == "the op summary recorded in another session (an unknown time, an unknown commit)"


@pytest.mark.parametrize(("mode", "status"), [("changed", "unchanged"), ("changed", "uncalibrated"),
                                              ("none", "regressed")])
def test_only_the_cases_the_option_names_are_explained(mode, status):
    assert explain_against_history(mode, status, recorded(), profile(NORM_TWICE), 0.0004) is None


def test_a_history_without_a_summary_gets_one_line_and_a_session_that_profiled_nothing_says_why():
    assert explain_against_history("changed", "regressed", None, profile(BASE), 0.001) == NO_RECORDED_SUMMARY
    assert explain_against_history("changed", "improved", recorded(), None, -0.001, "RuntimeError: no kineto") == (
        "this session profiled no ops of the case (RuntimeError: no kineto), so the change is not explained")


def test_the_reports_put_an_explanation_under_its_case_and_a_note_in_one_line():
    regressed = REGRESSED
    improved = dataclasses.replace(REGRESSED, benchmark_id="cpu-fp32-resnet18-bs8-train", status="improved",
                                   ratio=0.7, ci_low=0.65, ci_high=0.75)
    found = explain_against_history("changed", "regressed", recorded(), profile(NORM_TWICE), 0.0004)
    assert isinstance(found, Explanation)
    explained = {regressed.benchmark_id: found, improved.benchmark_id: NO_RECORDED_SUMMARY}
    terminal = summary.render_terminal([regressed, improved], {}, explained)
    line = "aten::native_layer_norm: calls 2 -> 4 a step"
    assert any(shown.startswith(f"    {line}") for shown in terminal.splitlines())  # under its case, indented
    assert terminal.count(NO_RECORDED_SUMMARY) == 1
    document = json.loads(summary.render_json([regressed, improved], {}, explained))
    assert document["schema_version"] == 5
    by_id = {verdict["benchmark_id"]: verdict for verdict in document["verdicts"]}
    a, b = by_id[regressed.benchmark_id], by_id[improved.benchmark_id]
    assert any(text.startswith(line) for text in a["explanation"]["lines"]) and a["explanation_note"] is None
    assert b["explanation"] is None and b["explanation_note"] == NO_RECORDED_SUMMARY
    assert f"  - {line.replace('>', '&gt;')}" in summary.render_markdown([regressed, improved], {}, explained)


def test_an_archived_verdict_keeps_its_explanation_and_old_archives_read_without_one(tmp_path):
    verdict = archive.ArchivedVerdict("regressed", 1.5, 1.4, 1.6, 0.1, 0.1, explanation=("why", "aten::relu: 1 -> 2"))
    session = archive.ArchivedSession(
        device="cpu", machine_slug="amd-epyc", machine={"name": "m"}, recorded_at=AT, commit=COMMIT,
        torch_version="2.13.0", kind="update",
        cases=(archive.archived_case(entry(stored(commit=COMMIT)), verdict),),
    )
    path = archive.write_session(tmp_path, session)
    (read,) = archive.read_archive(tmp_path).files
    assert read.session.cases[0].verdict == verdict and path.exists()
    document = json.loads(path.read_text())
    del document["cases"][0]["verdict"]["explanation"]
    path.write_text(json.dumps(document))
    (old,) = archive.read_archive(tmp_path).files
    assert old.session.cases[0].verdict is not None and old.session.cases[0].verdict.explanation == ()
