"""The archive: one file per recorded session, written atomically and never over another, read back whole, and
every bad file reported, never raised."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from perfsuite.judge.verdicts import VERDICT_STATUSES
from perfsuite.records import Case, StoredRun
from perfsuite.store import archive, files
from perfsuite.store.archive import (
    ArchivedCase,
    ArchivedSession,
    ArchivedVerdict,
    read_archive,
    session_to_json,
    write_session,
)

REPOSITORY = Path(__file__).resolve().parents[2]
CASE = Case("cuda", "bf16", "resnet18", 32, "train", "standard")


def run(median_s: float = 0.0123, recorded_at: str = "2026-12-02T16:03:15Z", commit: str | None = "3d7a4eb",
        memory_bytes: int | None = 2_000_000_000) -> StoredRun:
    return StoredRun(median_s, 40, (0.0121, median_s, 0.0125), memory_bytes, recorded_at, commit)


def session(commit: str | None = "3d7a4eb", recorded_at: str = "2026-12-02T16:03:15Z", kind: str = "update",
            verdict: ArchivedVerdict | None = None, device: str = "cuda", machine: str = "nvidia-h200",
            case: Case = CASE) -> ArchivedSession:
    runs = (run(0.0123, recorded_at, commit), run(0.0124, recorded_at, commit))
    return ArchivedSession(
        device=device, machine_slug=machine, machine={"accelerator_name": "NVIDIA H200", "cpu_count": "16"},
        recorded_at=recorded_at, commit=commit, torch_version="2.11.0+cu130", kind=kind,
        cases=(ArchivedCase(case, "8feb14ea221e", None, "cuda_max_allocated_bytes", 32, runs, verdict),),
    )


def test_a_written_session_reads_back_equal(tmp_path):
    verdict = ArchivedVerdict("regressed", 1.23, 1.18, 1.29, 0.14, 0.10)
    written = session(verdict=verdict)
    write_session(tmp_path, written)
    reading = read_archive(tmp_path)
    assert reading.problems == ()
    assert reading.sessions == (written,)


def test_the_file_lies_under_device_and_machine_named_by_time_and_commit(tmp_path):
    path = write_session(tmp_path, session())
    device, machine, name = path.relative_to(tmp_path).parts
    assert (device, machine) == ("cuda", "nvidia-h200")
    stamp, commit, random_part = name.removesuffix(".json").split("-")
    assert (stamp, commit) == ("20261202T160315Z", "3d7a4eb")
    assert len(random_part) == 6 and int(random_part, 16) >= 0


def test_a_session_outside_git_is_named_nocommit(tmp_path):
    path = write_session(tmp_path, session(commit=None))
    assert path.name.startswith("20261202T160315Z-nocommit-")


def test_the_file_carries_the_schema_and_version(tmp_path):
    document = json.loads(write_session(tmp_path, session()).read_text())
    assert (document["schema"], document["schema_version"]) == ("perfsuite-archive", 2)
    assert document == session_to_json(session())


def test_a_taken_name_is_never_overwritten(tmp_path, monkeypatch):
    names = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(archive.secrets, "token_hex", lambda size: next(names))
    first = write_session(tmp_path, session())
    second = write_session(tmp_path, session())
    assert first.name.endswith("-aaaaaa.json") and second.name.endswith("-bbbbbb.json")
    assert len(read_archive(tmp_path).sessions) == 2


def test_a_symlink_at_the_name_is_not_written_through(tmp_path, monkeypatch):
    folder = tmp_path / "cuda" / "nvidia-h200"
    folder.mkdir(parents=True)
    trap = folder / "20261202T160315Z-3d7a4eb-aaaaaa.json"
    target = tmp_path / "outside.txt"
    target.write_text("keep me")
    trap.symlink_to(target)
    names = iter(["aaaaaa", "bbbbbb"])
    monkeypatch.setattr(archive.secrets, "token_hex", lambda size: next(names))
    written = write_session(tmp_path, session())
    assert written.name.endswith("-bbbbbb.json")
    assert target.read_text() == "keep me" and trap.is_symlink()


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def full_disk(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "link", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_session(tmp_path, session())
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_sessions_read_oldest_first(tmp_path):
    for moment in ("2026-12-03T10:00:00Z", "2026-12-01T10:00:00Z", "2026-12-02T10:00:00Z"):
        write_session(tmp_path, session(recorded_at=moment))
    assert [s.recorded_at for s in read_archive(tmp_path).sessions] == [
        "2026-12-01T10:00:00Z", "2026-12-02T10:00:00Z", "2026-12-03T10:00:00Z"]


def _bad_copy(tmp_path: Path, edit) -> Path:
    """A good archive file beside a copy of it edited by `edit` (document -> document or text)."""
    good = write_session(tmp_path, session())
    document = json.loads(good.read_text())
    changed = edit(document)
    bad = good.with_name("20261202T160316Z-3d7a4eb-badbad.json")
    bad.write_text(changed if isinstance(changed, str) else json.dumps(changed))
    return bad


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: json.dumps(d)[:200], "is not valid JSON"),
    (lambda d: d | {"schema": "someone-elses-archive"}, "is not a perfsuite archive file"),
    (lambda d: d | {"schema_version": 3}, "written by a newer perfsuite"),
    (lambda d: d | {"kind": "replace"}, "'kind' 'replace' is not one of update, rebaseline"),
    (lambda d: _edit_run(d, median_s=-0.012), "case 0 (cuda-bf16-resnet18-bs32-train) run 0: field 'median_s' "
                                               "should be a finite number > 0"),
    (lambda d: _edit_run(d, round_times_s=[0.01] * 51), "must list 1 to 50 finite times"),
    (lambda d: d | {"cases": []}, "holds no cases"),
])
def test_a_bad_file_is_reported_with_what_is_wrong_and_the_good_ones_still_read(tmp_path, edit, expected):
    bad = _bad_copy(tmp_path, edit)
    reading = read_archive(tmp_path)
    assert len(reading.sessions) == 1
    (problem,) = reading.problems
    assert problem.path == bad
    assert expected in problem.problem
    assert problem.remedy


def _edit_run(document: dict, **fields) -> dict:
    document["cases"][0]["runs"][0].update(fields)
    return document


def test_a_file_in_another_machines_folder_is_reported_with_where_it_belongs(tmp_path):
    path = write_session(tmp_path, session())
    elsewhere = tmp_path / "cuda" / "other-machine"
    elsewhere.mkdir()
    path.rename(elsewhere / path.name)
    (problem,) = read_archive(tmp_path).problems
    assert "lies in cuda/other-machine/" in problem.problem
    assert "Move it to cuda/nvidia-h200/" in problem.remedy


def test_a_temporary_file_of_a_stopped_recording_is_reported_and_tool_files_are_not(tmp_path):
    write_session(tmp_path, session())
    folder = tmp_path / "cuda" / "nvidia-h200"
    (folder / ".k2j3h4.tmp").write_text('{"schema": "perfsuite-ar')
    (folder / ".DS_Store").write_bytes(b"\0\1")
    reading = read_archive(tmp_path)
    assert len(reading.sessions) == 1
    assert [p.path.name for p in reading.problems] == [".k2j3h4.tmp"]
    assert "stopped before it finished" in reading.problems[0].problem


def test_a_file_outside_the_layout_is_reported(tmp_path):
    (tmp_path / "notes.json").write_text("{}")
    (problem,) = read_archive(tmp_path).problems
    assert problem.path == tmp_path / "notes.json" and "<device>/<machine>/<name>.json" in problem.problem


def test_a_missing_archive_folder_is_a_problem_not_an_exception(tmp_path):
    reading = read_archive(tmp_path / "absent")
    assert reading.sessions == () and "is not a folder" in reading.problems[0].problem


def test_a_session_refuses_cases_of_another_device():
    with pytest.raises(ValueError, match="another device"):
        session(device="mps", machine="ci-m2-max")


def test_a_session_refuses_runs_of_another_commit():
    with pytest.raises(ValueError, match="runs of commit 3d7a4eb in a session of commit f2a55eb"):
        ArchivedSession("cuda", "nvidia-h200", {}, "2026-12-02T16:03:15Z", "f2a55eb", "2.11.0", "update",
                        session().cases)


def test_a_case_refuses_more_rounds_than_the_store_keeps():
    long_run = StoredRun(0.01, 60, (0.01,) * 51, None, "2026-12-02T16:03:15Z", None)
    with pytest.raises(ValueError, match="at most 50 rounds"):
        ArchivedCase(CASE, "d", None, "cuda_max_allocated_bytes", 32, (long_run,))


def test_a_machine_name_that_cannot_name_a_folder_is_refused():
    with pytest.raises(ValueError, match="cannot name a folder"):
        session(machine="../escape")


def test_the_archived_statuses_are_the_judges():
    assert archive.VERDICT_STATUSES == VERDICT_STATUSES


def test_the_archive_imports_only_records_errors_the_stores_reader_and_writer_and_the_figure_rule():
    tree = ast.parse((REPOSITORY / "perfsuite" / "store" / "archive.py").read_text())
    ours = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module and node.module.startswith("perfsuite")}
    assert ours == {"perfsuite.errors", "perfsuite.records", "perfsuite.store.jsonfile", "perfsuite.store.files",
                    "perfsuite.store.baselines"}


def test_a_written_file_is_readable_by_everyone(tmp_path):
    path = write_session(tmp_path, session())
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_a_link_to_a_device_in_the_archive_is_reported_not_read(tmp_path):
    write_session(tmp_path, session())
    (tmp_path / "cuda" / "nvidia-h200" / "20261202T160316Z-3d7a4eb-ffffff.json").symlink_to("/dev/zero")
    reading = read_archive(tmp_path)
    assert len(reading.sessions) == 1
    assert [p.problem for p in reading.problems] == [
        "is not a regular file (a device, a pipe, a socket or a broken link)"]


def test_the_figure_each_case_measured_reads_back(tmp_path):
    written = session()
    latency = ArchivedSession(**{**written.__dict__, "cases": (
        ArchivedCase(**{**written.cases[0].__dict__, "figure": "latency"}),)})
    write_session(tmp_path, latency)
    (read,) = read_archive(tmp_path).sessions
    assert read.cases[0].figure == "latency"


@pytest.mark.parametrize(("device", "machine", "figure"), [("cuda", "nvidia-h200", "latency"), ("cpu", "vm", "step")])
def test_a_file_without_a_figure_reads_as_the_baseline_store_reads_one(tmp_path, device, machine, figure):
    document = session_to_json(session(device=device, machine=machine, case=Case(device, "fp32", "resnet18", 4,
                                                                                  "infer", "smoke")))
    del document["cases"][0]["figure"]
    path = tmp_path / device / machine / "20261202T160315Z-3d7a4eb-aaaaaa.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    (read,) = read_archive(tmp_path).sessions
    assert read.cases[0].figure == figure


def test_an_unknown_figure_is_reported(tmp_path):
    document = session_to_json(session())
    document["cases"][0]["figure"] = "throughput"
    path = tmp_path / "cuda" / "nvidia-h200" / "20261202T160315Z-3d7a4eb-aaaaaa.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    (problem,) = read_archive(tmp_path).problems
    assert "'figure' 'throughput' is not one of step, latency" in problem.problem
