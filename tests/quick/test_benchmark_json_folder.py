"""The folder of --benchmark-json is made before anything is measured, whichever pytest-benchmark parsed the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.errors import UsageError
from perfsuite.options.paths import make_benchmark_json_folder


def test_the_folder_of_a_json_path_is_made(tmp_path: Path) -> None:
    make_benchmark_json_folder(tmp_path / "out" / "run.json")
    assert (tmp_path / "out").is_dir()


def test_a_file_opened_by_pytest_benchmark_before_5_3_is_left_as_it_is(tmp_path: Path) -> None:
    # pytest-benchmark up to 5.2 parses --benchmark-json as an open binary file (argparse.FileType("wb")).
    with open(tmp_path / "run.json", "wb") as opened:
        make_benchmark_json_folder(opened)
        assert not opened.closed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_folder_that_cannot_be_made_is_a_usage_error_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="--benchmark-json .*file/out/run.json: its folder cannot be made"):
        make_benchmark_json_folder(tmp_path / "file" / "out" / "run.json")
