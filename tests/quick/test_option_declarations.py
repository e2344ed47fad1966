"""Each option is declared once, as a field of perfsuite.options.settings.Settings: its declaration alone gives the
command line, the pyproject key, the raw value, the parser with its error messages and the Settings field it fills."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.errors import UsageError
from perfsuite.matrix.axes import DEFAULT_COMPILE_MODES, MODES
from perfsuite.matrix.cases import MatrixOptions
from perfsuite.options import settings
from perfsuite.options.settings import OPTIONS, Derived, RawSettings, Settings, load_settings, whole_number


def test_every_settings_field_but_given_is_declared_as_an_option():
    declared = [option.fills for option in OPTIONS]
    assert declared == [f.name for f in dataclasses.fields(Settings) if f.name != "given"]


def test_the_matrix_options_are_the_settings_fields_named_as_the_matrix_fields(tmp_path):
    given = RawSettings(device="cpu", dtype="bf16", batch_size="4")
    chosen = load_settings(given, tmp_path / "absent.toml", ["mlp"], ["cpu"])
    assert chosen.matrix == MatrixOptions(["cpu"], ["bf16"], None, [4], MODES, "smoke", DEFAULT_COMPILE_MODES)
    assert [option.fills for option in OPTIONS if option.fills_matrix] == [
        f.name for f in dataclasses.fields(MatrixOptions)
    ]


def test_a_plain_default_is_the_settings_field_default_and_a_derived_one_leaves_the_field_required():
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    for option in OPTIONS:
        expected = dataclasses.MISSING if isinstance(option.default, Derived) else option.default
        assert defaults[option.fills] == expected, option.key


def test_raw_settings_refuse_a_name_that_is_no_option():
    with pytest.raises(TypeError, match="RawSettings: no option is named warmup_step;"):
        RawSettings(warmup_step="3")


def test_an_option_declared_once_is_read_from_the_command_line_and_pyproject_with_its_parser(tmp_path, monkeypatch):
    threads = next(option for option in OPTIONS if option.key == "threads")
    renamed = replace(threads, key="torch-threads", parse=whole_number(1, 8))
    monkeypatch.setattr(settings, "OPTIONS", tuple(renamed if o is threads else o for o in OPTIONS))
    monkeypatch.setattr(settings, "OPTION_NAMES", {o.raw_name: o for o in settings.OPTIONS})
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.perfsuite]\ntorch-threads = 2\n")
    assert load_settings(RawSettings(), pyproject, ["resnet18"], ["cpu"]).threads == 2
    with pytest.raises(UsageError, match=r"^--perf-torch-threads: 9 is too large; it must be at most 8$"):
        load_settings(RawSettings(torch_threads="9"), pyproject, ["resnet18"], ["cpu"])
    with pytest.raises(UsageError, match=r"unknown key\(s\) threads"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "pyproject.toml").write_text("[tool.perfsuite]\nthreads = 2\n")
        load_settings(RawSettings(), tmp_path / "other" / "pyproject.toml", ["resnet18"], ["cpu"])


def test_derived_defaults_follow_the_options_given(tmp_path):
    absent = Path(tmp_path / "absent.toml")
    ab = load_settings(RawSettings(ab="main"), absent, ["resnet18"], ["cpu"])
    assert (ab.processes, ab.isolation, ab.matrix.profile) == (2, "pass", "smoke")
    gate = load_settings(RawSettings(device="cpu,mps"), absent, ["resnet18"], ["cpu"])
    assert (gate.processes, gate.isolation, gate.matrix.profile, gate.profile_chosen) == (1, "case", "standard", False)
