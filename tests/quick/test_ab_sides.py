"""How an A/B side finds its models: the project's files moved to the base checkout, perfsuite's own built-in model
modules taken from the base checkout while the harness stays this one, and the windows sized from the round. (Each
side's own code in one process: tests/quick/test_side_code.py.)

The tests of this subject that start processes or take long: tests/sessions/test_ab_sides_sessions.py."""

from __future__ import annotations

from perfsuite.records import AbMeasurement, AbPair, Case, Run, WorkloadSource
from perfsuite.run.ab import MIN_WINDOWS, CaseBlocks, window_plan
from perfsuite.session.ab import rebased_sources


def test_sources_under_the_project_move_to_the_same_path_in_the_base_checkout(tmp_path):
    root, base = tmp_path / "project", tmp_path / "project" / ".perfsuite" / "ab" / "abc"
    (root / "models").mkdir(parents=True)
    sources = {"wide": [WorkloadSource(module="conftest", file=str(root / "conftest.py")),
                        WorkloadSource(module="models.wide", file=str(root / "models" / "wide.py")),
                        WorkloadSource(module="torch.nn", file="/usr/lib/python3/torch/nn/__init__.py")]}
    moved = rebased_sources(sources, root, base)
    assert [s["file"] for s in moved["wide"]] == [
        str(base / "conftest.py"), str(base / "models" / "wide.py"), "/usr/lib/python3/torch/nn/__init__.py"]
    assert [s["module"] for s in moved["wide"]] == ["conftest", "models.wide", "torch.nn"]


def test_windows_last_a_share_of_the_time_and_hold_whole_rounds():
    assert window_plan(0.001, 1, 1.0) == (0.125, 8)
    window_s, windows = window_plan(0.2, 1, 1.0)  # a slow step: two rounds a window, at least MIN_WINDOWS
    assert window_s == 0.4 and windows == MIN_WINDOWS
    assert window_plan(0.0001, 50, 0.4)[0] == 0.05


def test_a_round_past_the_first_ones_takes_the_cheapest_blocks_that_fit_in_what_is_left():
    from perfsuite.run.ab import cases_that_fit

    cases = [Case("cpu", "fp32", model, 4, "infer", "smoke") for model in ("a", "b", "c", "d")]
    costs = {case.benchmark_id: cost for case, cost in zip(cases, (30.0, 5.0, 12.0, 8.0), strict=True)}
    assert [case.model for case in cases_that_fit(cases, costs, 26.0)] == ["b", "c", "d"]
    assert [case.model for case in cases_that_fit(cases[::-1], costs, 14.0)] == ["d", "b"]
    assert cases_that_fit(cases, costs, 4.0) == []
    assert cases_that_fit(cases, costs, 100.0) == cases


def test_a_cases_blocks_keep_what_the_first_found_and_size_the_next_block_from_the_last():
    case = Case("cpu", "fp32", "resnet18", 4, "infer", "smoke")
    run = Run(case, (0.01,), 4, None, "cuda_max_allocated_bytes", None, "abc", "2.13.0", 1, 10)
    seen: list[AbMeasurement] = []

    def look(measurement: AbMeasurement) -> tuple[bool, int]:
        seen.append(measurement)
        return len(measurement.pairs) == 2, 16  # decided at the second block; next blocks of 16 windows

    entry = CaseBlocks(case)
    entry.seconds = 3.0
    first = AbPair(((0.01, 0.01),) * 8, run, run, 1.0, 1.0)
    assert entry.add((first, 0.5, ("base.py", "head.py")), 3.0, look) is False
    # The next block takes 16 windows where this one had 8: twice this block's seconds.
    assert (entry.next_windows, entry.next_block_s) == (16, 6.0)
    second = AbPair(((0.01, 0.011),) * 16, run, run, 1.0, 1.0)
    assert entry.add((second, 9.0, ("other.py", "other.py")), 5.0, look) is True
    # Only the first block says what the outputs and model files were; the next block as long as this one.
    assert (entry.difference, entry.sources, entry.next_block_s) == (0.5, ("base.py", "head.py"), 5.0)
    assert [len(measurement.pairs) for measurement in seen] == [1, 2]
    assert entry.measurement() == AbMeasurement(case, (first, second), 0.5, ("base.py", "head.py"), 3.0)
