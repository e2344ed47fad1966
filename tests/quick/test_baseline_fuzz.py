"""The baseline reader, fuzzed with structured mutations of the committed baseline files.

Each example takes a real file (baselines/cuda/nvidia-h200.json or one of baselines/cpu/), breaks it in one to
three ways (a field deleted, retyped, renamed or given a wrong number; a number turned into NaN or Infinity in the
text; a key given twice; the text truncated; a value nested deep; a wrong schema; bytes that are not UTF-8) and
reads it. The reader must return a valid BaselineFile or raise BadFileError naming the file; any other exception
is a defect. Quick by design (it runs in the quick subset and in CI): see EXAMPLES.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.errors import BadFileError
from perfsuite.store.baselines import BaselineFile, load_baseline

REPOSITORY = Path(__file__).resolve().parents[2]
REAL_FILES = (
    REPOSITORY / "baselines" / "cuda" / "nvidia-h200.json", *sorted((REPOSITORY / "baselines" / "cpu").glob("*.json"))
)
EXAMPLES = 150
DEADLINE_MS = 2000

# Values of every JSON type, and numbers each field should refuse or take at its edge.
OTHER_VALUES = (
    "text", "", 0, 1, -1, 2.5, -0.0, 5e-324, 1e-10, 1e308, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, True, False, None,
    [], {}, [1, 2], {"a": 1}, [None], "2.13.0",
)
SCHEMA_VERSIONS = (1, 2, 3, 4, 0, -1, "2", 2.0, 1.5, True, None, [2], {"v": 2})
NOT_NUMBERS = ("NaN", "Infinity", "-Infinity")
Where = tuple[str | int, ...]


@cache
def document_of(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def value_paths(path: Path) -> tuple[Where, ...]:
    """Every place in the document of `path` that holds a value, the root excluded."""
    found: list[Where] = []
    stack: list[tuple[Any, Where]] = [(document_of(path), ())]
    while stack:
        value, where = stack.pop()
        if where:
            found.append(where)
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack += [(child, (*where, key)) for key, child in children]
    return tuple(sorted(found, key=str))


def changed(document: Any, where: Where, change: Callable[[Any, str | int], None]) -> Any:
    """A copy of `document` in which `change(container, key)` was applied at `where` (the document itself when an
    earlier change removed that place); only the containers on the way are copied, so the large documents are not
    copied whole for every example."""
    try:
        copy = document.copy()
        container = copy
        for key in where[:-1]:
            container[key] = container[key].copy()
            container = container[key]
        container[where[-1]]  # noqa: B018 (the place must still exist)
    except (KeyError, IndexError, TypeError, AttributeError):
        return document
    change(container, where[-1])
    return copy


def delete(container: Any, key: str | int) -> None:
    del container[key]


def setter(value: Any) -> Callable[[Any, str | int], None]:
    def put(container: Any, key: str | int) -> None:
        container[key] = value

    return put


def rename(container: Any, key: str | int) -> None:
    if isinstance(container, dict):
        container[f"{key}s"] = container.pop(key)


@st.composite
def structural(draw: st.DrawFn, document: Any, paths: tuple[Where, ...]) -> Any:
    """One change to the parsed document: delete, retype, rename, or a wrong schema."""
    kind = draw(st.sampled_from(("delete", "retype", "rename", "schema")))
    if kind == "schema":
        field = draw(st.sampled_from(("schema_version", "schema", "device", "entries")))
        value = draw(st.sampled_from(SCHEMA_VERSIONS if field == "schema_version" else OTHER_VALUES))
        return changed(document, (field,), setter(value))
    where = paths[draw(st.integers(0, len(paths) - 1))]
    if kind == "delete":
        return changed(document, where, delete)
    if kind == "rename":
        return changed(document, where, rename)
    return changed(document, where, setter(draw(st.sampled_from(OTHER_VALUES))))


@st.composite
def textual(draw: st.DrawFn, text: str) -> str:
    """One change to the file's text: a number made NaN/Infinity, a key given twice, a value nested deep, a cut."""
    kind = draw(st.sampled_from(("not-a-number", "duplicate-key", "deep", "truncate")))
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text) - 1))]
    pattern = {"not-a-number": r"(?<=[:\[ ])-?\d[\d.eE+-]*", "duplicate-key": r'"[^"]+": ', "deep": r'(?<=: )"[^"]*"'}
    matches = list(re.finditer(pattern[kind], text))
    if not matches:
        return text
    match = matches[draw(st.integers(0, len(matches) - 1))]
    if kind == "not-a-number":
        replacement = draw(st.sampled_from(NOT_NUMBERS))
    elif kind == "duplicate-key":
        first_value = draw(st.sampled_from(("0", "null", '"x"')))
        replacement = f"{match.group()}{first_value}, {match.group()}"
    else:
        depth = draw(st.sampled_from((2, 50, 900, 5_000, 200_000)))
        replacement = "[" * depth + "]" * depth
    return text[: match.start()] + replacement + text[match.end():]


@st.composite
def broken_files(draw: st.DrawFn) -> tuple[Path, bytes]:
    """A real baseline file after one to three mutations: its path (for the folder) and its bytes."""
    source = draw(st.sampled_from(REAL_FILES))
    document = document_of(source)
    for _ in range(draw(st.integers(0, 2))):
        document = draw(structural(document, value_paths(source)))
    text = json.dumps(document, indent=1)
    if draw(st.booleans()):
        text = draw(textual(text))
    data = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe" + data[at:]
    return source, data


@settings(max_examples=EXAMPLES, deadline=DEADLINE_MS, suppress_health_check=[HealthCheck.too_slow])
@given(broken=broken_files())
def test_a_broken_baseline_is_read_or_refused_naming_the_file(broken):
    source, data = broken
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / source.parent.name / source.name
        path.parent.mkdir()
        path.write_bytes(data)
        try:
            loaded = load_baseline(path)
        except BadFileError as error:
            assert str(error).startswith(f"{path}: ")
            return
    assert isinstance(loaded, BaselineFile)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_the_real_files_themselves_load(path):
    assert load_baseline(path).entries
