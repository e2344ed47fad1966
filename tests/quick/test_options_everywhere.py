"""Every perfsuite option is in `pytest --help`, in the README's option table and settable in [tool.perfsuite].

The tests of this subject that start processes or take long: tests/sessions/test_options_everywhere_sessions.py."""

import re
from pathlib import Path

import pytest

from perfsuite.options.readme import options_table, readme_table
from perfsuite.options.settings import OPTIONS, Known, RawSettings, merge_settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_option_table_is_the_one_made_from_the_declarations():
    table = readme_table(README.read_text(encoding="utf-8"))
    assert table == options_table(), "run python -m perfsuite.options.readme README.md and commit README.md"


def test_the_readme_option_table_names_every_option_once_with_its_help():
    table = options_table()
    assert re.findall(r"^\| `(--perf-[a-z-]+)` \|", table, flags=re.MULTILINE) == [option.flag for option in OPTIONS]
    assert "| `--perf-profile` | smoke \\| standard \\| full (default: standard" in table
    assert "e.g. 0.15 or 15% (default 0.10" in table


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.key)
def test_every_option_is_settable_in_pyproject_with_its_declared_example(option, tmp_path):
    raw, origins = merge_settings(RawSettings(), {option.key: option.example}, "pyproject.toml")
    assert getattr(raw, option.raw_name) == option.example
    assert origins[option.raw_name] == f"pyproject.toml [tool.perfsuite] {option.key}"
    assert option.parse(option.example, origins[option.raw_name], Known(["resnet18"], ["cpu"], tmp_path)) is not None
