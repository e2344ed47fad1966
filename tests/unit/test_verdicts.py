"""Judging one result against its baseline entry, and which tolerance applies to it."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timezone

import numpy as np
import pytest

from perfsuite.judge.verdicts import judge, parse_tolerance_table, tolerance_for, unknown_tolerance_keys
from perfsuite.records import CaseResult
from perfsuite.store.baselines import BaselineEntry, entry_from_result

BENCHMARK_ID = "cpu-fp32-resnet18-bs4-train"
MACHINE = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "accelerator_name": None, "machine_slug": "amd-epyc-7763"}


def result(
    scale: float = 1.0, n: int = 30, seed: int = 1, memory_bytes: int | None = 500_000_000, **changes
) -> CaseResult:
    """A resnet18 cpu result whose rounds sit around 12 ms * scale with 4% lognormal noise."""
    times = np.random.default_rng(seed).lognormal(math.log(0.012 * scale), 0.04, n)
    fields = dict(
        benchmark_id=BENCHMARK_ID, device="cpu", dtype="fp32", model="resnet18", batch_size=4, mode="train",
        profile="standard", round_times_s=tuple(times), samples_per_s=4 / (0.012 * scale),
        memory_figure="cpu_peak_rss_bytes", memory_bytes=memory_bytes, flops_per_step=None, tflops_per_s=None,
        config_digest="a1b2c3d4e5f6", torch_version="2.13.0", reference_round_times_s=(),
    )
    fields.update(changes)
    return CaseResult(**fields)


def baseline(**changes) -> BaselineEntry:
    entry = entry_from_result(
        result(seed=2), commit="abc1234", recorded_at=datetime(2026, 12, 2, 15, 0, tzinfo=timezone.utc),
        tolerance=0.10, memory_tolerance=0.10,
    )
    return dataclasses.replace(entry, **changes)


# --- statuses -----------------------------------------------------------------------------------------


def test_no_baseline_is_not_a_failure_and_says_how_to_record_one():
    verdict = judge(result(), None, None, MACHINE, baseline_source="baselines/cpu/amd-epyc-7763.json")
    assert (verdict.status, verdict.gate_failed) == ("no-baseline", False)
    assert "pytest --benchmark-only --perf-update-baseline" in verdict.message
    assert "baselines/cpu/amd-epyc-7763.json" in verdict.message


def test_an_unchanged_result_passes():
    verdict = judge(result(scale=1.02), baseline(), MACHINE, MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("unchanged", False)


def test_a_regression_fails_the_gate():
    verdict = judge(result(scale=1.3), baseline(), MACHINE, MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("regressed", True)


def test_an_improvement_passes():
    verdict = judge(result(scale=0.7), baseline(), MACHINE, MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("improved", False)


def test_a_regression_message_names_id_medians_ratio_band_interval_and_p_value():
    verdict = judge(result(scale=1.3), baseline(), MACHINE, MACHINE)
    assert verdict.message.startswith(f"{BENCHMARK_ID} regressed: median 12")
    for fragment in ("ms ->", f"x{verdict.ratio:.3f}", "band 1.1", "tolerance 10%", "95% CI", "Mann-Whitney p ="):
        assert fragment in verdict.message


def test_too_few_rounds_is_shown_not_gated():
    verdict = judge(result(scale=2.0, n=3), baseline(), MACHINE, MACHINE)
    assert (verdict.status, verdict.gate_failed) == ("too-few-rounds", False)
    assert "--benchmark-min-rounds" in verdict.message


@pytest.mark.parametrize(
    "current_changes, machine_changes, reason",
    [
        ({}, {"cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"}, "cpu_model"),
        ({"torch_version": "2.14.0"}, {}, "torch_version"),
        ({"config_digest": "ffffffffffff"}, {}, "config_digest"),
        ({"profile": "smoke"}, {}, "profile"),
    ],
)
def test_another_machine_torch_config_or_profile_is_incompatible_and_never_gated(
    current_changes, machine_changes, reason
):
    verdict = judge(result(scale=2.0, **current_changes), baseline(), MACHINE, {**MACHINE, **machine_changes})
    assert (verdict.status, verdict.gate_failed) == ("incompatible", False)
    assert verdict.notes[0].startswith(reason)
    assert reason in verdict.message


def test_an_incompatible_verdict_still_shows_the_median_ratio():
    verdict = judge(result(scale=2.0, torch_version="2.14.0"), baseline(), MACHINE, MACHINE)
    assert verdict.ratio == pytest.approx(2.0, rel=0.1)


def cuda_result() -> CaseResult:
    return result(device="cuda", benchmark_id="cuda-fp32-resnet18-bs4-train", memory_figure="cuda_max_allocated_bytes")


def test_another_gpu_is_incompatible_for_a_cuda_case():
    current = cuda_result()
    entry = baseline(device="cuda", memory_figure="cuda_max_allocated_bytes")
    h200 = {**MACHINE, "accelerator_name": "NVIDIA H200"}
    verdict = judge(current, entry, h200, {**h200, "accelerator_name": "NVIDIA A100-SXM4-80GB"})
    assert verdict.status == "incompatible"


def test_another_cpu_on_the_same_gpu_is_compatible_for_a_cuda_case():
    current = cuda_result()
    entry = baseline(device="cuda", memory_figure="cuda_max_allocated_bytes")
    h200 = {**MACHINE, "accelerator_name": "NVIDIA H200"}
    verdict = judge(current, entry, h200, {**h200, "cpu_model": "Intel(R) Xeon(R) Platinum 8480+"})
    assert verdict.status == "unchanged"


# --- memory ---------------------------------------------------------------------------------------------


def test_a_memory_regression_fails_the_gate_even_when_time_is_unchanged():
    verdict = judge(result(memory_bytes=600_000_000), baseline(), MACHINE, MACHINE)
    assert (verdict.status, verdict.memory_status, verdict.gate_failed) == ("unchanged", "regressed", True)
    assert "memory regressed: cpu_peak_rss_bytes" in verdict.message


def test_memory_has_its_own_tolerance():
    verdict = judge(result(memory_bytes=600_000_000), baseline(), MACHINE, MACHINE, memory_tolerance=0.25)
    assert verdict.memory_status == "unchanged"


def test_different_memory_figures_are_not_compared():
    entry = baseline(memory_figure="mps_driver_allocated_bytes", memory_bytes=100)
    verdict = judge(result(), entry, MACHINE, MACHINE)
    assert (verdict.memory_status, verdict.gate_failed) == ("not-compared", False)
    assert "memory figures differ" in verdict.notes[0]


# --- drift normalisation --------------------------------------------------------------------------------


def test_a_slow_session_seen_by_the_reference_workload_is_not_a_regression():
    reference = tuple(np.random.default_rng(3).lognormal(math.log(0.0007), 0.03, 30))
    verdict = judge(result(scale=1.4, reference_round_times_s=reference), baseline(reference_median_s=0.0005),
                    MACHINE, MACHINE)
    assert verdict.status == "unchanged"
    assert verdict.normalised_ratio == pytest.approx(verdict.ratio / 1.4, rel=0.05)


def test_without_a_reference_in_the_baseline_the_raw_ratio_decides():
    reference = tuple(np.random.default_rng(3).lognormal(math.log(0.0007), 0.03, 30))
    verdict = judge(result(scale=1.4, reference_round_times_s=reference), baseline(), MACHINE, MACHINE)
    assert (verdict.status, verdict.normalised_ratio) == ("regressed", None)


# --- tolerance resolution -------------------------------------------------------------------------------

OVERRIDES = {"default": 0.12, "resnet18": 0.15, BENCHMARK_ID: 0.20}


def test_the_command_line_tolerance_wins_over_everything():
    assert tolerance_for(BENCHMARK_ID, "resnet18", OVERRIDES, default=0.10, cli_override=0.05) == 0.05


def test_a_benchmark_id_entry_wins_over_its_model():
    assert tolerance_for(BENCHMARK_ID, "resnet18", OVERRIDES, default=0.10) == 0.20


def test_a_model_entry_applies_to_its_other_benchmarks():
    assert tolerance_for("cpu-fp32-resnet18-bs8-infer", "resnet18", OVERRIDES, default=0.10) == 0.15


def test_the_table_default_wins_over_the_built_in_default():
    assert tolerance_for("cpu-fp32-bert-base-bs8-train", "bert-base", OVERRIDES, default=0.10) == 0.12


def test_the_built_in_default_applies_without_overrides():
    assert tolerance_for(BENCHMARK_ID, "resnet18", {}, default=0.10) == 0.10


def test_a_tolerance_table_with_a_percent_instead_of_a_fraction_is_rejected_naming_the_key():
    with pytest.raises(ValueError, match=r"\[tool\.perfsuite\.tolerance\] in pyproject\.toml: 'resnet18'"):
        parse_tolerance_table({"resnet18": 15}, "[tool.perfsuite.tolerance] in pyproject.toml")


def test_a_valid_tolerance_table_is_read_as_fractions():
    assert parse_tolerance_table({"default": 0.1, "resnet18": 0.15}, "table") == {"default": 0.1, "resnet18": 0.15}


def test_tolerance_keys_naming_nothing_known_are_reported():
    keys = unknown_tolerance_keys({"default": 0.1, "resnet18": 0.15, "resnet81": 0.2}, [BENCHMARK_ID], ["resnet18"])
    assert keys == ["resnet81"]
