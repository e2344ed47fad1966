"""perfsuite's working folder and the A/B summary's version: `.perfsuite/` ignores itself whatever made it, a file in
its place is a message, not an INTERNALERROR; a shallow clone's missing base says how to fetch it; ab.json states
the `schema_version` its reader checks, so a newer file is refused.

The tests of this subject that start processes or take long: tests/sessions/test_work_folder_sessions.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perfsuite.errors import UsageError
from perfsuite.judge.ab import judge_ab
from perfsuite.records import AbMeasurement, AbPair, AbSide, Case, Run
from perfsuite.render import ab
from perfsuite.site.ab import ab_summary_from_json
from perfsuite.store.files import WORK_FOLDER, keep_out_of_git
from perfsuite.store.revisions import MERGE_BASE, base_checkout, resolve_revision


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


def commit_file(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text)
    git(folder, "add", name)
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", name)


# --- ab.json's version ----------------------------------------------------------------------------------------------

def summary_of_one_case() -> dict:
    case = Case("cpu", "fp32", "resnet18", 4, "infer", "smoke")
    run = Run(case, (0.01,), 4, None, "cpu_peak_rss_bytes", None, "abc", "2.13.0", 1, 10)
    measurement = AbMeasurement(case, tuple(AbPair(((0.01, 0.01),) * 3, run, run, 1.0, 1.0) for _ in range(3)))
    verdict = judge_ab(measurement, [], 0.10, 0.10, family_size=1)
    side = AbSide("main", "abc", "/usr/bin/python3", "2.13.0")
    return json.loads(ab.summary_json(ab.summary_document([verdict], {case.benchmark_id: measurement}, side, side,
                                                           "2026-12-05T00:00:00Z")))


def test_ab_json_states_the_schema_version_its_reader_checks():
    document = summary_of_one_case()
    assert document["schema_version"] == ab.SCHEMA_VERSION and "version" not in document
    reading = ab_summary_from_json(document, Path("ab.json"))
    assert reading.problems == () and reading.summary is not None and len(reading.summary.cases) == 1


def test_an_ab_json_of_a_newer_version_is_refused_with_the_fix():
    document = summary_of_one_case()
    document["schema_version"] += 1
    reading = ab_summary_from_json(document, Path("ab.json"))
    (problem,) = reading.problems
    assert reading.summary is None
    assert f"has schema_version {ab.SCHEMA_VERSION + 1}" in problem.problem and problem.remedy == (
        "Upgrade perfsuite to read it.")


# --- .perfsuite/ ----------------------------------------------------------------------------------------------------

def test_the_working_folder_is_made_ignoring_itself(tmp_path):
    git(tmp_path, "init", "--quiet")
    keep_out_of_git(tmp_path / WORK_FOLDER)
    (tmp_path / WORK_FOLDER / "ab.json").write_text("{}\n")
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all") == ""


def test_another_summary_folder_is_left_alone(tmp_path):
    keep_out_of_git(tmp_path / "perf-summary")
    assert not (tmp_path / "perf-summary").exists()


def test_a_file_in_place_of_the_working_folder_is_a_message(tmp_path):
    (tmp_path / WORK_FOLDER).write_text("notes\n")
    with pytest.raises(UsageError, match=r"\.perfsuite is a file, but perfsuite keeps its working files .* move it "):
        keep_out_of_git(tmp_path / WORK_FOLDER)
    assert (tmp_path / WORK_FOLDER).read_text() == "notes\n"


def test_a_base_checkout_under_a_file_named_perfsuite_is_a_message_not_an_internal_error(tmp_path):
    git(tmp_path, "init", "--quiet", "-b", "main")
    commit_file(tmp_path, "a.txt", "a\n")
    (tmp_path / WORK_FOLDER).write_text("notes\n")
    with pytest.raises(UsageError, match=r"\.perfsuite is a file"):
        base_checkout(tmp_path, git(tmp_path, "rev-parse", "HEAD").strip())


# --- a shallow clone ------------------------------------------------------------------------------------------------

@pytest.fixture
def shallow(tmp_path: Path) -> Path:
    """A clone of depth 1 of a pull request's branch: its merge base with main is not in it."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "--quiet", "-b", "main")
    commit_file(origin, "a.txt", "a\n")
    git(origin, "checkout", "--quiet", "-b", "change")
    commit_file(origin, "b.txt", "b\n")
    git(origin, "checkout", "--quiet", "main")
    commit_file(origin, "c.txt", "c\n")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--no-single-branch", "--branch", "change",
                    f"file://{origin}", str(clone)], check=True, capture_output=True)
    return clone


def test_a_shallow_clones_missing_merge_base_says_how_to_fetch_it(shallow):
    with pytest.raises(UsageError) as refused:
        resolve_revision(shallow, MERGE_BASE)
    message = str(refused.value)
    assert "have no merge base" in message and "this clone is shallow" in message
    assert "`git fetch --unshallow`" in message and "`fetch-depth: 0` on actions/checkout" in message


def test_a_revision_missing_from_a_shallow_clone_says_how_to_fetch_it(shallow):
    with pytest.raises(UsageError, match=r"no such revision .*`git fetch --unshallow`"):
        resolve_revision(shallow, "HEAD~1")


def test_a_full_clone_without_a_merge_base_gets_no_shallow_hint(tmp_path):
    git(tmp_path, "init", "--quiet", "-b", "main")
    commit_file(tmp_path, "a.txt", "a\n")
    git(tmp_path, "checkout", "--quiet", "--orphan", "unrelated")
    commit_file(tmp_path, "b.txt", "b\n")
    with pytest.raises(UsageError) as refused:
        resolve_revision(tmp_path, MERGE_BASE)
    assert "shallow" not in str(refused.value)


# --- whole sessions -------------------------------------------------------------------------------------------------
