"""The one JSON reader: every file perfsuite reads (baselines, result files, selftest files, doctor facts)
goes through `read_json_file`, which explains a bad file instead of raising a traceback.

It refuses, with the path and what to do: a missing, unreadable, over-large, non-UTF-8, empty or truncated
file; JSON nested deeper than a result file ever is; NaN and Infinity (not JSON, and poison for every
statistic); integers too large for a 64-bit column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError

# Larger than any result file of the full matrix (an H200 run of every case is under 2 MB).
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_JSON_INTEGER = 2**63 - 1
MIN_JSON_INTEGER = -(2**63)


def read_json_file(path: Path | str, remedy: str, *, missing_ok: bool = False) -> Any:
    """The parsed JSON document at `path`; None when it does not exist and `missing_ok`.

    `remedy` is what the user should do about a bad file (e.g. which command writes a good one); every
    problem raises BadFileError naming `path`, the problem and `remedy`.
    """
    path = Path(path)
    try:
        if path.is_dir():
            raise BadFileError(path, "is a folder, not a JSON file", remedy)
        size_bytes = path.stat().st_size
        if size_bytes > MAX_JSON_BYTES:
            raise BadFileError(
                path, f"is {size_bytes / 2**20:.0f} MiB, more than the {MAX_JSON_BYTES // 2**20} MiB a perfsuite file "
                "can be", remedy,
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise BadFileError(path, "no such file", remedy) from None
    except OSError as error:
        raise BadFileError(path, f"cannot be read ({error.strerror})", "Check the path and its permissions.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadFileError(path, f"is not UTF-8 text (byte {error.start})", remedy) from None
    return parse_json_text(text, path, remedy)


def parse_json_text(text: str, path: Path | str, remedy: str) -> Any:
    """Parse `text` read from `path` (named in errors) with the checks of `read_json_file`."""
    if not text.strip():
        raise BadFileError(path, "is empty (an interrupted copy or checkout)", remedy)
    try:
        document = json.loads(text, parse_constant=_refuse_constant, parse_int=_checked_int)
    except json.JSONDecodeError as error:
        raise BadFileError(
            path, f"is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}), truncated or edited",
            remedy,
        ) from None
    except ValueError as error:
        raise BadFileError(path, str(error), remedy) from None
    except RecursionError:
        raise BadFileError(path, "nests JSON deeper than Python's parser can follow", remedy) from None
    return document


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which is not a number JSON allows (a failed measurement written as a figure?)")


def _checked_int(text: str) -> int:
    value = int(text)
    if not MIN_JSON_INTEGER <= value <= MAX_JSON_INTEGER:
        raise ValueError(f"holds the integer {text[:30]}{'...' if len(text) > 30 else ''}, beyond 64 bits")
    return value
