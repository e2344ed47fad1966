"""The thread-count warning: more torch threads than free cores is announced with the figures and the fix."""

from perfsuite.judge.threads import cores_free, thread_warning


def test_threads_that_fit_the_free_cores_need_no_warning():
    assert thread_warning(threads=1, cores=2, load_average=0.5) is None


def test_two_threads_on_two_busy_cores_are_warned_of_with_the_figures_and_the_fix():
    warning = thread_warning(threads=2, cores=2, load_average=1.4)
    assert warning is not None
    assert "runs 2 torch CPU threads" in warning and "about 1 core(s) (2 core(s), load average 1.40)" in warning
    assert "--perf-threads 1" in warning


def test_a_loaded_machine_still_gives_a_process_one_core():
    assert cores_free(cores=2, load_average=7.0) == 1


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
