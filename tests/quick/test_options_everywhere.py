"""Every perfsuite option is in `pytest --help`, in the README's option table and settable in [tool.perfsuite].

The tests of this subject that start processes or take long: tests/sessions/test_options_everywhere_sessions.py."""

import re
from pathlib import Path

import pytest

from perfsuite.settings import OPTIONS, RawSettings, merge_settings

README = Path(__file__).resolve().parents[2] / "README.md"
# A value each option accepts in pyproject.toml, so that a key perfsuite rejects there is caught.
TOML_VALUES = {
    "device": "cpu", "dtype": "fp32", "model": "all", "batch-size": "2", "mode": "infer", "profile": "smoke",
    "compile": "eager", "figure": "step", "warmup": 1, "processes": 3, "isolation": "pass", "threads": 1,
    "ddp-processes": 2, "update-baseline": True, "rebaseline": False, "on-change": "warn", "on-inconclusive": "warn",
    "on-no-base": "fail", "machine": "ci-m2",
    "baseline-dir": "baselines", "summary-dir": ".perfsuite", "tolerance": 0.1, "memory-tolerance": 0.2,
    "ab": "merge-base", "ab-python": "/usr/bin/python3", "ab-budget": 120, "ab-explain": "all",
    "history-explain": "none",
}


def test_the_readme_option_table_names_every_option():
    table = README.read_text(encoding="utf-8").split("| option | values | default |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(--perf-[a-z-]+)`", table))
    assert {option.flag for option in OPTIONS} - documented == set()


def test_the_values_used_here_cover_every_option():
    assert set(TOML_VALUES) == {option.key for option in OPTIONS}


@pytest.mark.parametrize("key", sorted(TOML_VALUES))
def test_every_option_is_settable_in_pyproject(key):
    raw, origins = merge_settings(RawSettings(), {key: TOML_VALUES[key]}, "pyproject.toml")
    field_name = key.replace("-", "_")
    assert getattr(raw, field_name) == TOML_VALUES[key]
    assert origins[field_name] == f"pyproject.toml [tool.perfsuite] {key}"
