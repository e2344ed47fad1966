"""The thread-count warning: more torch threads than free cores is announced with the figures and the fix.

The tests of this subject that start processes or take long: tests/sessions/test_threads_sessions.py."""

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
