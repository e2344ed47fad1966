"""Settings: command-line options over [tool.perfsuite] in pyproject.toml over defaults, validated once."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.errors import UsageError
from perfsuite.matrix.axes import DEFAULT_DTYPES, MODES
from perfsuite.settings import RawSettings, Settings, load_settings

WORKLOADS = ["resnet18", "bert-base"]


def pyproject(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[project]\nname = "demo"\n\n{table}\n', encoding="utf-8")
    return path


def load(tmp_path: Path, table: str = "", cli: RawSettings | None = None, devices=("cpu",)) -> Settings:
    return load_settings(cli or RawSettings(), pyproject(tmp_path, table), WORKLOADS, list(devices))


def usage_error(tmp_path: Path, table: str) -> str:
    with pytest.raises(UsageError) as error:
        load(tmp_path, table)
    return str(error.value)


# --- precedence ---------------------------------------------------------------------------------------------


def test_without_pyproject_the_defaults_apply(tmp_path):
    settings = load_settings(RawSettings(), tmp_path / "absent.toml", WORKLOADS, ["cpu", "mps"])
    assert settings == Settings(matrix=settings.matrix)
    assert (settings.warmup_steps, settings.processes, settings.baseline_dir) == (3, 1, "baselines")


def test_the_default_matrix_is_every_available_device_and_the_default_axes(tmp_path):
    matrix = load_settings(RawSettings(), tmp_path / "absent.toml", WORKLOADS, ["cpu", "mps"]).matrix
    assert (list(matrix.devices), tuple(matrix.dtypes), tuple(matrix.modes)) == (["cpu", "mps"], DEFAULT_DTYPES, MODES)
    assert (matrix.models, matrix.batch_sizes, matrix.profile) == (None, None, "standard")


def test_pyproject_without_a_perfsuite_table_gives_the_defaults(tmp_path):
    assert load(tmp_path).warmup_steps == 3


def test_pyproject_values_win_over_the_defaults(tmp_path):
    settings = load(tmp_path, '[tool.perfsuite]\nwarmup = 5\nbaseline-dir = "perf/baselines"')
    assert (settings.warmup_steps, settings.baseline_dir) == (5, "perf/baselines")


def test_the_command_line_wins_over_pyproject(tmp_path):
    settings = load(tmp_path, "[tool.perfsuite]\nwarmup = 5\nprocesses = 2", cli=RawSettings(warmup="7"))
    assert (settings.warmup_steps, settings.processes) == (7, 2)


# --- TOML values -----------------------------------------------------------------------------------------------


def test_a_toml_integer_batch_size_is_accepted(tmp_path):
    assert list(load(tmp_path, "[tool.perfsuite]\nbatch-size = 8").matrix.batch_sizes) == [8]


def test_a_toml_list_of_batch_sizes_is_accepted(tmp_path):
    assert list(load(tmp_path, "[tool.perfsuite]\nbatch-size = [8, 32]").matrix.batch_sizes) == [8, 32]


def test_a_toml_list_of_devices_is_accepted(tmp_path):
    assert list(load(tmp_path, '[tool.perfsuite]\ndevice = ["cpu"]', devices=("cpu", "mps")).matrix.devices) == ["cpu"]


def test_a_toml_integer_process_count_is_accepted(tmp_path):
    assert load(tmp_path, "[tool.perfsuite]\nprocesses = 3").processes == 3


def test_text_as_on_the_command_line_is_accepted_in_pyproject(tmp_path):
    settings = load(tmp_path, '[tool.perfsuite]\nmodel = "resnet18,bert-base"\nthreads = "1"')
    assert (list(settings.matrix.models), settings.threads) == (["resnet18", "bert-base"], 1)


def test_model_all_selects_every_model(tmp_path):
    assert list(load(tmp_path, '[tool.perfsuite]\nmodel = "all"').matrix.models) == [*WORKLOADS, "dataloader"]


# --- errors name pyproject.toml and the key ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, key",
    [
        ("batch-size = 0", "batch-size"),
        ("warmup = 2.7", "warmup"),
        ("device = 3", "device"),
        ("device = true", "device"),
        ('device = "tpu"', "device"),
        ("processes = 0", "processes"),
        ("threads = true", "threads"),
        ('profile = "smoke,full"', "profile"),
        ('machine = "../elsewhere"', "machine"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_pyproject_and_the_key(tmp_path, line, key):
    message = usage_error(tmp_path, f"[tool.perfsuite]\n{line}")
    assert message.startswith(f"{tmp_path / 'pyproject.toml'} [tool.perfsuite] {key}: ")


def test_an_unknown_key_is_an_error_listing_the_valid_ones(tmp_path):
    message = usage_error(tmp_path, "[tool.perfsuite]\nwarmups = 3")
    assert message.startswith(f"{tmp_path / 'pyproject.toml'} [tool.perfsuite]: unknown key(s) warmups; valid: ")
    assert "warmup" in message.split("valid: ")[1].split(", ")


def test_an_unknown_sub_table_is_an_error(tmp_path):
    message = usage_error(tmp_path, "[tool.perfsuite.tolerances]\nresnet18 = 0.15")
    assert f"{tmp_path / 'pyproject.toml'} [tool.perfsuite]: unknown key(s) tolerances;" in message


def test_invalid_toml_is_a_usage_error_naming_the_file(tmp_path):
    message = usage_error(tmp_path, "[tool.perfsuite\nwarmup = ")
    assert message.startswith(f"{tmp_path / 'pyproject.toml'}: not valid TOML")


def test_a_bad_command_line_value_names_the_flag(tmp_path):
    with pytest.raises(UsageError, match=r"^--perf-warmup: 'many' is not a whole number"):
        load(tmp_path, cli=RawSettings(warmup="many"))


def test_the_flag_prefix_names_the_flag_as_the_command_spells_it(tmp_path):
    with pytest.raises(UsageError, match=r"^--warmup: "):
        load_settings(RawSettings(warmup="many"), tmp_path / "absent.toml", WORKLOADS, ["cpu"], flag_prefix="--")


# --- tolerances ---------------------------------------------------------------------------------------------------


def test_a_command_line_tolerance_in_percent_is_a_fraction(tmp_path):
    assert load(tmp_path, cli=RawSettings(tolerance="10%")).cli_tolerance == pytest.approx(0.10)


def test_a_command_line_memory_tolerance_is_read(tmp_path):
    assert load(tmp_path, cli=RawSettings(memory_tolerance="0.25")).cli_memory_tolerance == 0.25


def test_with_no_tolerance_given_there_is_no_band_and_no_table(tmp_path):
    settings = load(tmp_path)
    assert (settings.cli_tolerance, settings.cli_memory_tolerance, settings.tolerances) == (None, None, {})


def test_the_tolerance_table_is_read_by_key(tmp_path):
    table = '[tool.perfsuite.tolerance]\ndefault = 0.10\nresnet18 = "15%"\n"cpu-fp32-bert-base-bs8-train" = 0.2'
    settings = load(tmp_path, table)
    assert settings.tolerances == {"default": 0.10, "resnet18": 0.15, "cpu-fp32-bert-base-bs8-train": 0.2}
    assert settings.cli_tolerance is None


def test_the_memory_tolerance_table_is_read_by_key(tmp_path):
    settings = load(tmp_path, "[tool.perfsuite.memory_tolerance]\ndefault = 0.1\nbert-base = 0.2")
    assert settings.memory_tolerances == {"default": 0.1, "bert-base": 0.2}


def test_a_band_of_15_in_the_table_is_refused_naming_the_key(tmp_path):
    message = usage_error(tmp_path, "[tool.perfsuite.tolerance]\nresnet18 = 15")
    assert message.startswith(f"{tmp_path / 'pyproject.toml'} [tool.perfsuite] tolerance 'resnet18': 15 is not a band")


def test_a_command_line_tolerance_replaces_the_pyproject_table(tmp_path):
    settings = load(tmp_path, "[tool.perfsuite.tolerance]\nresnet18 = 0.15", cli=RawSettings(tolerance="0.3"))
    assert (settings.cli_tolerance, settings.tolerances) == (0.3, {})
