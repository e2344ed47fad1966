"""The one JSON reader: every file perfsuite reads (baselines, result files, selftest files, doctor facts, the
coverage allowlist) goes through `read_json_file`, which explains a bad file instead of raising a traceback.

It refuses, with the path and what to do: a missing or unreadable file; anything but a regular file (a folder, a
FIFO, a device such as /dev/zero, also behind a symlink); a file over the size cap (by its size or by the bytes
read); non-UTF-8, empty or truncated text; JSON nested deeper than Python's parser follows; NaN and Infinity (not
JSON, and poison for every statistic); integers too large for a 64-bit column; a key given twice in one object
(JSON parsers keep one of the two values, silently).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError
from perfsuite.store.files import read_text_capped

# Larger than any result file of the full matrix (an H200 run of every case is under 2 MB).
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_JSON_INTEGER = 2**63 - 1
MIN_JSON_INTEGER = -(2**63)


def read_json_file(path: Path | str, remedy: str, *, missing_ok: bool = False) -> Any:
    """The parsed JSON document at `path`; None when it does not exist and `missing_ok`.

    `remedy` is what the user should do about a bad file (e.g. which command writes a good one); every
    problem raises BadFileError naming `path`, the problem and `remedy`.
    """
    text = read_text_capped(path, MAX_JSON_BYTES, remedy, missing_ok=missing_ok)
    return None if text is None else parse_json_text(text, path, remedy)


def parse_json_text(text: str, path: Path | str, remedy: str) -> Any:
    """Parse `text` read from `path` (named in errors) with the checks of `read_json_file`."""
    if not text.strip():
        raise BadFileError(path, "is empty (an interrupted copy or checkout)", remedy)
    repeated: list[_Repeated] = []
    try:
        document = json.loads(
            text, parse_constant=_refuse_constant, parse_int=_checked_int,
            object_pairs_hook=lambda pairs: _object(pairs, repeated),
        )
    except json.JSONDecodeError as error:
        raise BadFileError(
            path, f"is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}), truncated or edited",
            remedy,
        ) from None
    except ValueError as error:
        raise BadFileError(path, str(error), remedy) from None
    except RecursionError:
        raise BadFileError(path, "nests JSON deeper than Python's parser can follow", remedy) from None
    if repeated:
        raise BadFileError(
            path, f"holds the key {repeated[0].key!r} twice in {_where(document, repeated[0])}; JSON keeps only the "
            "last value, so the other would be silently lost", remedy,
        )
    return document


class _Repeated(dict[str, Any]):
    """An object that held `key` more than once (the last value kept, as json does)."""

    key: str


def _object(pairs: list[tuple[str, Any]], repeated: list[_Repeated]) -> dict[str, Any]:
    """A JSON object from its (key, value) pairs; one with a key given twice is marked and noted in `repeated`."""
    built = dict(pairs)
    if len(built) == len(pairs):
        return built
    marked = _Repeated(built)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    repeated.append(marked)
    return marked


def _where(document: Any, wanted: dict[str, Any]) -> str:
    """Where `wanted` sits in `document`, as `entries['cpu-...'].runs[1]`, or "the top-level object"."""
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        value, where = stack.pop()
        if value is wanted:
            return where or "the top-level object"
        if isinstance(value, dict):
            stack += [(item, _member(where, key)) for key, item in value.items()]
        elif isinstance(value, list):
            stack += [(item, f"{where}[{index}]") for index, item in enumerate(value)]
    return "an object"


def _member(where: str, key: str) -> str:
    if not key.isidentifier():
        return f"{where}[{key!r}]"
    return f"{where}.{key}" if where else key


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which is not a number JSON allows (a failed measurement written as a figure?)")


def _checked_int(text: str) -> int:
    value = int(text)
    if not MIN_JSON_INTEGER <= value <= MAX_JSON_INTEGER:
        raise ValueError(f"holds the integer {text[:30]}{'...' if len(text) > 30 else ''}, beyond 64 bits")
    return value
