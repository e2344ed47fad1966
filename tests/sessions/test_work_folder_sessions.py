"""perfsuite's working folder and the A/B summary's version: `.perfsuite/` ignores itself whatever made it, a file in
its place is a message, not an INTERNALERROR; a shallow clone's missing base says how to fetch it; ab.json states
the `schema_version` its reader checks, so a newer file is refused.

The in-process tests of this subject: tests/quick/test_work_folder.py."""

from __future__ import annotations

import sys

import pytest

from perfsuite.store.files import WORK_FOLDER
from tests.quick.test_work_folder import git
from tests.sessions.test_ab_user_project import ab as run_ab
from tests.sessions.test_ab_user_project import wide_project

pytestmark = pytest.mark.slow


# --- whole sessions -------------------------------------------------------------------------------------------------

def test_a_file_named_perfsuite_is_a_usage_error_before_an_ab_job_measures(tmp_path):
    project = wide_project(tmp_path)
    (project / WORK_FOLDER).write_text("notes\n")
    result = run_ab(project, "--perf-ab", "HEAD", "--perf-summary-dir=out")
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert f"{project / WORK_FOLDER} is a file, but perfsuite keeps its working files" in result.stderr


def test_an_ab_job_against_another_interpreter_leaves_git_status_clean(tmp_path):
    project = wide_project(tmp_path)
    # What the job leaves is the point, not its verdict: its first blocks, which every case gets whatever the budget.
    result = run_ab(project, "--perf-ab-python", sys.executable, "--perf-processes", "2", "--perf-ab-budget", "1")
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    assert (project / WORK_FOLDER / "ab.json").is_file()
    assert git(project, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_gate_session_leaves_git_status_clean(tmp_path):
    project = wide_project(tmp_path)
    result = run_ab(project, "--perf-processes", "1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (project / WORK_FOLDER / "summary.json").is_file()
    assert git(project, "status", "--porcelain", "--untracked-files=all") == ""
