"""Bands: how a tolerance is written, and which one applies to a benchmark."""

from __future__ import annotations

import math

import pytest

from perfsuite.errors import UsageError
from perfsuite.options.settings import parse_tolerance, parse_tolerance_table, tolerance_for
from perfsuite.records import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE

MODELS = ["resnet18", "bert-base"]

BENCHMARK_ID = "cpu-fp32-resnet18-bs4-train"


# --- parse_tolerance ------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [0.15, "0.15", "15%", " 15% "], ids=["number", "text", "percent", "padded"])
def test_a_band_may_be_written_as_a_fraction_or_a_percentage(raw):
    assert parse_tolerance(raw, "--perf-tolerance") == pytest.approx(0.15)


def test_a_zero_band_is_allowed():
    assert parse_tolerance(0, "--perf-tolerance") == 0.0


def test_a_band_is_returned_as_a_float():
    assert type(parse_tolerance(0, "--perf-tolerance")) is float


@pytest.mark.parametrize(
    "raw", [1.5, 1, "1.5", "150%", -0.1, "abc", "", "nan", math.inf, True, None, [0.1]],
    ids=["1.5", "one", "text-1.5", "150%", "negative", "abc", "empty", "nan", "inf", "bool", "none", "list"],
)
def test_anything_but_a_fraction_in_zero_to_one_is_refused(raw):
    with pytest.raises(UsageError):
        parse_tolerance(raw, "--perf-tolerance")


def test_a_refused_band_names_where_it_came_from_the_value_and_an_example():
    with pytest.raises(UsageError) as error:
        parse_tolerance(15, "pyproject.toml [tool.perfsuite.tolerance] 'resnet18'")
    assert str(error.value) == (
        "pyproject.toml [tool.perfsuite.tolerance] 'resnet18': 15 is not a band; write a fraction in [0, 1) such as "
        "0.10 (or 10%)"
    )


def test_a_tolerance_table_reads_every_value():
    assert parse_tolerance_table({"default": 0.1, "resnet18": "15%"}, "t", MODELS) == {"default": 0.1, "resnet18": 0.15}


def test_a_tolerance_table_names_the_key_of_a_bad_value():
    with pytest.raises(UsageError, match="^t 'resnet18': 15 is not a band"):
        parse_tolerance_table({"default": 0.1, "resnet18": 15}, "t", MODELS)


def test_a_tolerance_that_is_not_a_table_is_refused():
    with pytest.raises(UsageError, match="must be a table of name = fraction"):
        parse_tolerance_table(0.1, "t", MODELS)  # type: ignore[arg-type]


# --- tolerance_for: which band applies --------------------------------------------------------------------

OVERRIDES = {BENCHMARK_ID: 0.20, "resnet18": 0.15, "default": 0.12}


def test_the_command_line_band_wins_over_every_table_entry():
    assert tolerance_for(BENCHMARK_ID, "resnet18", OVERRIDES, cli_override=0.05) == 0.05


def test_a_zero_command_line_band_still_wins():
    assert tolerance_for(BENCHMARK_ID, "resnet18", OVERRIDES, cli_override=0.0) == 0.0


def test_the_benchmark_ids_entry_wins_over_the_models():
    assert tolerance_for(BENCHMARK_ID, "resnet18", OVERRIDES) == 0.20


def test_the_models_entry_wins_over_the_tables_default():
    assert tolerance_for("cpu-fp32-resnet18-bs8-infer", "resnet18", OVERRIDES) == 0.15


def test_the_tables_default_wins_over_the_built_in_default():
    assert tolerance_for("cpu-fp32-bert-base-bs8-train", "bert-base", OVERRIDES) == 0.12


def test_with_no_entry_the_built_in_default_applies():
    assert tolerance_for(BENCHMARK_ID, "resnet18", {}) == DEFAULT_TOLERANCE == 0.10


def test_a_memory_band_defaults_to_the_built_in_memory_default():
    assert tolerance_for(BENCHMARK_ID, "resnet18", {}, memory=True) == DEFAULT_MEMORY_TOLERANCE


def test_a_benchmark_id_entry_matches_exactly_not_by_prefix():
    overrides = {"cpu-fp32-resnet18-bs4-train": 0.2}
    assert tolerance_for("cpu-fp32-resnet18-bs4-train-smoke", "resnet18", overrides) == DEFAULT_TOLERANCE


def test_a_chosen_band_out_of_range_is_refused_naming_the_benchmark():
    with pytest.raises(ValueError, match=f"^{BENCHMARK_ID}: tolerance must be a fraction"):
        tolerance_for(BENCHMARK_ID, "resnet18", {"resnet18": 15})


@pytest.mark.parametrize(
    "key", ["resnet-18", "cpu-fp32-resnet18-bs4", "cpu-fp32-resnet18-bs0-train", "gpu-fp32-resnet18-bs4-train"],
)
def test_a_table_key_naming_no_model_and_no_possible_benchmark_is_a_usage_error_naming_it(key):
    with pytest.raises(UsageError, match=f"t: '{key}' names no model and no benchmark id"):
        parse_tolerance_table({"default": 0.1, key: 0.2}, "t", MODELS)


@pytest.mark.parametrize("key", [
    BENCHMARK_ID, "mps-bf16-bert-base-bs32-infer", "cuda-bf16-resnet18-bs256-train-reduce-overhead",
    "cpu-fp32-bert-base-bs2-train-channels-last-smoke", "resnet18", "default",
])
def test_a_table_key_may_name_a_case_of_any_device_not_only_this_sessions(key):
    # One pyproject.toml serves a Mac and a CUDA box: a key for the other machine's cases is not a typo.
    assert parse_tolerance_table({key: 0.2}, "t", MODELS) == {key: 0.2}
