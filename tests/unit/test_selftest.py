"""The selftest's own pieces: the slowdown injector, pair enumeration, the rates, the band sweep, the
rendering and the command's bad input. Synthetic records stand in for measured ones; no subprocess runs."""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import pytest
from torch.utils.flop_counter import FlopCounterMode

from perfsuite.commands import selftest as selftest_command
from perfsuite.judge.stats import DecisionConfig, compare_times
from perfsuite.run.steps import prepare_case
from perfsuite.selftest import measure as selftest
from perfsuite.selftest import report as selftest_report
from perfsuite.selftest.measure import (
    CHAIN_BASE_BLOCKS,
    SelftestPlan,
    analyse,
    chain_case,
    count_outcomes,
    disjoint_group_pairs,
    flagged_fraction,
    judge_records,
    ordered_pairs,
    outcomes_at_bands,
    pooled_record,
    pytest_benchmark_fails,
)
from perfsuite.selftest.report import band_choice, render_report, target_rows
from perfsuite.workloads import get_workload

SIDE = 16
MACHINE = {"cpu_model": "Test CPU", "accelerator_name": None}


# --- the slowdown injector ----------------------------------------------------------------------------


def matmul_flops_of_one_step(extra_blocks: int) -> int:
    selftest_case = chain_case("cpu", SIDE, extra_blocks)
    prepared = prepare_case(selftest_case.case, get_workload(selftest_case.case.model))
    with FlopCounterMode(display=False) as counter:
        prepared.run_step()
    return int(counter.get_total_flops())


@pytest.mark.parametrize("extra_blocks", [1, 2, 3, 5, 10])
def test_slowed_chain_runs_exactly_the_extra_matmul_blocks_it_names(extra_blocks):
    one_block_flops = 2 * SIDE * SIDE * SIDE  # a (SIDE x SIDE) @ (SIDE x SIDE) matmul
    assert matmul_flops_of_one_step(extra_blocks) == (CHAIN_BASE_BLOCKS + extra_blocks) * one_block_flops


def test_plain_chain_runs_twenty_matmul_blocks():
    assert matmul_flops_of_one_step(0) == CHAIN_BASE_BLOCKS * 2 * SIDE**3


def test_nominal_slowdown_is_the_extra_work_over_the_plain_chain():
    assert chain_case("cpu", SIDE, 3).nominal_slowdown == pytest.approx(0.15)


def test_chain_keeps_the_values_norm_so_no_block_hits_overflow_or_denormals():
    selftest_case = chain_case("cpu", SIDE, 10)
    prepared = prepare_case(selftest_case.case, get_workload(selftest_case.case.model))
    inputs_norm = get_workload(selftest_case.case.model).make_inputs("smoke", SIDE).norm().item()
    assert prepared.run_step().norm().item() == pytest.approx(inputs_norm, rel=1e-4)


# --- pytest-benchmark's fixture outside pytest -------------------------------------------------------


def test_benchmark_fixture_times_one_step_per_round_for_at_least_five_rounds():
    fixture = selftest.benchmark_fixture("sleep", max_time_s=0.005)
    fixture(lambda: time.sleep(0.002))
    assert fixture.stats.iterations == 1
    assert len(fixture.stats.stats.data) >= 5
    assert min(fixture.stats.stats.data) >= 0.002


# --- pair enumeration ---------------------------------------------------------------------------------


def test_eleven_processes_give_110_ordered_pairs_of_two_different_processes():
    pairs = ordered_pairs(range(11))
    assert len(pairs) == 110
    assert len(set(pairs)) == 110
    assert all(baseline != current for baseline, current in pairs)


def test_ordered_pairs_hold_both_directions():
    assert ordered_pairs([3, 7]) == [(3, 7), (7, 3)]


def test_disjoint_group_pairs_share_no_process_and_have_the_group_size():
    pairs = disjoint_group_pairs(range(15), group_size=3, count=50, seed=0)
    assert len(pairs) == 50
    assert all(len(b) == 3 and len(c) == 3 and not set(b) & set(c) for b, c in pairs)
    assert len(set(pairs)) == 50


def test_disjoint_group_pairs_are_all_of_them_when_fewer_than_asked():
    # 4 processes in groups of 2: 6 groups, each disjoint from exactly one other, both directions.
    assert len(disjoint_group_pairs(range(4), group_size=2, count=100, seed=0)) == 6


def test_disjoint_group_pairs_are_the_same_for_the_same_seed():
    assert disjoint_group_pairs(range(9), 2, 20, seed=4) == disjoint_group_pairs(range(9), 2, 20, seed=4)


# --- rates --------------------------------------------------------------------------------------------


def test_count_outcomes_counts_each_verdict():
    counts = count_outcomes(["regressed", "unchanged", "unchanged", "improved", "regressed"])
    assert counts == {"pairs": 5, "regressed": 2, "improved": 1, "unchanged": 2}


def test_count_outcomes_counts_a_failing_pytest_benchmark_check_as_regressed():
    assert count_outcomes([True, False, False, False]) == {"pairs": 4, "regressed": 1, "improved": 0, "unchanged": 3}


def test_flagged_fraction_is_regressed_over_pairs():
    assert flagged_fraction({"pairs": 110, "regressed": 11, "improved": 0, "unchanged": 99}) == pytest.approx(0.1)


def test_flagged_fraction_of_no_pairs_is_none():
    assert flagged_fraction(count_outcomes([])) is None


def test_pytest_benchmark_rule_passes_a_slowdown_of_exactly_the_threshold():
    # 1.25 is exact in binary, so this is the boundary itself: pytest-benchmark fails only beyond it.
    assert not pytest_benchmark_fails(current_median_s=1.25, baseline_median_s=1.0, threshold_percent=25)


def test_pytest_benchmark_rule_fails_just_over_the_threshold():
    assert pytest_benchmark_fails(current_median_s=1.1001, baseline_median_s=1.0, threshold_percent=10)


# --- the band sweep reproduces the gate's rule ---------------------------------------------------------


def lognormal_rounds(seed: int, n: int, median_s: float, noise: float = 0.05) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(math.log(median_s), noise, n)


@pytest.mark.parametrize("drift", [None, 1.12, 0.9])
@pytest.mark.parametrize("scale", [0.8, 1.0, 1.12, 1.2, 1.35])
def test_band_sweep_gives_the_outcome_compare_times_gives_at_every_band(scale, drift):
    current, baseline = lognormal_rounds(1, 60, 0.01 * scale), lognormal_rounds(2, 40, 0.01)
    bands = (0.05, 0.10, 0.20, 0.30)
    config = DecisionConfig()
    at_ten = compare_times(current, baseline, 0.10, drift, config)
    raw_interval = (at_ten.ci_low, at_ten.ci_high) if drift is None else (at_ten.ci_low * drift, at_ten.ci_high * drift)
    swept = outcomes_at_bands(current, baseline, raw_interval, drift, bands, config)
    for band in bands:
        expected = compare_times(current, baseline, band, drift, config)
        assert swept[band]["gate"] == expected.outcome
        assert swept[band]["raw"] == expected.raw_outcome
        assert swept[band]["normalised"] == expected.normalised_outcome


# --- judging records ----------------------------------------------------------------------------------


def record(name: str, median_s: float, seed: int, extra_blocks: int = 0, n: int = 40,
           reference_median_s: float = 0.002) -> dict:
    """A worker's record of `name` with lognormal rounds around `median_s` and a reference workload."""
    return {
        "name": name, "benchmark_id": f"cpu-fp32-{name}-bs4-infer-smoke", "extra_blocks": extra_blocks,
        "position": 0, "batch_size": 4, "mode": "infer", "profile": "smoke", "model": name,
        "round_times_s": lognormal_rounds(seed, n, median_s).tolist(),
        "reference_round_times_s": lognormal_rounds(seed + 1000, 20, reference_median_s, 0.02).tolist(),
        "pytest_benchmark_iterations": 1, "measure_wall_s": 1.5, "config_digest": f"digest-{name}",
        "memory_figure": "cpu_peak_rss_bytes", "memory_bytes": 400_000_000, "flops_per_step": 1000,
        "event_median_s": None,
    }


def test_an_unchanged_pair_is_judged_unchanged():
    judged = judge_records(record("chain", 0.001, 1), record("chain", 0.001, 2), MACHINE, "cpu", "2.13")
    assert judged["status"] == "unchanged"


def test_a_slowed_chain_is_judged_as_the_plain_chain_that_became_slower():
    slowed = record("chain+10", 0.0015, 2, extra_blocks=10)
    judged = judge_records(record("chain", 0.001, 1), slowed, MACHINE, "cpu", "2.13")
    assert judged["status"] == "regressed"  # not incompatible, although the slowed chain has another digest
    assert judged["ratio"] == pytest.approx(1.5, rel=0.05)


def test_judging_records_reports_pytest_benchmarks_rule_at_each_band():
    judged = judge_records(record("chain", 0.001, 1), record("chain", 0.00112, 2), MACHINE, "cpu", "2.13")
    assert judged["bands"]["0.10"]["pytest_benchmark"] is True
    assert judged["bands"]["0.15"]["pytest_benchmark"] is False


def test_pooled_record_concatenates_rounds_in_process_order_and_sums_walls():
    first, second = record("chain", 0.001, 1, n=5), record("chain", 0.001, 2, n=7)
    pooled = pooled_record([first, second])
    assert pooled["round_times_s"] == first["round_times_s"] + second["round_times_s"]
    assert pooled["measure_wall_s"] == 3.0


# --- analysis of workers ------------------------------------------------------------------------------


def synthetic_workers(processes: int, slow_process: int | None = None) -> list[dict]:
    """Processes timing an unchanged case and the chain +50%; `slow_process` runs everything 1.6x slower
    (its reference too, so drift normalisation can see it)."""
    workers = []
    for index in range(processes):
        machine = 1.6 if index == slow_process else 1.0
        workers.append({"index": index, "records": [
            record("matmul-chain", 0.001 * machine, 10 * index, reference_median_s=0.002 * machine),
            record("matmul-chain+10", 0.0015 * machine, 10 * index + 1, extra_blocks=10,
                   reference_median_s=0.002 * machine),
        ]})
    return workers


def test_analysis_counts_no_false_alarm_and_full_detection_on_steady_processes():
    sets = analyse(synthetic_workers(4), "cpu", MACHINE, "2.13", repeat_pairs=10)["sets"]
    assert sets["matmul-chain"]["gate"] == {"pairs": 12, "regressed": 0, "improved": 0, "unchanged": 12}
    assert sets["matmul-chain+10"]["gate"]["regressed"] == 12


def test_analysis_shows_how_a_slow_process_fools_pytest_benchmarks_rule_but_not_the_normalised_gate():
    sets = analyse(synthetic_workers(4, slow_process=0), "cpu", MACHINE, "2.13", repeat_pairs=10)["sets"]
    unchanged = sets["matmul-chain"]
    assert unchanged["by_band"]["0.10"]["pytest_benchmark"]["regressed"] == 3  # process 0 as current, 3 baselines
    assert unchanged["gate"]["regressed"] == 0


def test_analysis_band_sweep_agrees_with_the_gate_at_ten_percent():
    sets = analyse(synthetic_workers(4, slow_process=1), "cpu", MACHINE, "2.13", repeat_pairs=10)["sets"]
    assert all(s["band_sweep_mismatches_at_default"] == 0 for s in sets.values())


def test_analysis_pools_two_processes_per_side():
    repeats = analyse(synthetic_workers(4), "cpu", MACHINE, "2.13", repeat_pairs=10)["repeats"]
    assert repeats["2"]["matmul-chain"]["pairs"] == 6


def test_analysis_skips_the_repeats_that_do_not_fit_the_time_left():
    analysis = analyse(synthetic_workers(3), "cpu", MACHINE, "2.13", repeat_pairs=10, repeats_time_left_s=0.0)
    assert analysis["repeats"] is None
    assert "perfsuite selftest --analyse" in analysis["repeats_skipped_reason"]


# --- the plan -----------------------------------------------------------------------------------------


def test_plan_file_name_names_the_thread_count_when_set():
    plan = SelftestPlan("cpu", processes=3, max_time_s=1.0, budget_s=60, chain_side=SIDE, threads=1)
    assert plan.file_name == "selftest-cpu-threads1.json"


def test_default_plan_file_name_is_the_device():
    assert selftest.default_plan("cuda").file_name == "selftest-cuda.json"


def test_plan_keeps_only_the_named_cases():
    plan = SelftestPlan("cpu", 3, 1.0, 60, SIDE, cases=("matmul-chain", "matmul-chain+3"))
    assert [c.name for c in selftest.worker_cases(plan)] == ["matmul-chain", "matmul-chain+3"]


def test_cuda_plan_fits_eleven_processes_in_150_seconds():
    plan = selftest.default_plan("cuda")
    assert (plan.processes, plan.max_time_s) == (11, 0.25)
    assert plan.budget_s <= 150


# --- the report ---------------------------------------------------------------------------------------


def document(overhead_fraction: float = 0.0002, slow_process: int | None = None, device: str = "cpu") -> dict:
    workers = synthetic_workers(4, slow_process)
    accuracy = [{"name": "matmul-chain", "suite_s": 0.001015, "timer_per_call_s": 0.001, "timer_blocked_s": 0.0013,
                 "profiler_kernel_s": 0.001, "profiler_span_s": 0.00101, "events_s": 0.00103}]
    return {
        "schema": selftest.SCHEMA, "schema_version": selftest.SCHEMA_VERSION, "device": device,
        "plan": {"max_time_s": 1.0, "threads": 1}, "started_at": "2026-12-02T16:00:00Z", "wall_s": 300.0,
        "cpu_count": 2, "load_average_before": 7.5, "load_average_after": 8.0, "torch_version": "2.13.0",
        "machine": {"cpu_model": "Test CPU", "accelerator_name": "NVIDIA H200" if device == "cuda" else None},
        "command": f"perfsuite selftest --device {device} --out results/selftest",
        "probe": {"accuracy": accuracy, "overhead": {
            "harness_round_s": overhead_fraction * 1e-3, "harness_fraction_of_1ms": overhead_fraction,
            "harness_round_p90_s": 2e-7, "harness_wall_per_round_s": 3e-6, "timer_pair_s": 6e-8,
            "synchronize_idle_s": 1e-7, "tiny_step_round_s": 2e-6,
        }},
        "workers": workers, "worker_failures": [],
        "analysis": analyse(workers, device, MACHINE, "2.13", repeat_pairs=10),
    }


def test_target_rows_mark_an_overhead_above_one_percent_missed():
    rows = {row.target: row for row in target_rows(document(overhead_fraction=0.02))}
    assert rows["overhead <= 1% of a 1 ms step"].met is False


def test_target_rows_mark_a_two_percent_gpu_difference_met_and_more_missed():
    cuda = document(device="cuda")
    cuda["probe"]["accuracy"].append({**cuda["probe"]["accuracy"][0], "name": "resnet18", "suite_s": 0.00125})
    rows = [row for row in target_rows(cuda) if row.target.startswith("GPU timing")]
    assert [(row.subject, row.met) for row in rows] == [("matmul-chain", True), ("resnet18", False)]


def test_band_choice_is_none_without_the_slowdown_that_the_band_needs():
    # Only +50% was measured: a 5% band needs +7.5% to be detected, which no set shows.
    assert band_choice(document()) is None


def test_report_carries_the_command_and_the_false_alarm_figure():
    text = render_report([document()])
    assert "`perfsuite selftest --device cpu --out results/selftest`" in text
    assert "| matmul-chain | 12 | 0/12 (0.0%) |" in text


def test_report_says_missed_for_a_missed_target():
    assert "**missed**" in render_report([document(overhead_fraction=0.05)])


def test_report_puts_cpu_before_cuda():
    text = render_report([document(device="cuda"), document()])
    assert text.index("### cpu") < text.index("### cuda")


# --- the command --------------------------------------------------------------------------------------


def command_args(**values) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    selftest_command.add_arguments(parser)
    args = parser.parse_args([])
    for key, value in values.items():
        setattr(args, key, value)
    return args


def test_report_command_writes_the_markdown(tmp_path):
    source = tmp_path / "selftest-cpu.json"
    selftest.write_document(document(), source)
    output = tmp_path / "docs" / "measurement-quality.md"
    assert selftest_command.run(command_args(report=[str(source)], output=str(output))) == 0
    assert output.read_text().startswith("# Measurement quality")


def test_report_command_rejects_a_file_of_another_schema(tmp_path, capsys):
    source = tmp_path / "other.json"
    source.write_text(json.dumps({"schema": "perfsuite-baseline"}))
    assert selftest_command.run(command_args(report=[str(source)], output=str(tmp_path / "out.md"))) == 2
    assert "not a perfsuite selftest file" in capsys.readouterr().err


def test_report_command_names_a_missing_file_and_how_to_make_one(tmp_path, capsys):
    assert selftest_command.run(command_args(report=[str(tmp_path / "none.json")], output="x.md")) == 2
    assert "perfsuite selftest --device cpu" in capsys.readouterr().err


def test_measure_command_refuses_a_single_process(capsys):
    assert selftest_command.run(command_args(device="cpu", processes=1)) == 2
    assert "at least 2 processes" in capsys.readouterr().err


def test_measure_command_lists_the_valid_cases_for_an_unknown_one(capsys):
    assert selftest_command.run(command_args(device="cpu", cases="matmul-chian")) == 2
    assert "valid: matmul-chain" in capsys.readouterr().err


def test_written_document_keeps_number_lists_on_one_line_and_reads_back(tmp_path):
    path = tmp_path / "selftest-cpu.json"
    original = {"schema": "x", "rounds": [0.001, 0.00102, 1e-05], "nested": {"more": [1, 2]}}
    selftest.write_document(original, path)
    assert '"rounds": [0.001,0.00102,1e-05]' in path.read_text()
    assert json.loads(path.read_text()) == original


# --- the interleaved reference (an experiment) ----------------------------------------------------------


def test_interleaved_timing_takes_one_reference_round_per_timed_round():
    selftest_case = chain_case("cpu", SIDE)
    fixture = selftest.benchmark_fixture("interleaved", max_time_s=0.01)
    figures = selftest.measure_interleaved(fixture, selftest_case.case, max_time_s=0.01, warmup_steps=1)
    assert len(figures["reference_round_times_s"]) == len(figures["round_times_s"]) >= 5


def test_plan_times_the_interleaved_variant_of_the_cases_it_names():
    plan = SelftestPlan("cpu", 3, 1.0, 60, SIDE, cases=("matmul-chain",), interleaved=("matmul-chain",))
    assert [(c.name, c.interleaved) for c in selftest.worker_cases(plan)] == [
        ("matmul-chain", False), ("matmul-chain~interleaved", True),
    ]


def test_interleaved_slowed_chain_is_compared_with_the_interleaved_plain_chain():
    sets = selftest.comparison_sets(["matmul-chain~interleaved", "matmul-chain+3~interleaved"])
    assert sets["matmul-chain+3~interleaved"] == ("matmul-chain~interleaved", "matmul-chain+3~interleaved")


def interleaved_record(name: str, seed: int, machine: float, extra_blocks: int = 0) -> dict:
    """Rounds and their reference rounds both slowed by `machine`, as a busy moment slows both."""
    rng = np.random.default_rng(seed)
    speed = machine * rng.lognormal(0, 0.3, 60)  # the machine's speed moves from round to round
    step_s = 0.001 * (1 + extra_blocks / 20)
    return {
        **record(name, 0.001, seed, extra_blocks, n=60),
        "round_times_s": (step_s * speed * rng.lognormal(0, 0.01, 60)).tolist(),
        "reference_round_times_s": (0.0004 * speed * rng.lognormal(0, 0.01, 60)).tolist(),
        "reference_interleaved": True,
    }


def test_per_round_normalisation_sees_through_a_busy_machine():
    baseline = interleaved_record("matmul-chain~interleaved", 1, machine=1.0)
    current = interleaved_record("matmul-chain~interleaved", 2, machine=2.0)
    assert selftest.per_round_outcomes(baseline, current, [0.10]) == {0.10: "unchanged"}


def test_per_round_normalisation_detects_a_slowdown_on_a_busy_machine():
    baseline = interleaved_record("matmul-chain~interleaved", 1, machine=1.0)
    current = interleaved_record("matmul-chain+5~interleaved", 2, machine=2.0, extra_blocks=5)
    assert selftest.per_round_outcomes(baseline, current, [0.10]) == {0.10: "regressed"}


def test_per_round_normalisation_needs_an_interleaved_reference():
    assert selftest.per_round_outcomes(record("chain", 0.001, 1), record("chain", 0.001, 2), [0.10]) == {}


def test_plan_file_name_names_the_added_busy_processes():
    plan = SelftestPlan("cpu", processes=3, max_time_s=1.0, budget_s=60, chain_side=SIDE, threads=1, contention=4)
    assert plan.file_name == "selftest-cpu-threads1-contended4.json"


def test_busy_processes_are_gone_once_stopped():
    busy = selftest._start_contention(2, seed=0)
    selftest._stop(busy)
    assert all(process.returncode is not None for process in busy)


def test_a_run_with_busy_processes_added_is_not_quiet():
    busy = {**document(), "plan": {"max_time_s": 1.0, "threads": 1, "contention": 4}, "load_average_before": 0.5}
    assert not selftest_report.is_quiet(busy)


def test_a_run_started_under_load_is_not_quiet():
    assert not selftest_report.is_quiet({**document(), "load_average_before": 7.6})


def test_discussion_gives_each_runs_worst_false_alarm_rate_by_the_gate_and_without_the_reference():
    text = "\n".join(selftest_report.discussion([document(slow_process=0)]))
    # Process 0 runs 1.6x slow: pytest-benchmark-like raw judging flags it as current (3 of 12 pairs), the
    # gate's drift normalisation does not.
    assert "Worst false-alarm rate at the 10% band: 0.0% by the gate, 25.0% without the reference" in text
