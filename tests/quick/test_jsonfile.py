"""The one JSON reader: a bad file is explained with its path, the problem and what to do, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hostile_files import fails_after, run_with_memory_cap

from perfsuite.errors import BadFileError
from perfsuite.store import jsonfile
from perfsuite.store.jsonfile import parse_json_text, read_json_file

REMEDY = "Record it again with `perfsuite selftest`."


def write(tmp_path: Path, content: str | bytes, name: str = "results.json") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def problem_of(path: Path) -> BadFileError:
    with pytest.raises(BadFileError) as error:
        read_json_file(path, REMEDY)
    return error.value


def test_a_valid_file_is_parsed(tmp_path):
    path = write(tmp_path, '{"rounds": [0.01, 0.02], "name": "r\u00e9sum\u00e9", "count": 3}')
    assert read_json_file(path, REMEDY) == {"rounds": [0.01, 0.02], "name": "r\u00e9sum\u00e9", "count": 3}


def test_the_error_message_names_the_file_the_problem_and_the_remedy(tmp_path):
    path = write(tmp_path, "")
    error = problem_of(path)
    assert str(error) == f"{path}: is empty (an interrupted copy or checkout). {REMEDY}"
    assert (error.path, error.remedy) == (path, REMEDY)


def test_a_missing_file_is_an_error(tmp_path):
    assert problem_of(tmp_path / "absent.json").problem == "no such file"


def test_a_missing_file_is_none_when_missing_is_ok(tmp_path):
    assert read_json_file(tmp_path / "absent.json", REMEDY, missing_ok=True) is None


def test_a_missing_folder_is_none_when_missing_is_ok(tmp_path):
    assert read_json_file(tmp_path / "no-folder" / "absent.json", REMEDY, missing_ok=True) is None


def test_a_folder_is_not_a_json_file(tmp_path):
    assert problem_of(tmp_path).problem == "is a folder, not a regular file"


def test_a_folder_is_an_error_even_when_missing_is_ok(tmp_path):
    with pytest.raises(BadFileError, match="is a folder"):
        read_json_file(tmp_path, REMEDY, missing_ok=True)


@pytest.mark.parametrize("content", ["", "  \n\t\n"], ids=["empty", "whitespace"])
def test_an_empty_file_is_an_error(tmp_path, content):
    assert problem_of(write(tmp_path, content)).problem.startswith("is empty")


def test_truncated_json_names_the_line_and_column(tmp_path):
    error = problem_of(write(tmp_path, '{\n "a": [1,\n  2'))
    assert error.problem == "is not valid JSON (line 3, column 4: Expecting ',' delimiter), truncated or edited"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(tmp_path, constant):
    error = problem_of(write(tmp_path, f'{{"median_s": {constant}}}'))
    assert error.problem.startswith(f"holds {constant}, which is not a number JSON allows")


def test_an_integer_beyond_64_bits_is_refused(tmp_path):
    error = problem_of(write(tmp_path, '{"memory_bytes": 18446744073709551616}'))
    assert error.problem == "holds the integer 18446744073709551616, beyond 64 bits"


def test_a_very_long_integer_is_shown_shortened(tmp_path):
    error = problem_of(write(tmp_path, '{"memory_bytes": ' + "9" * 40 + "}"))
    assert error.problem == f"holds the integer {'9' * 30}..., beyond 64 bits"


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63)], ids=["largest", "smallest"])
def test_the_extreme_64_bit_integers_are_read(tmp_path, value):
    assert read_json_file(write(tmp_path, f'{{"n": {value}}}'), REMEDY) == {"n": value}


def test_json_nested_100000_deep_is_a_bad_file_not_a_recursion_error(tmp_path):
    error = problem_of(write(tmp_path, "[" * 100_000 + "]" * 100_000))
    assert error.problem == "nests JSON deeper than Python's parser can follow"


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonfile, "MAX_JSON_BYTES", 16)
    error = problem_of(write(tmp_path, '{"rounds": [0.01, 0.02, 0.03]}'))
    assert "more than the" in error.problem
    assert "a perfsuite file can be" in error.problem


def test_a_file_at_the_size_limit_is_read(tmp_path, monkeypatch):
    content = '{"a": 1}'
    monkeypatch.setattr(jsonfile, "MAX_JSON_BYTES", len(content))
    assert read_json_file(write(tmp_path, content), REMEDY) == {"a": 1}


def test_a_file_that_is_not_utf8_names_the_bad_byte(tmp_path):
    error = problem_of(write(tmp_path, b'{"name": "\xff"}'))
    assert error.problem == "is not UTF-8 text (byte 10)"


def test_parse_json_text_names_the_given_path():
    with pytest.raises(BadFileError) as error:
        parse_json_text('{"a": NaN}', "baselines/cpu/amd-epyc.json", REMEDY)
    assert str(error.value).startswith("baselines/cpu/amd-epyc.json: holds NaN")


def test_parse_json_text_parses_valid_text():
    assert parse_json_text("[1, 2.5, null]", "x.json", REMEDY) == [1, 2.5, None]


# --- files that are not files, and files larger than they say -----------------------------------------------


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(tmp_path):
    link = tmp_path / "nvidia-h200.json"
    link.symlink_to("/dev/zero")
    done = run_with_memory_cap(
        f"from perfsuite.store.jsonfile import read_json_file\nread_json_file({str(link)!r}, 'Fix it.')"
    )
    assert f"BadFileError: {link}: is a character device (/dev/zero), not a regular file. Fix it." in done.stderr


def test_a_fifo_is_refused_at_once_instead_of_hanging(tmp_path):
    fifo = tmp_path / "nvidia-h200.json"
    os.mkfifo(fifo)
    with fails_after(5):
        assert problem_of(fifo).problem == "is a FIFO (named pipe), not a regular file"


def test_a_file_larger_than_it_says_is_cut_off_at_the_cap(monkeypatch):
    # /proc/self/status says it holds 0 bytes and holds more than 64: what is read is counted, not what stat says.
    status = Path("/proc/self/status")
    if not status.is_file() or status.stat().st_size != 0:
        pytest.skip("needs Linux's /proc, whose files report size 0")
    monkeypatch.setattr(jsonfile, "MAX_JSON_BYTES", 64)
    assert problem_of(status).problem.startswith("holds more than the 64 bytes a perfsuite file can be")


# --- duplicate keys -------------------------------------------------------------------------------------------


def test_a_duplicate_key_at_the_top_is_refused_naming_the_key(tmp_path):
    error = problem_of(write(tmp_path, '{"device": "cpu", "device": "cuda"}'))
    assert error.problem == (
        "holds the key 'device' twice in the top-level object; JSON keeps only the last value, so the other "
        "would be silently lost"
    )


def test_a_duplicate_key_deep_inside_is_refused_naming_where(tmp_path):
    text = '{"entries": {"cpu-a": {"runs": [{"median_s": 1}, {"median_s": 1, "median_s": 2}]}}}'
    error = problem_of(write(tmp_path, text))
    assert error.problem.startswith("holds the key 'median_s' twice in entries['cpu-a'].runs[1];")


def test_the_same_key_in_different_objects_is_not_a_duplicate(tmp_path):
    document = {"runs": [{"median_s": 1}, {"median_s": 2}], "median_s": 3}
    assert read_json_file(write(tmp_path, json.dumps(document)), REMEDY) == document
