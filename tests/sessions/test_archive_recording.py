"""Recording sessions are archived: one file per session beside the baselines, append-only, so a rebaseline is a
mark on one continuous history that `perfsuite site` shows."""

import json
import re
import time

import pytest

from perfsuite.cli import main
from tests.sessions.test_gate_end_to_end_sessions import RUN, SLEEPY

pytestmark = pytest.mark.slow

MACHINE = "archive-vm"
BENCHMARK_ID = "cpu-fp32-sleeper-bs2-infer"


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.setenv("SLEEP_S", "0.002")
    pytester.makeconftest(SLEEPY)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    return pytester


def archive_files(project):
    return sorted((project.path / "baselines" / "archive" / "cpu" / MACHINE).glob("*.json"))


def record(run, *flags):
    result = run(*RUN, "--perf-machine", MACHINE, *flags)
    result.assert_outcomes(passed=1)
    return result


def next_second() -> None:
    """Wait until the UTC second turns: the archive orders sessions by when they recorded, to the second, and a
    session of this sleeper model, run in this process, records within one."""
    started = int(time.time())
    while int(time.time()) == started:
        time.sleep(0.02)


def test_two_recordings_and_a_rebaseline_leave_three_session_files_and_the_site_marks_the_rebaseline(
    project, run_in_process
):
    record(run_in_process, "--perf-update-baseline")
    next_second()
    second = record(run_in_process, "--perf-update-baseline")
    next_second()
    record(run_in_process, "--perf-rebaseline")

    files = archive_files(project)
    assert len(files) == 3
    second.stdout.fnmatch_lines([f"archived *{MACHINE}*.json"])
    sessions = sorted((json.loads(path.read_text()) for path in files), key=lambda s: s["recorded_at"])
    assert [s["kind"] for s in sessions] == ["update", "update", "rebaseline"]
    assert [c["benchmark_id"] for s in sessions for c in s["cases"]] == [BENCHMARK_ID] * 3
    assert all(c["figure"] == "step" for s in sessions for c in s["cases"])
    # The gate judged the second session against the first: its verdict is kept with its runs.
    assert sessions[0]["cases"][0]["verdict"]["status"] == "no-baseline"
    assert sessions[1]["cases"][0]["verdict"]["status"] in ("uncalibrated", "unchanged", "improved", "regressed")
    # The baseline's window started over; the archive still holds every run.
    baseline = json.loads((project.path / "baselines" / "cpu" / f"{MACHINE}.json").read_text())
    assert len(baseline["entries"][BENCHMARK_ID]["runs"]) == 1

    site = project.path / "site"
    assert main(["site", str(project.path / "baselines"), "-o", str(site)]) == 0
    page = (site / "cases" / f"cpu--{MACHINE}--{BENCHMARK_ID}.html").read_text()
    assert "<dt>runs</dt><dd>3 in 3 sessions" in page
    assert len(re.findall(r'<li class="mark mark-rebaseline">', page)) == 1


def test_a_session_that_only_judges_archives_nothing(project, run_in_process):
    record(run_in_process, "--perf-update-baseline")
    run_in_process(*RUN, "--perf-machine", MACHINE).assert_outcomes(passed=1)
    assert len(archive_files(project)) == 1


def test_an_archive_folder_that_cannot_be_made_fails_the_session_after_the_baseline_is_recorded(
    project, run_in_process
):
    blocked = project.path / "baselines" / "archive"
    blocked.parent.mkdir()
    blocked.write_text("not a folder")
    result = run_in_process(*RUN, "--perf-machine", MACHINE, "--perf-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"recorded into *{MACHINE}.json but not archived under {blocked}: *"])
    assert blocked.read_text() == "not a folder"
    assert json.loads((project.path / "baselines" / "cpu" / f"{MACHINE}.json").read_text())["entries"]
    assert not [p for p in blocked.parent.rglob("*.tmp")]
