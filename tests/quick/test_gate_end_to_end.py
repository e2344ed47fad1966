"""The regression gate through pytest, as a user runs it: record, rerun unchanged, rerun slower.

The workload sleeps for a set time inside its step, so its duration is fixed by the test rather than by
this machine's noisy CPU, and a 3x slowdown is unambiguous.

The tests of this subject that start processes or take long: tests/sessions/test_gate_end_to_end_sessions.py."""


def test_the_path_options_are_joined_to_their_values_only_when_one_would_move_the_rootdir(tmp_path):
    from perfsuite.options.paths import args_to_run_instead, joined_path_options

    args = ["--benchmark-only", "--perf-summary-dir", "/tmp/x", "--perf-baseline-dir=/b", "-q"]
    joined = ["--benchmark-only", "--perf-summary-dir=/tmp/x", "--perf-baseline-dir=/b", "-q"]
    assert joined_path_options(args) == joined
    assert args_to_run_instead(args, tmp_path) == joined
    assert args_to_run_instead(["--perf-summary-dir", "inside", "-q"], tmp_path) is None
