"""Each option is declared once (perfsuite.settings.OPTIONS): its declaration alone gives the command line, the
pyproject key, the raw value, the parser with its error messages and the Settings field it fills."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite import settings
from perfsuite.errors import UsageError
from perfsuite.matrix.cases import MatrixOptions
from perfsuite.settings import OPTIONS, Derived, Option, RawSettings, Settings, load_settings, whole_number


def filled_fields(option: Option) -> tuple[str, ...]:
    return (option.fills,) if isinstance(option.fills, str) else option.fills


def test_every_settings_field_is_filled_by_exactly_one_option():
    filled = [name for option in OPTIONS for name in filled_fields(option)]
    expected = [f.name for f in dataclasses.fields(Settings) if f.name not in ("matrix", "given")]
    expected += [f"matrix.{f.name}" for f in dataclasses.fields(MatrixOptions)]
    assert sorted(filled) == sorted(expected)


def test_a_plain_default_is_the_default_of_the_field_it_fills():
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in dataclasses.fields(Settings)}
    defaults |= {f"matrix.{f.name}": f.default for f in dataclasses.fields(MatrixOptions)}
    for option in OPTIONS:
        if not isinstance(option.default, Derived):
            assert option.filled(option.default) == {name: defaults[name] for name in filled_fields(option)}, option.key


def test_raw_settings_refuse_a_name_that_is_no_option():
    with pytest.raises(TypeError, match="RawSettings: no option is named warmup_step;"):
        RawSettings(warmup_step="3")


def test_an_option_declared_once_is_read_from_the_command_line_and_pyproject_with_its_parser(tmp_path, monkeypatch):
    threads = next(option for option in OPTIONS if option.key == "threads")
    renamed = replace(threads, key="torch-threads", parse=whole_number(1, 8))
    monkeypatch.setattr(settings, "OPTIONS", tuple(renamed if o is threads else o for o in OPTIONS))
    monkeypatch.setattr(settings, "OPTION_NAMES", {o.field_name: o for o in settings.OPTIONS})
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
