"""Records: a case's id, a run's figures derived from its rounds, a measurement of several runs, a baseline entry."""

from __future__ import annotations

import math

import pytest

from perfsuite.records import BaselineEntry, Case, Measurement, Run, StoredRun, check_round_times

CASE = Case(device="cpu", dtype="fp32", model="resnet18", batch_size=4, mode="train", profile="standard")
DDP_CASE = Case(device="cuda", dtype="bf16", model="resnet18", batch_size=8, mode="train-ddp", profile="standard")


def run(
    round_times_s=(0.010, 0.012, 0.011, 0.013, 0.014),
    case: Case = CASE,
    samples_per_step: int = 4,
    flops_per_step: int | None = None,
    memory_bytes: int | None = 500_000_000,
    **changes,
) -> Run:
    fields = dict(
        case=case, round_times_s=round_times_s, samples_per_step=samples_per_step, flops_per_step=flops_per_step,
        memory_figure="cpu_peak_rss_bytes", memory_bytes=memory_bytes, config_digest="a1b2c3d4e5f6",
        torch_version="2.13.0", threads=2,
    )
    fields.update(changes)
    return Run(**fields)


def stored(median_s: float, memory_bytes: int | None = None) -> StoredRun:
    return StoredRun(
        median_s=median_s, rounds=3, round_times_s=(median_s * 0.99, median_s, median_s * 1.01),
        memory_bytes=memory_bytes, recorded_at="2026-12-02T15:00:00Z", commit="abc1234",
    )


def baseline_entry(*runs: StoredRun, samples_per_step: int = 4) -> BaselineEntry:
    return BaselineEntry(
        case=CASE, config_digest="a1b2c3d4e5f6", torch_version="2.13.0", threads=2, machine={"cpu_model": "AMD EPYC"},
        memory_figure="cpu_peak_rss_bytes", samples_per_step=samples_per_step, flops_per_step=None,
        gpu_busy_fraction=None, tolerance=0.10, memory_tolerance=0.10, runs=runs,
    )


# --- Case ---------------------------------------------------------------------------------------------


def test_benchmark_id_of_a_standard_case_names_device_dtype_model_batch_size_and_mode():
    assert CASE.benchmark_id == "cpu-fp32-resnet18-bs4-train"


@pytest.mark.parametrize("profile", ["smoke", "full"])
def test_benchmark_id_of_another_profile_ends_with_the_profile(profile):
    case = Case(device="mps", dtype="bf16", model="resnet18", batch_size=64, mode="infer", profile=profile)
    assert case.benchmark_id == f"mps-bf16-resnet18-bs64-infer-{profile}"


def test_benchmark_id_keeps_a_variant_mode_whole():
    assert DDP_CASE.benchmark_id == "cuda-bf16-resnet18-bs8-train-ddp"


# --- check_round_times --------------------------------------------------------------------------------


def test_round_times_that_are_finite_and_positive_pass():
    check_round_times([0.01, 0.02, 1e-9], "cpu-fp32-resnet18-bs4-train (current)")


def test_no_rounds_is_an_error_naming_the_benchmark():
    with pytest.raises(ValueError, match=r"^cpu-fp32-resnet18-bs4-train \(current\): no timed rounds"):
        check_round_times([], "cpu-fp32-resnet18-bs4-train (current)")


@pytest.mark.parametrize("bad", [0.0, -0.01, math.nan, math.inf, 5e-324, 0.9e-9])
def test_a_round_below_1_ns_or_not_finite_is_an_error_that_says_to_rerun(bad):
    rule = r"must be finite and at least 1 ns \(1e-09 s\).*re-run the benchmark"
    with pytest.raises(ValueError, match=rule) as error:
        check_round_times([0.01, bad, 0.02], "cpu-fp32-resnet18-bs4-train")
    assert str(error.value).startswith("cpu-fp32-resnet18-bs4-train:")


def test_more_than_three_bad_rounds_are_shown_as_three_and_more():
    with pytest.raises(ValueError, match=r"\[0\.0, 0\.0, 0\.0\] and more"):
        check_round_times([0.0, 0.0, 0.0, 0.0, 0.01], "id")


def test_round_times_that_are_not_numbers_are_an_error():
    with pytest.raises(ValueError, match="id: round times must be numbers of seconds"):
        check_round_times(["fast", "slow"], "id")


# --- Run ----------------------------------------------------------------------------------------------


def test_a_run_refuses_a_zero_round_naming_its_benchmark():
    with pytest.raises(ValueError, match="^cpu-fp32-resnet18-bs4-train: round times must be finite"):
        run(round_times_s=(0.01, 0.0, 0.01))


def test_a_run_refuses_a_subnormal_round_whose_samples_per_s_would_be_infinite():
    with pytest.raises(ValueError, match=r"^cpu-fp32-resnet18-bs4-train: round times must be finite and at least 1 ns"):
        run(round_times_s=(5e-324,))


def test_a_run_stores_its_rounds_as_an_immutable_tuple_of_floats():
    assert run(round_times_s=[1, 2, 3]).round_times_s == (1.0, 2.0, 3.0)


def test_run_rounds_counts_the_timed_rounds():
    assert run().rounds == 5


def test_run_median_is_the_median_round_time():
    assert run(round_times_s=(0.014, 0.010, 0.012, 0.011, 0.013)).median_s == 0.012


def test_run_iqr_is_the_interquartile_range_with_linear_interpolation():
    # Percentiles 25 and 75 of 1..5 are 2 and 4.
    assert run(round_times_s=(5.0, 1.0, 3.0, 2.0, 4.0)).iqr_s == 2.0


def test_run_samples_per_second_is_samples_per_step_over_the_median():
    assert run(round_times_s=(0.02, 0.02, 0.02), samples_per_step=4).samples_per_s == pytest.approx(200.0)


def test_run_tflops_per_second_is_flops_per_step_over_the_median():
    assert run(round_times_s=(0.5, 0.5, 0.5), flops_per_step=2 * 10**12).tflops_per_s == pytest.approx(4.0)


def test_run_tflops_is_none_when_flops_were_not_counted():
    assert run(flops_per_step=None).tflops_per_s is None


def test_train_ddp_tflops_count_every_process_of_the_step():
    # Batch size 8 per process, 3 processes: 24 samples per step; the FLOPs are one process's.
    ddp = run(case=DDP_CASE, round_times_s=(0.5, 0.5, 0.5), samples_per_step=24, flops_per_step=10**12)
    assert ddp.tflops_per_s == pytest.approx(6.0)


def test_train_ddp_samples_per_second_count_every_process_of_the_step():
    ddp = run(case=DDP_CASE, round_times_s=(0.5, 0.5, 0.5), samples_per_step=24, flops_per_step=10**12)
    assert ddp.samples_per_s == pytest.approx(48.0)


def test_a_run_is_immutable():
    with pytest.raises(AttributeError):
        run().round_times_s = (1.0,)  # type: ignore[misc]


# --- Measurement ----------------------------------------------------------------------------------------


def test_a_measurement_needs_a_run():
    with pytest.raises(ValueError, match="cpu-fp32-resnet18-bs4-train: a measurement needs at least one run"):
        Measurement(case=CASE, runs=())


def test_a_measurement_refuses_runs_of_another_case():
    with pytest.raises(ValueError, match="runs of other cases mixed in: cuda-bf16-resnet18-bs8-train-ddp"):
        Measurement(case=CASE, runs=(run(), run(case=DDP_CASE, samples_per_step=16)))


def test_measurement_run_medians_are_each_runs_median_in_order():
    measurement = Measurement(CASE, (run(round_times_s=(0.3, 0.3)), run(round_times_s=(0.1, 0.1, 0.1))))
    assert measurement.run_medians_s == (0.3, 0.1)


def test_measurement_median_is_the_median_of_run_medians_not_of_all_rounds():
    # All rounds together have median 0.1 (five of nine); the runs' medians are 0.1, 0.5, 0.6.
    measurement = Measurement(CASE, (
        run(round_times_s=(0.1, 0.1, 0.1, 0.1, 0.1)), run(round_times_s=(0.5, 0.5)), run(round_times_s=(0.6, 0.6)),
    ))
    assert measurement.median_s == 0.5


def test_measurement_round_times_are_every_round_run_after_run():
    measurement = Measurement(CASE, (run(round_times_s=(0.3, 0.2)), run(round_times_s=(0.1,))))
    assert measurement.round_times_s == (0.3, 0.2, 0.1)


def test_the_gated_memory_is_the_median_of_the_runs_each_in_a_process_of_its_own():
    fresh = {"fresh_process": True}
    runs = (run(memory_bytes=300, facts=fresh), run(memory_bytes=100, facts=fresh), run(memory_bytes=200, facts=fresh))
    assert Measurement(CASE, runs).own_memory_bytes == 200


def test_no_memory_is_gated_when_a_run_shared_its_process_or_measured_none():
    fresh = {"fresh_process": True}
    shared = (run(memory_bytes=300, facts=fresh), run(memory_bytes=200, facts={"fresh_process": False}))
    unmeasured = (run(memory_bytes=300, facts=fresh), run(memory_bytes=None, facts=fresh))
    assert Measurement(CASE, shared).own_memory_bytes is None
    assert Measurement(CASE, unmeasured).own_memory_bytes is None


def test_measurement_samples_per_second_is_at_the_median_of_run_medians():
    measurement = Measurement(CASE, (run(round_times_s=(0.1,)), run(round_times_s=(0.2,)), run(round_times_s=(0.4,))))
    assert measurement.samples_per_s == pytest.approx(4 / 0.2)


def test_measurement_last_is_the_run_that_ran_last():
    last = run(round_times_s=(0.9,))
    assert Measurement(CASE, (run(), last)).last is last


# --- BaselineEntry ---------------------------------------------------------------------------------------


def test_baseline_run_medians_are_the_stored_runs_medians_oldest_first():
    assert baseline_entry(stored(0.3), stored(0.1), stored(0.2)).run_medians_s == (0.3, 0.1, 0.2)


def test_baseline_median_is_the_median_of_run_medians():
    assert baseline_entry(stored(0.3), stored(0.1), stored(0.2), stored(0.9)).median_s == pytest.approx(0.25)


def test_baseline_memory_is_the_median_of_the_runs_that_measured_it():
    entry = baseline_entry(stored(0.1, 100), stored(0.1, None), stored(0.1, 300), stored(0.1, 900))
    assert entry.memory_bytes == 300


def test_baseline_memory_is_a_whole_number_of_bytes():
    entry = baseline_entry(stored(0.1, 100), stored(0.1, 301))
    assert (entry.memory_bytes, type(entry.memory_bytes)) == (200, int)


def test_baseline_memory_is_none_when_no_run_measured_it():
    assert baseline_entry(stored(0.1), stored(0.2)).memory_bytes is None


def test_baseline_samples_per_second_is_at_the_median_of_run_medians():
    entry = baseline_entry(stored(0.1), stored(0.2), stored(0.4), samples_per_step=8)
    assert entry.samples_per_s == pytest.approx(40.0)
