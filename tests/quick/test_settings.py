"""Settings: command-line options over [tool.perfsuite] in pyproject.toml over defaults, validated once."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.errors import UsageError
from perfsuite.matrix.axes import DEFAULT_DTYPES, MODES
from perfsuite.options.settings import Bands, RawSettings, Settings, load_settings

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
    assert settings == Settings(devices=["cpu", "mps"], profile="standard", processes=1, isolation="case",
                                summary_dir=".perfsuite")
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
    assert load(tmp_path, cli=RawSettings(tolerance="10%")).tolerance.every_case == pytest.approx(0.10)


def test_a_command_line_memory_tolerance_is_read(tmp_path):
    assert load(tmp_path, cli=RawSettings(memory_tolerance="0.25")).memory_tolerance.every_case == 0.25


def test_with_no_tolerance_given_there_is_no_band_and_no_table(tmp_path):
    settings = load(tmp_path)
    assert (settings.tolerance, settings.memory_tolerance) == (Bands(None, {}), Bands(None, {}))


def test_the_tolerance_table_is_read_by_key(tmp_path):
    table = '[tool.perfsuite.tolerance]\ndefault = 0.10\nresnet18 = "15%"\n"cpu-fp32-bert-base-bs8-train" = 0.2'
    settings = load(tmp_path, table)
    assert settings.tolerance.by_name == {"default": 0.10, "resnet18": 0.15, "cpu-fp32-bert-base-bs8-train": 0.2}
    assert settings.tolerance.every_case is None


def test_the_memory_tolerance_table_is_read_by_key(tmp_path):
    settings = load(tmp_path, "[tool.perfsuite.memory_tolerance]\ndefault = 0.1\nbert-base = 0.2")
    assert settings.memory_tolerance.by_name == {"default": 0.1, "bert-base": 0.2}


def test_a_band_of_15_in_the_table_is_refused_naming_the_key(tmp_path):
    message = usage_error(tmp_path, "[tool.perfsuite.tolerance]\nresnet18 = 15")
    assert message.startswith(f"{tmp_path / 'pyproject.toml'} [tool.perfsuite] tolerance 'resnet18': 15 is not a band")


def test_a_command_line_tolerance_replaces_the_pyproject_table(tmp_path):
    settings = load(tmp_path, "[tool.perfsuite.tolerance]\nresnet18 = 0.15", cli=RawSettings(tolerance="0.3"))
    assert settings.tolerance == Bands(0.3, {})


# --- checked before anything is measured ------------------------------------------------------------------------


def test_a_summary_dir_that_is_a_file_is_a_usage_error_naming_the_flag(tmp_path):
    (tmp_path / "report").write_text("not a folder")
    with pytest.raises(UsageError, match=r"^--perf-summary-dir: 'report' is a file, not a folder;"):
        load(tmp_path, cli=RawSettings(summary_dir="report"))


def test_a_summary_dir_under_a_file_is_a_usage_error_naming_the_pyproject_key(tmp_path):
    (tmp_path / "report").write_text("not a folder")
    message = usage_error(tmp_path, '[tool.perfsuite]\nsummary-dir = "report/summary"')
    assert message.startswith(
        f"{tmp_path / 'pyproject.toml'} [tool.perfsuite] summary-dir: 'report/summary' cannot be made: "
        f"{tmp_path / 'report'} is a file"
    )


def test_a_summary_dir_in_a_read_only_folder_is_a_usage_error(tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    (tmp_path / "locked").mkdir(mode=0o500)
    with pytest.raises(UsageError, match=r"^--perf-summary-dir: 'locked/summary' cannot be made: .* not writable"):
        load(tmp_path, cli=RawSettings(summary_dir="locked/summary"))


def test_the_default_summary_dir_of_a_read_only_project_is_not_an_error(tmp_path, monkeypatch):
    # A session that measures nothing writes no summary, so a read-only checkout must still run its tests.
    from perfsuite.options import settings

    monkeypatch.setattr(settings.os, "access", lambda path, mode: False)
    assert load(tmp_path).summary_dir == ".perfsuite"


def test_a_default_summary_dir_that_is_a_file_is_an_error(tmp_path):
    (tmp_path / ".perfsuite").write_text("x")
    with pytest.raises(UsageError, match=r"^--perf-summary-dir: '\.perfsuite' is a file, not a folder"):
        load(tmp_path)


def test_a_summary_dir_that_does_not_exist_yet_is_accepted_and_not_made(tmp_path):
    assert load(tmp_path, cli=RawSettings(summary_dir="new/summary")).summary_dir == "new/summary"
    assert not (tmp_path / "new").exists()


def test_an_absolute_summary_dir_is_checked_where_it_is(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    blocker = tmp_path / "elsewhere"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        load(project, cli=RawSettings(summary_dir=str(blocker)))


def test_a_machine_name_longer_than_a_file_name_can_be_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"^--perf-machine: a name of 300 bytes is too long for a file name; "
                                         r"use at most 2\d\d bytes"):
        load(tmp_path, cli=RawSettings(machine="m" * 300))


def test_the_longest_machine_name_allowed_still_makes_every_file_the_store_names(tmp_path):
    # The baseline, its lock and temporary files, and the name a bad file is moved aside to.
    from perfsuite.store.baselines import MAX_MACHINE_NAME_BYTES, load_baseline, move_aside, record_runs

    name = "m" * MAX_MACHINE_NAME_BYTES
    assert load(tmp_path, cli=RawSettings(machine=name)).machine == name
    path = tmp_path / "cpu" / f"{name}.json"
    record_runs(path, "cpu", {})
    aside = move_aside(path, "20261203T101010Z")
    assert load_baseline(aside) is not None and not path.exists()


def test_a_machine_name_one_byte_over_is_refused(tmp_path):
    from perfsuite.store.baselines import MAX_MACHINE_NAME_BYTES

    with pytest.raises(UsageError, match="too long for a file name"):
        load(tmp_path, cli=RawSettings(machine="m" * (MAX_MACHINE_NAME_BYTES + 1)))


@pytest.mark.parametrize(
    "option, value, limit",
    [("processes", "1001", 1000), ("warmup", "100001", 100000)],
)
def test_a_count_above_its_bound_is_a_usage_error_naming_the_bound(tmp_path, option, value, limit):
    with pytest.raises(UsageError, match=rf"^--perf-{option}: {value} is too large; it must be at most {limit}"):
        load(tmp_path, cli=RawSettings(**{option: value}))


@pytest.mark.parametrize("option, value", [("processes", "1000"), ("warmup", "100000")])
def test_a_count_at_its_bound_is_accepted(tmp_path, option, value):
    chosen = load(tmp_path, cli=RawSettings(**{option: value}))
    assert {"processes": chosen.processes, "warmup": chosen.warmup_steps}[option] == int(value)


# --- pyproject.toml is read like every user file -------------------------------------------------------------


def test_a_pyproject_that_is_a_fifo_is_a_usage_error_at_once(tmp_path):
    import os

    from hostile_files import fails_after

    os.mkfifo(tmp_path / "pyproject.toml")
    with fails_after(5), pytest.raises(UsageError, match=r"pyproject\.toml: is a FIFO \(named pipe\), not a regular"):
        load_settings(RawSettings(), tmp_path / "pyproject.toml", WORKLOADS, ["cpu"])


def test_a_pyproject_that_is_a_folder_is_a_usage_error_not_silently_no_settings(tmp_path):
    (tmp_path / "pyproject.toml").mkdir()
    with pytest.raises(UsageError, match=r"pyproject\.toml: is a folder, not a regular file"):
        load_settings(RawSettings(), tmp_path / "pyproject.toml", WORKLOADS, ["cpu"])


def test_a_pyproject_over_the_size_cap_is_a_usage_error(tmp_path, monkeypatch):
    from perfsuite.options import settings

    monkeypatch.setattr(settings, "MAX_PYPROJECT_BYTES", 64)
    path = pyproject(tmp_path, "# " + "x" * 100)
    with pytest.raises(UsageError, match="more than the 64 bytes"):
        load_settings(RawSettings(), path, WORKLOADS, ["cpu"])
