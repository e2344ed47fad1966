"""The selftest's own pieces: the matmul chain that carries a known slowdown, the plan, the worker's records, the
pure analysis (splits, judging through the gate's own decision code, rates), the report and the command's bad
input. Synthetic `Run` records stand in for measured ones; no selftest subprocess is started.

The tests of this subject that start processes or take long: tests/sessions/test_selftest_sessions.py."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from dataclasses import asdict

import numpy as np
import pytest
from torch.utils.flop_counter import FlopCounterMode

import perfsuite.judge.stats as stats
import perfsuite.judge.verdicts as verdicts
import perfsuite.selftest.plan as plan_module
import perfsuite.workloads as workloads
from perfsuite.cli import main as cli_main
from perfsuite.records import Case, Run
from perfsuite.run.devices import Availability
from perfsuite.run.steps import prepare_case
from perfsuite.run.wire import run_from_json, run_to_json
from perfsuite.selftest import analysis, measure
from perfsuite.selftest.analysis import (
    BASELINE_RUNS,
    CURRENT_RUNS,
    FLOOR_MARGIN,
    analyse,
    as_case,
    baseline_entry,
    judge_split,
    rates,
    runs_by_case,
    slowed_by,
    splits,
)
from perfsuite.selftest.plan import (
    CHAIN_BASE_BLOCKS,
    CHAIN_NAME,
    SelftestPlan,
    accuracy_cases,
    chain_case,
    default_plan,
    plan_from_dict,
    worker_cases,
)
from perfsuite.selftest.report import render_report, run_label, target_rows
from perfsuite.store.baselines import machine_identity, stored_run
from perfsuite.workloads import get_workload

SIDE = 16
IDENTITY = machine_identity({"cpu_model": "Test CPU", "cpu_count": 2}, "cpu")
UNCHANGED_MODEL = "resnet18-infer-bs4-smoke"
SPLITS = 20
# Enough processes for every split: a baseline history and the most current runs, with some to spare.
PROCESSES = BASELINE_RUNS + max(CURRENT_RUNS) + 2


@pytest.fixture(autouse=True, scope="module")
def chain_workloads_leave_with_the_module() -> Iterator[None]:
    """The chain workloads these tests plan are registered in this process's registry (once a process: the plan
    keeps them); they leave with this module, so that a test after it in the same process (the `perfsuite list`
    tests that expect a project's own models alone) sees the registry as a fresh process has it."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads.registered_workloads()))
        monkeypatch.setattr(plan_module, "_CHAIN_WORKLOADS", {})
        yield


# --- the matmul chain: a slowdown of known size -------------------------------------------------------------


def matmul_flops_of_one_step(extra_blocks: int) -> int:
    selftest_case = chain_case("cpu", SIDE, extra_blocks)
    prepared = prepare_case(selftest_case.case, get_workload(selftest_case.case.model))
    with FlopCounterMode(display=False) as counter:
        prepared.run_step()
    return int(counter.get_total_flops())


@pytest.mark.parametrize("extra_blocks", [0, 1, 2, 3, 5, 10])
def test_chain_runs_exactly_its_base_blocks_plus_the_extra_blocks_it_names(extra_blocks):
    one_block_flops = 2 * SIDE * SIDE * SIDE  # a (SIDE x SIDE) @ (SIDE x SIDE) matmul
    assert matmul_flops_of_one_step(extra_blocks) == (CHAIN_BASE_BLOCKS + extra_blocks) * one_block_flops


def test_chain_names_the_plain_chain_and_the_slowed_ones_by_their_extra_blocks():
    assert chain_case("cpu", SIDE).name == CHAIN_NAME
    assert chain_case("cpu", SIDE, 3).name == f"{CHAIN_NAME}+3"


def test_nominal_slowdown_is_the_extra_work_over_the_plain_chain():
    assert chain_case("cpu", SIDE, 3).nominal_slowdown == pytest.approx(3 / CHAIN_BASE_BLOCKS)
    assert chain_case("cpu", SIDE).nominal_slowdown == 0


def test_chain_keeps_the_values_norm_so_no_block_hits_overflow_or_denormals():
    selftest_case = chain_case("cpu", SIDE, 10)
    workload = get_workload(selftest_case.case.model)
    prepared = prepare_case(selftest_case.case, workload)
    inputs_norm = workload.make_inputs("smoke", SIDE).norm().item()
    assert prepared.run_step().norm().item() == pytest.approx(inputs_norm, rel=1e-4)


# --- the plan ----------------------------------------------------------------------------------------------


def test_plan_file_name_is_the_device_by_default():
    assert SelftestPlan("cpu", 6, 0.1, 60, SIDE).file_name == "selftest-cpu.json"


def test_plan_file_name_names_the_thread_count_and_the_busy_processes_when_set():
    plan = SelftestPlan("cpu", 6, 0.1, 60, SIDE, threads=1, contention=4)
    assert plan.file_name == "selftest-cpu-threads1-contended4.json"


def test_default_plan_refuses_a_device_the_selftest_does_not_measure():
    with pytest.raises(ValueError, match="'mps'"):
        default_plan("mps")


def test_plan_keeps_only_the_named_cases():
    plan = SelftestPlan("cpu", 6, 0.1, 60, SIDE, cases=("matmul-chain", "matmul-chain+3"))
    assert [c.name for c in worker_cases(plan)] == ["matmul-chain", "matmul-chain+3"]


def test_every_slowed_chain_of_the_plan_has_its_plain_chain_to_be_judged_against():
    cases = worker_cases(default_plan("cpu"))
    slowed = [c for c in cases if c.extra_blocks]
    assert slowed and CHAIN_NAME in [c.name for c in cases]
    assert all(c.name == f"{CHAIN_NAME}+{c.extra_blocks}" for c in slowed)


def test_cuda_accuracy_cases_add_a_standard_size_model_the_cpu_ones_lack():
    cpu = {c.name for c in accuracy_cases(default_plan("cpu"))}
    cuda = {c.name for c in accuracy_cases(default_plan("cuda"))}
    assert len(cuda - cpu) == 1 and next(iter(cuda - cpu)).startswith("resnet18-infer-bs32")


def test_plan_read_back_from_its_json_is_the_same_plan():
    plan = SelftestPlan("cpu", 6, 0.1, 60, SIDE, threads=2, cases=("matmul-chain",), contention=1)
    assert plan_from_dict(json.loads(json.dumps(asdict(plan)))) == plan


# --- the worker's records --------------------------------------------------------------------------------


def test_measure_cases_times_each_case_once_with_the_runner_in_a_seeded_order():
    cases = [chain_case("cpu", SIDE), chain_case("cpu", SIDE, 1)]
    records = measure.measure_cases("cpu", cases, max_time_s=0.005, warmup_steps=1, order_seed=7)
    expected_order = list(cases)
    random.Random(7).shuffle(expected_order)
    assert [(r["name"], r["position"]) for r in records] == [(c.name, i) for i, c in enumerate(expected_order)]
    by_name = {r["name"]: r for r in records}
    assert by_name[f"{CHAIN_NAME}+1"]["extra_blocks"] == 1
    slowed_run = run_from_json(by_name[f"{CHAIN_NAME}+1"]["run"])
    assert slowed_run.case == cases[1].case
    assert slowed_run.flops_per_step == (CHAIN_BASE_BLOCKS + 1) * 2 * SIDE**3
    # Rounds are kept at 4 significant figures, as the baseline store keeps them.
    assert all(t == float(f"{t:.4g}") for t in slowed_run.round_times_s)
    # The analysis reads these records back as the same runs.
    table = runs_by_case([{"index": 0, "records": records}])
    assert table[CHAIN_NAME][0] == run_from_json(by_name[CHAIN_NAME]["run"])


def test_written_document_keeps_number_lists_on_one_line_and_reads_back(tmp_path):
    path = tmp_path / "deeper" / "selftest-cpu.json"
    original = {"schema": "x", "rounds": [0.001, 0.00102, 1e-05], "nested": {"more": [1, 2]}}
    measure.write_document(original, path)
    assert '"rounds": [0.001,0.00102,1e-05]' in path.read_text()
    assert json.loads(path.read_text()) == original


def test_busy_processes_are_gone_once_stopped():
    busy = measure._start_contention(2, seed=0)
    assert len(busy) == 2
    measure._stop(busy)
    assert all(process.returncode is not None for process in busy)


# --- synthetic runs -----------------------------------------------------------------------------------------


def synthetic_run(model: str, median_s: float, seed: int, noise: float = 0.01, digest: str = "digest") -> Run:
    """A run of `model` with 20 lognormal rounds around `median_s` (noise 0: every round exactly `median_s`)."""
    times = median_s * np.random.default_rng(seed).lognormal(0.0, noise, 20)
    return Run(
        case=Case("cpu", "fp32", model, SIDE, "infer", "smoke"), round_times_s=tuple(times), samples_per_step=SIDE,
        flops_per_step=1000, memory_figure="cpu_peak_rss_bytes", memory_bytes=None, config_digest=digest,
        torch_version="2.13.0", threads=1,
    )


def record(name: str, run: Run, extra_blocks: int = 0) -> dict:
    return {"name": name, "extra_blocks": extra_blocks, "position": 0, "measure_wall_s": 1.0, "run": run_to_json(run)}


def synthetic_workers(
    processes: int = PROCESSES, slowed: dict[int, float] | None = None, noise: float = 0.01, first_index: int = 0,
) -> list[dict]:
    """Processes that each time the plain chain, an unchanged model and, for each `extra_blocks: factor` of
    `slowed`, the chain with that many extra blocks running `factor` times as long as the plain chain in the
    same process. Each process runs at its own speed (spread `noise`); noise 0 makes every process identical."""
    workers = []
    for index in range(first_index, first_index + processes):
        speed = float(np.random.default_rng(1000 + index).lognormal(0.0, noise))
        records = [
            record(CHAIN_NAME, synthetic_run(f"selftest-chain{CHAIN_BASE_BLOCKS}x{SIDE}", 1e-3 * speed, index, noise)),
            record(UNCHANGED_MODEL, synthetic_run("resnet18", 4e-3 * speed, 100 + index, noise)),
        ]
        for extra_blocks, factor in (slowed or {}).items():
            run = synthetic_run(f"selftest-chain{CHAIN_BASE_BLOCKS + extra_blocks}x{SIDE}", 1e-3 * speed * factor,
                                200 + index, noise, digest="another digest")
            records.append(record(f"{CHAIN_NAME}+{extra_blocks}", run, extra_blocks))
        workers.append({"index": index, "records": records})
    return workers


# Slowed chains of the shared analysis: extra blocks -> how many times the plain chain's time they take.
WELL_INSIDE_THE_BAND, HALF_AGAIN, THREEFOLD = 1, 10, 40
SLOWED = {WELL_INSIDE_THE_BAND: 1.03, HALF_AGAIN: 1.5, THREEFOLD: 3.0}


@pytest.fixture(scope="module")
def steady() -> dict:
    """The analysis of steady processes (1% spread) timing two unchanged cases and the chains of SLOWED."""
    return analyse(synthetic_workers(slowed=SLOWED), IDENTITY, SPLITS, seed=0)


def all_rates(result: dict, section: str) -> list[dict]:
    return [r for by_case in result[section].values() for r in by_case.values()]


# --- splits -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("current_runs", CURRENT_RUNS)
def test_splits_draw_disjoint_baseline_and_current_processes_of_the_asked_sizes(current_runs):
    drawn = splits(range(PROCESSES), current_runs, count=50, seed=3)
    assert len(drawn) == 50
    for baseline, current in drawn:
        assert len(baseline) == BASELINE_RUNS and len(set(baseline)) == BASELINE_RUNS
        assert len(current) == current_runs and len(set(current)) == current_runs
        assert not set(baseline) & set(current)


def test_splits_are_the_same_for_the_same_seed_and_differ_for_another():
    assert splits(range(PROCESSES), 3, 40, seed=5) == splits(range(PROCESSES), 3, 40, seed=5)
    assert splits(range(PROCESSES), 3, 40, seed=5) != splits(range(PROCESSES), 3, 40, seed=6)


def test_splits_draw_only_the_processes_given():
    processes = [3 * i + 40 for i in range(PROCESSES)]
    drawn = splits(processes, 1, 40, seed=0)
    assert drawn and {i for baseline, current in drawn for i in baseline + current} <= set(processes)


def test_splits_are_empty_with_fewer_processes_than_a_baseline_and_current_runs_need():
    assert splits(range(BASELINE_RUNS), 1, 10, seed=0) == []
    assert len(splits(range(BASELINE_RUNS + 1), 1, 10, seed=0)) == 10


# --- what a split is judged on -------------------------------------------------------------------------------


def test_baseline_entry_holds_every_baseline_run_as_the_store_keeps_it():
    runs = [synthetic_run("resnet18", 4e-3, seed) for seed in range(BASELINE_RUNS)]
    entry = baseline_entry(runs, IDENTITY)
    assert entry.run_medians_s == tuple(stored_run(r.round_times_s, None, "x", None).median_s for r in runs)
    assert entry.machine == IDENTITY
    assert (entry.case, entry.config_digest) == (runs[-1].case, runs[-1].config_digest)


def test_a_slowed_chain_is_judged_under_the_plain_chains_identity_with_its_own_rounds():
    plain = synthetic_run("selftest-chain20x16", 1e-3, 1)
    slowed = synthetic_run("selftest-chain23x16", 1.15e-3, 2, digest="another digest")
    judged_as = as_case(slowed, plain)
    assert (judged_as.case, judged_as.config_digest) == (plain.case, plain.config_digest)
    assert judged_as.round_times_s == slowed.round_times_s


def test_judge_split_flags_a_threefold_slowdown_by_the_gate_pytest_benchmark_and_asv():
    baseline = [synthetic_run("resnet18", 4e-3, seed) for seed in range(BASELINE_RUNS)]
    current = [synthetic_run("resnet18", 12e-3, 10 + seed) for seed in range(3)]
    judged = judge_split(baseline, current, IDENTITY, [[r.median_s for r in baseline]])
    assert (judged["gate"], judged["pytest_benchmark"], judged["asv"]) == ("regressed", True, True)
    assert judged["ratio"] == pytest.approx(3.0, rel=0.05)


def test_judge_split_applies_pytest_benchmarks_rule_at_the_ten_percent_band():
    baseline = [synthetic_run("resnet18", 4e-3, seed, noise=0.0) for seed in range(BASELINE_RUNS)]
    groups = [[r.median_s for r in baseline]]
    over = judge_split(baseline, [synthetic_run("resnet18", 4e-3 * 1.12, 9, noise=0.0)], IDENTITY, groups)
    under = judge_split(baseline, [synthetic_run("resnet18", 4e-3 * 1.08, 9, noise=0.0)], IDENTITY, groups)
    assert (over["pytest_benchmark"], under["pytest_benchmark"]) == (True, False)


# --- the analysis -------------------------------------------------------------------------------------------


def test_identical_runs_are_flagged_by_no_rule():
    result = analyse(synthetic_workers(noise=0.0), IDENTITY, SPLITS, seed=0)
    judged = all_rates(result, "false_alarms")
    assert len(judged) == 2 * len(CURRENT_RUNS)  # two unchanged cases at each current process count
    assert all(r["gate_regressed"] == r["pytest_benchmark"] == r["asv"] == 0 for r in judged)
    assert all(r["median_ratio"] == 1 for r in judged)


def test_steady_runs_raise_no_false_alarm_and_every_split_is_counted(steady):
    assert set(steady["false_alarms"]) == {str(k) for k in CURRENT_RUNS}
    for rates_of_case in all_rates(steady, "false_alarms"):
        assert rates_of_case["splits"] == SPLITS
        assert rates_of_case["gate_regressed"] == rates_of_case["pytest_benchmark"] == rates_of_case["asv"] == 0


def test_a_planted_threefold_slowdown_on_every_current_run_is_detected_by_every_rule(steady):
    detected = [steady["detection"][str(k)][f"{CHAIN_NAME}+{THREEFOLD}"] for k in CURRENT_RUNS]
    assert all(r["gate_regressed"] == r["pytest_benchmark"] == r["asv"] == 1 for r in detected)
    assert all(r["nominal_slowdown"] == pytest.approx(2.0) for r in detected)
    assert all(r["median_ratio"] == pytest.approx(3.0, rel=0.05) for r in detected)


def test_a_slowdown_well_inside_the_band_is_not_flagged_by_the_gate(steady):
    inside = [steady["detection"][str(k)][f"{CHAIN_NAME}+{WELL_INSIDE_THE_BAND}"] for k in CURRENT_RUNS]
    assert all(r["gate_regressed"] == 0 for r in inside)


def test_the_slowed_chain_is_not_rejected_as_incompatible_although_its_digest_differs(monkeypatch):
    statuses = []
    real_judge = analysis.judge

    def recording_judge(*args, **kwargs):
        verdict = real_judge(*args, **kwargs)
        statuses.append(verdict.status)
        return verdict

    monkeypatch.setattr(analysis, "judge", recording_judge)
    analyse(synthetic_workers(slowed={THREEFOLD: 3.0}), IDENTITY, 5, seed=0)
    assert statuses and "incompatible" not in statuses


def test_analysis_judges_with_the_gates_own_rules_not_a_copy():
    assert analysis.judge is verdicts.judge
    assert analysis.pytest_benchmark_fails is stats.pytest_benchmark_fails
    assert analysis.asv_fails is stats.asv_fails


def test_every_split_the_analysis_reports_is_one_call_of_the_gates_judge(monkeypatch):
    calls = []
    real_judge = analysis.judge

    def counting_judge(*args, **kwargs):
        calls.append(args[0].case)
        return real_judge(*args, **kwargs)

    monkeypatch.setattr(analysis, "judge", counting_judge)
    result = analyse(synthetic_workers(slowed={5: 1.25}), IDENTITY, 5, seed=0)
    reported = [r for key in ("false_alarms", "detection", "scaled_detection") for r in all_rates(result, key)]
    assert len(result["detection"]) == len(CURRENT_RUNS)  # the slowed chain was judged at every K
    assert len(calls) == sum(r["splits"] for r in reported) > 0


def test_forcing_the_gates_decision_changes_the_rates_the_analysis_reports(monkeypatch):
    # The verdict's decision comes from compare_runs in perfsuite.judge.verdicts: force it and the selftest's
    # false-alarm rate follows, so the analysis keeps no rule of its own.
    real_compare = verdicts.compare_runs
    calls = []

    def always_regressed(*args, **kwargs):
        calls.append(1)
        return dataclasses.replace(real_compare(*args, **kwargs), outcome="regressed")

    workers = synthetic_workers(noise=0.0)
    before = analyse(workers, IDENTITY, 5, seed=0)
    monkeypatch.setattr(verdicts, "compare_runs", always_regressed)
    after = analyse(workers, IDENTITY, 5, seed=0)
    assert all(r["gate_regressed"] == 0 for r in all_rates(before, "false_alarms"))
    assert all(r["gate_regressed"] == 1 for r in all_rates(after, "false_alarms"))
    assert all(r["pytest_benchmark"] == 0 for r in all_rates(after, "false_alarms"))
    assert calls


def test_analysis_pools_the_machine_spread_over_the_baseline_runs_of_every_unchanged_case(monkeypatch):
    spreads = []
    real_judge = analysis.judge

    def spying_judge(*args, **kwargs):
        spreads.append(kwargs["machine_spread"])
        return real_judge(*args, **kwargs)

    monkeypatch.setattr(analysis, "judge", spying_judge)
    analyse(synthetic_workers(), IDENTITY, 5, seed=0)
    unchanged_cases = 2
    assert {s.degrees_of_freedom for s in spreads} == {unchanged_cases * (BASELINE_RUNS - 1)}


def test_analysis_is_the_same_for_the_same_seed():
    workers = synthetic_workers(slowed={3: 1.15})
    assert analyse(workers, IDENTITY, 8, seed=4) == analyse(workers, IDENTITY, 8, seed=4)


def test_analysis_counts_the_processes_and_uses_their_own_indices():
    result = analyse(synthetic_workers(processes=PROCESSES + 1, first_index=40), IDENTITY, 5, seed=0)
    assert result["processes"] == PROCESSES + 1
    assert all(r["splits"] == 5 for r in all_rates(result, "false_alarms"))


def test_detection_is_expected_exactly_where_the_slowdown_is_the_margin_times_the_chains_floor(steady):
    for current, by_case in steady["detection"].items():
        assert set(by_case) == {f"{CHAIN_NAME}+{blocks}" for blocks in SLOWED}
        chain_floor = steady["false_alarms"][current][CHAIN_NAME]["floor"]
        for r in by_case.values():
            assert r["chain_floor"] == chain_floor
            assert r["expected"] == (r["nominal_slowdown"] >= FLOOR_MARGIN * chain_floor)


def test_run_spread_is_the_sample_sd_of_the_log_run_medians():
    workers = synthetic_workers(noise=0.05)
    medians = [run_from_json(w["records"][0]["run"]).median_s for w in workers]
    spread = analyse(workers, IDENTITY, 5, seed=0)["run_spread"][CHAIN_NAME]
    assert spread == pytest.approx(float(np.std(np.log(medians), ddof=1)))


def test_slowed_by_multiplies_every_round_and_keeps_the_rest_of_the_run():
    run = synthetic_run("resnet18", 4e-3, 1)
    slowed = slowed_by(run, 0.25)
    assert slowed.round_times_s == pytest.approx([t * 1.25 for t in run.round_times_s])
    assert (slowed.case, slowed.config_digest) == (run.case, run.config_digest)


def test_each_unchanged_case_is_checked_at_the_margin_times_its_own_floor(steady):
    assert set(steady["scaled_detection"]) == set(steady["false_alarms"])
    for current, by_case in steady["scaled_detection"].items():
        assert set(by_case) == {CHAIN_NAME, UNCHANGED_MODEL}
        for name, r in by_case.items():
            assert r["slowdown"] == pytest.approx(FLOOR_MARGIN * steady["false_alarms"][current][name]["floor"])
            assert r["splits"] == SPLITS


def test_steady_runs_scaled_by_the_margin_times_their_floor_are_caught(steady):
    # The runs scatter 1% between processes: a slowdown of FLOOR_MARGIN x the floor the gate claims is caught.
    assert all(r["gate_regressed"] == 1 for r in all_rates(steady, "scaled_detection"))


def test_analysis_of_fewer_processes_than_a_split_needs_has_no_rates():
    result = analyse(synthetic_workers(processes=BASELINE_RUNS, slowed=SLOWED), IDENTITY, SPLITS, seed=0)
    assert result["false_alarms"] == result["detection"] == result["scaled_detection"] == {}


# --- rates --------------------------------------------------------------------------------------------------


def judgement(gate: str, floor: float | None, ratio: float, pytest_benchmark: bool, asv: bool) -> dict:
    return {"gate": gate, "detectable_slowdown": floor, "ratio": ratio, "pytest_benchmark": pytest_benchmark,
            "asv": asv}


def test_rates_are_the_share_of_judgements_each_rule_flagged_and_the_median_floor():
    judgements = [
        judgement("regressed", 0.2, 1.3, True, True),
        judgement("unchanged", 0.1, 1.0, False, False),
        judgement("uncalibrated", 1.0, 0.9, False, False),
        judgement("improved", 0.3, 0.7, False, True),
        judgement("incompatible", None, 1.05, True, False),
    ]
    assert rates(judgements) == {
        "splits": 5, "gate_regressed": 0.2, "gate_improved": 0.2, "gate_uncalibrated": 0.2,
        "pytest_benchmark": 0.4, "asv": 0.4, "floor": pytest.approx(0.25), "median_ratio": 1.0,
    }


def test_rates_have_no_floor_when_no_judgement_reported_one():
    assert rates([judgement("incompatible", None, 1.0, False, False)])["floor"] is None


# --- the report ---------------------------------------------------------------------------------------------


def rate_row(gate_regressed: float = 0.0, floor: float | None = 0.08, **more) -> dict:
    return {"splits": 40, "gate_regressed": gate_regressed, "gate_improved": 0.0, "gate_uncalibrated": 0.0,
            "pytest_benchmark": 0.05, "asv": 0.0, "floor": floor, "median_ratio": 1.0, **more}


def detection_row(nominal: float, chain_floor: float | None, gate_regressed: float = 1.0) -> dict:
    expected = chain_floor is not None and nominal >= FLOOR_MARGIN * chain_floor
    return rate_row(gate_regressed, median_ratio=1 + nominal, nominal_slowdown=nominal, chain_floor=chain_floor,
                    expected=expected)


def hand_analysis(false_alarms: dict[str, dict], detection: dict[str, dict] | None = None) -> dict:
    return {"processes": PROCESSES, "baseline_runs": BASELINE_RUNS, "false_alarms": {"3": false_alarms},
            "detection": {"3": detection or {}}, "run_spread": {name: 0.02 for name in false_alarms}}


def document(analysis_: dict | None = None, device: str = "cpu", overhead_fraction: float = 0.0002,
             plan: SelftestPlan | None = None, workers: list | None = None) -> dict:
    plan = plan or SelftestPlan(device, PROCESSES, 0.1, 60, SIDE, threads=1, splits=SPLITS)
    return {
        "schema": measure.SCHEMA, "schema_version": measure.SCHEMA_VERSION, "device": device, "plan": asdict(plan),
        "started_at": "2026-12-02T16:00:00Z", "wall_s": 300.0, "cpu_count": 2, "load_average_before": 0.5,
        "load_average_after": 0.7, "torch_version": "2.13.0",
        "machine": {"cpu_model": "Test CPU", "accelerator_name": "NVIDIA H200" if device == "cuda" else None},
        "command": f"perfsuite selftest --device {device} --out docs/records/selftest",
        "probe": {"accuracy": [], "overhead": {
            "harness_round_s": overhead_fraction * 1e-3, "harness_fraction_of_1ms": overhead_fraction,
            "harness_round_p90_s": 2e-7, "harness_wall_per_round_s": 3e-6, "timer_pair_s": 6e-8,
            "synchronize_idle_s": 1e-7, "tiny_step_round_s": 2e-6,
        }},
        "workers": workers or [], "worker_failures": [],
        "analysis": analysis_ or hand_analysis({CHAIN_NAME: rate_row()}),
    }


def section(text: str, heading: str) -> list[str]:
    """The lines of the report section `heading` (up to the next `## `)."""
    lines = text.splitlines()
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def row_of(lines: list[str], *cells: str) -> str:
    """The one table row among `lines` holding every cell in `cells`."""
    rows = [line for line in lines if all(f"| {cell} |" in line for cell in cells)]
    assert len(rows) == 1, (cells, rows)
    return rows[0]


def test_report_shows_each_cases_floor_beside_the_band_and_marks_a_floor_above_it():
    text = render_report([document(hand_analysis({CHAIN_NAME: rate_row(floor=0.25),
                                                  UNCHANGED_MODEL: rate_row(floor=0.05)}))])
    lines = section(text, "## False alarms and floors")
    assert any("| floor | floor vs 10% band |" in line for line in lines)
    assert "| >= 25.0% | above |" in row_of(lines, CHAIN_NAME)
    assert "| >= 5.0% | under |" in row_of(lines, UNCHANGED_MODEL)


def test_report_counts_a_floor_of_exactly_the_band_as_under_it():
    text = render_report([document(hand_analysis({CHAIN_NAME: rate_row(floor=0.10)}))])
    assert "| >= 10.0% | under |" in row_of(section(text, "## False alarms and floors"), CHAIN_NAME)


def test_report_does_not_call_a_missing_floor_under_the_band():
    text = render_report([document(hand_analysis({CHAIN_NAME: rate_row(floor=None)}))])
    assert "| - | under |" not in row_of(section(text, "## False alarms and floors"), CHAIN_NAME)


def test_report_shows_the_chains_floor_and_whether_each_slowdown_is_expected_to_be_caught():
    detection = {f"{CHAIN_NAME}+1": detection_row(0.05, 0.25), f"{CHAIN_NAME}+10": detection_row(0.5, 0.25)}
    text = render_report([document(hand_analysis({CHAIN_NAME: rate_row(floor=0.25)}, detection))])
    lines = section(text, "## Detection")
    assert "| >= 25.0% | no |" in row_of(lines, "+5%")
    assert "| >= 25.0% | yes |" in row_of(lines, "+50%")


def test_report_marks_a_false_alarm_rate_above_one_percent_missed_and_under_it_met():
    analysis_ = hand_analysis({CHAIN_NAME: rate_row(gate_regressed=0.02), UNCHANGED_MODEL: rate_row(0.0)})
    lines = section(render_report([document(analysis_)]), "## The targets")
    assert row_of(lines, CHAIN_NAME).endswith("| 2.0% | **missed** |")
    assert row_of(lines, UNCHANGED_MODEL).endswith("| 0.0% | met |")


def test_targets_hold_detection_only_of_the_slowdowns_expected_to_be_caught():
    detection = {f"{CHAIN_NAME}+1": detection_row(0.05, 0.25, gate_regressed=0.1),
                 f"{CHAIN_NAME}+10": detection_row(0.5, 0.25, gate_regressed=0.9)}
    rows = target_rows(document(hand_analysis({CHAIN_NAME: rate_row(floor=0.25)}, detection)))
    detected = [(row.subject, row.met) for row in rows if "detection" in row.target]
    assert detected == [(f"{CHAIN_NAME}+10 (+50%)", False)]


def test_report_checks_each_cases_floor_claim_on_its_scaled_runs():
    analysis_ = hand_analysis({CHAIN_NAME: rate_row(floor=0.2), UNCHANGED_MODEL: rate_row(floor=0.1)})
    analysis_["scaled_detection"] = {"3": {CHAIN_NAME: rate_row(gate_regressed=0.9, slowdown=0.3),
                                           UNCHANGED_MODEL: rate_row(gate_regressed=1.0, slowdown=0.15)}}
    scaled = [(row.subject, row.met) for row in target_rows(document(analysis_)) if "own floor" in row.target]
    assert scaled == [(f"{CHAIN_NAME} (+30%)", False), (f"{UNCHANGED_MODEL} (+15%)", True)]
    lines = section(render_report([document(analysis_)]), "## Detection at each case's own floor")
    assert "| +30% | 90.0% |" in row_of(lines, CHAIN_NAME)


def test_target_rows_mark_an_overhead_above_one_percent_missed():
    rows = {row.target: row for row in target_rows(document(overhead_fraction=0.02))}
    assert rows["overhead <= 1% of a 1 ms step"].met is False
    rows = {row.target: row for row in target_rows(document(overhead_fraction=0.002))}
    assert rows["overhead <= 1% of a 1 ms step"].met is True


def test_target_rows_judge_gpu_timing_against_the_profilers_kernel_time():
    cuda = document(device="cuda")
    cuda["probe"]["accuracy"] = [
        {"name": "matmul-chain", "suite_s": 0.00101, "profiler_kernel_s": 0.001},
        {"name": "resnet18-infer-bs4-smoke", "suite_s": 0.00125, "profiler_kernel_s": 0.001},
        {"name": "resnet18-train-bs4-smoke", "error": "RuntimeError: no kernels"},
    ]
    rows = [row for row in target_rows(cuda) if row.target.startswith("GPU timing")]
    assert [(row.subject, row.met) for row in rows] == [
        ("matmul-chain", True), ("resnet18-infer-bs4-smoke", False), ("resnet18-train-bs4-smoke", None),
    ]


def test_report_carries_the_command_and_puts_cpu_before_cuda():
    text = render_report([document(device="cuda"), document()])
    assert "`perfsuite selftest --device cpu --out docs/records/selftest`" in text
    assert text.startswith("# Measurement quality")
    runs = "\n".join(section(text, "## The runs"))
    assert runs.index("| cpu (Test CPU)") < runs.index("| cuda (NVIDIA H200)")


def test_run_label_names_the_threads_the_load_and_the_busy_processes():
    plan = SelftestPlan("cpu", 8, 0.1, 60, SIDE, threads=1, contention=4)
    assert run_label(document(plan=plan)) == "cpu (Test CPU), 8 processes, 1 thread, load 0.5, +4 busy processes"


def test_report_renders_a_real_analysis_of_synthetic_runs(steady):
    text = render_report([document(steady)])
    floor = steady["false_alarms"]["3"][CHAIN_NAME]["floor"]
    assert f">= {floor * 100:.1f}%" in row_of(section(text, "## False alarms and floors"), "3", CHAIN_NAME)
    assert row_of(section(text, "## Detection"), "3", "+200%")


# --- the command ----------------------------------------------------------------------------------------------


class MeasurementStarted(Exception):
    """The command went on to measure: the input it was given was accepted."""


@pytest.fixture
def no_measuring(monkeypatch):
    """Fail loudly instead of measuring when the command accepts its input."""
    def started(plan, progress=print):
        raise MeasurementStarted(plan)

    monkeypatch.setattr(measure, "run_selftest", started)


def selftest(*argv: str) -> int:
    return cli_main(["selftest", *argv])


def test_command_rejects_a_device_this_machine_cannot_use(monkeypatch, capsys, no_measuring):
    from perfsuite.run.devices import backend

    monkeypatch.setattr(backend("cuda"), "availability", lambda: Availability(False, "no GPU in the test"))
    assert selftest("--device", "cuda") == 2
    assert "--device cuda: no GPU in the test" in capsys.readouterr().err


@pytest.mark.parametrize("processes", ["-3", "0", "1", str(BASELINE_RUNS)])
def test_command_rejects_fewer_processes_than_a_baseline_history_and_one_current_run(processes, capsys, no_measuring):
    assert selftest("--device", "cpu", "--processes", processes) == 2
    assert f"--processes {processes}: at least {BASELINE_RUNS + 1}" in capsys.readouterr().err


def test_command_rejects_a_process_count_that_is_not_a_number(capsys, no_measuring):
    with pytest.raises(SystemExit) as exit_:
        selftest("--device", "cpu", "--processes", "x")
    assert exit_.value.code == 2
    assert "--processes: invalid int value: 'x'" in capsys.readouterr().err


def test_command_lists_the_valid_cases_for_an_unknown_one(capsys, no_measuring):
    assert selftest("--device", "cpu", "--cases", "matmul-chian") == 2
    error = capsys.readouterr().err
    assert "--cases: unknown matmul-chian" in error and "valid: matmul-chain" in error


@pytest.mark.parametrize("option, value", [
    ("--max-time-s", "0"), ("--budget-s", "-1"), ("--threads", "0"), ("--contention", "-1"), ("--cases", ","),
])
def test_command_rejects_non_positive_limits_and_empty_cases(option, value, capsys, no_measuring):
    assert selftest("--device", "cpu", option, value) == 2
    assert option in capsys.readouterr().err


def test_command_measures_the_plan_its_options_ask_for_and_writes_the_document(tmp_path, monkeypatch, capsys):
    plans = []

    def fake_run_selftest(plan, progress=print):
        plans.append(plan)
        return {"schema": measure.SCHEMA, "schema_version": measure.SCHEMA_VERSION, "device": plan.device}

    monkeypatch.setattr(measure, "run_selftest", fake_run_selftest)
    out = tmp_path / "out"
    assert selftest("--device", "cpu", "--out", str(out), "--processes", str(PROCESSES), "--threads", "1",
                    "--cases", "matmul-chain, matmul-chain+3") == 0
    (plan,) = plans
    assert (plan.processes, plan.threads, plan.cases) == (PROCESSES, 1, ("matmul-chain", "matmul-chain+3"))
    written = json.loads((out / "selftest-cpu-threads1.json").read_text())
    assert f"--processes {PROCESSES}" in written["command"] and "--threads 1" in written["command"]


def test_report_command_writes_the_markdown(tmp_path, capsys):
    source = tmp_path / "selftest-cpu.json"
    measure.write_document(document(), source)
    output = tmp_path / "docs" / "measurement-quality.md"
    assert selftest("--report", str(source), "--output", str(output)) == 0
    text = output.read_text()
    assert text.startswith("# Measurement quality")
    assert f"(file {source})" in text


def report_of(tmp_path, content: str, capsys) -> tuple[int, str, bool]:
    source = tmp_path / "given.json"
    source.write_text(content)
    output = tmp_path / "out.md"
    status = selftest("--report", str(source), "--output", str(output))
    return status, capsys.readouterr().err, output.exists()


def test_report_command_rejects_a_file_of_another_schema(tmp_path, capsys):
    status, error, written = report_of(tmp_path, json.dumps({"schema": "perfsuite-baseline"}), capsys)
    assert (status, written) == (2, False)
    assert "given.json: not a perfsuite selftest file" in error


def test_report_command_rejects_a_selftest_file_of_an_old_schema_version(tmp_path, capsys):
    old = {"schema": measure.SCHEMA, "schema_version": measure.SCHEMA_VERSION - 1}
    status, error, written = report_of(tmp_path, json.dumps(old), capsys)
    assert (status, written) == (2, False)
    assert f"schema_version {measure.SCHEMA_VERSION - 1}" in error and "measure again" in error


def test_report_command_rejects_a_file_that_is_not_json(tmp_path, capsys):
    status, error, written = report_of(tmp_path, "not json {", capsys)
    assert (status, written) == (2, False)
    assert "given.json: is not valid JSON" in error


def test_report_command_rejects_a_json_list(tmp_path, capsys):
    status, error, _ = report_of(tmp_path, "[1, 2]", capsys)
    assert status == 2 and "not a perfsuite selftest file" in error


def test_report_command_names_a_missing_file_and_how_to_make_one(tmp_path, capsys):
    assert selftest("--report", str(tmp_path / "none.json"), "--output", str(tmp_path / "x.md")) == 2
    error = capsys.readouterr().err
    assert "none.json: no such file" in error and "perfsuite selftest --device cpu" in error


def test_report_command_rejects_a_selftest_file_without_its_analysis(tmp_path, capsys):
    incomplete = {key: value for key, value in document().items() if key != "analysis"}
    status, error, written = report_of(tmp_path, json.dumps(incomplete), capsys)
    assert (status, written) == (2, False)
    assert "analysis" in error


def test_analyse_command_recomputes_the_analysis_from_the_raw_runs_in_place(tmp_path, capsys):
    workers = synthetic_workers(processes=BASELINE_RUNS + 1, slowed={HALF_AGAIN: 1.5})
    plan = SelftestPlan("cpu", BASELINE_RUNS + 1, 0.1, 60, SIDE, splits=4)
    stale = document({"stale": True}, workers=workers, plan=plan)
    path = tmp_path / "selftest-cpu.json"
    measure.write_document(stale, path)
    assert selftest("--analyse", str(path)) == 0
    expected = analyse(workers, machine_identity(stale["machine"], "cpu"), 4, seed=0)
    assert json.loads(path.read_text())["analysis"] == json.loads(json.dumps(expected))


def test_analyse_command_rejects_a_selftest_file_without_its_plan(tmp_path, capsys):
    path = tmp_path / "selftest-cpu.json"
    path.write_text(json.dumps({"schema": measure.SCHEMA, "schema_version": measure.SCHEMA_VERSION, "device": "cpu",
                                "plan": {}, "workers": []}))
    assert selftest("--analyse", str(path)) == 2
    assert "plan" in capsys.readouterr().err


def test_the_accuracy_columns_are_the_references_the_run_measured():
    cpu = document()
    cpu["probe"]["accuracy"] = [
        {"name": "matmul-chain", "suite_s": 0.001, "timer_per_call_s": 0.001, "timer_blocked_s": 0.001},
        {"name": "resnet18-infer-bs4-smoke", "error": "RuntimeError: boom"},
    ]
    lines = section(render_report([cpu]), "## Accuracy")
    assert "| case | steps a round | suite median | Timer blocked_autorange | diff | Timer per call | diff |" in lines
    assert "| resnet18-infer-bs4-smoke | RuntimeError: boom | - | - | - | - | - |" in lines
