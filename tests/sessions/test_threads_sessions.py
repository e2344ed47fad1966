"""The thread-count warning: more torch threads than free cores is announced with the figures and the fix.

The in-process tests of this subject: tests/quick/test_threads.py."""

import pytest

pytestmark = pytest.mark.slow


def test_the_pytest_header_warns_of_threads_beyond_the_cores(pytester, monkeypatch):
    monkeypatch.setattr("os.getloadavg", lambda: (64.0, 64.0, 64.0))
    pytester.makepyfile("def test_nothing():\n    pass\n")
    # With processes > 1 this pytest process keeps its own torch threads (one process's setting would leak into
    # the tests that follow); the header still tells what each measuring process runs.
    result = pytester.runpytest_inprocess(
        "--collect-only", "--perf-device", "cpu", "--perf-threads", "2", "--perf-processes", "2",
        "-p", "no:cacheprovider",
    )
    result.stdout.fnmatch_lines(["perfsuite: warning: each measuring process runs 2 torch CPU threads*"])
