"""A/B summary files (schema `perfsuite-ab`, versions 1 to 3): a base and a head revision measured case by case;
version 2 adds each case's explanation by the ops (`explanation`, its `lines` shown here), version 3 the conditions
(the blocks during which they changed are named in each case's message, shown here).

Every field but "schema" is optional. Each case entry is validated on its own: a bad one becomes a FileProblem
naming the file, the entry and the field, and the other entries are kept. The reader never raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError
from perfsuite.judge.ab import AB_STATUSES
from perfsuite.render.ab import SCHEMA, SCHEMA_VERSION
from perfsuite.store.archive import FileProblem
from perfsuite.store.jsonfile import read_json_file

CASE_FIELDS = ("device", "dtype", "model", "batch_size", "mode", "profile", "compile")
# The versions this reader reads: 1 has no explanations, 2 no conditions.
READ_VERSIONS = (1, 2, SCHEMA_VERSION)
REMEDY = "Write the A/B summary again with the A/B command, or leave the file out of --ab."


@dataclass(frozen=True)
class AbSide:
    """One side of an A/B run: its `label` (e.g. main), `revision` (a commit, `+dirty` for a changed tree), the
    Python and torch versions; None where the file does not say."""

    label: str | None
    revision: str | None
    python: str | None
    torch_version: str | None


@dataclass(frozen=True)
class AbCase:
    """One case of an A/B run. Times in seconds; `ratio` is head over base with its bounds; `floor` the smallest
    slowdown the runs could detect and `tolerance` the band, both fractions; `largest_output_difference` how far the
    head's outputs strayed from the base's; `head_model_file` the file the head side's model came from. `case` holds
    the case's fields the file states (device, dtype, model, batch_size, mode, profile, compile)."""

    benchmark_id: str | None
    case: Mapping[str, str | int]
    status: str | None
    base_median_s: float | None
    head_median_s: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    floor: float | None
    tolerance: float | None
    largest_output_difference: float | None
    message: str | None
    explanation: tuple[str, ...] = ()
    head_model_file: str | None = None


@dataclass(frozen=True)
class AbSummary:
    """An A/B summary file: where it was read, when the run started, both sides and the good cases."""

    path: Path
    started_at: str | None
    base: AbSide
    head: AbSide
    cases: tuple[AbCase, ...]


@dataclass(frozen=True)
class AbReading:
    """What `read_ab_file` found: the summary (None when the file as a whole is unusable) and its problems."""

    summary: AbSummary | None
    problems: tuple[FileProblem, ...]


class _Problem(Exception):
    """One bad field; names the entry and the field."""


def _text(document: Mapping[str, Any], name: str, where: str) -> str | None:
    value = document.get(name)
    if value is not None and not isinstance(value, str):
        raise _Problem(f"{where}: {name!r} should be text, got {value!r:.60}")
    return value


def _number(document: Mapping[str, Any], name: str, where: str, least: float, strictly: bool,
            below: float = math.inf) -> float | None:
    value = document.get(name)
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or not (value > least if strictly else value >= least) or not value < below:
        bound = f"> {least:g}" if strictly else f">= {least:g}"
        upper = "" if below == math.inf else f" and < {below:g}"
        raise _Problem(f"{where}: {name!r} should be a finite number {bound}{upper}, got {value!r:.60}")
    return float(value)


def _side(document: Mapping[str, Any], name: str) -> AbSide:
    side = document.get(name)
    if side is None:
        return AbSide(None, None, None, None)
    if not isinstance(side, dict):
        raise _Problem(f"{name!r} should be an object, got {side!r:.60}")
    return AbSide(*(_text(side, key, name) for key in ("label", "revision", "python", "torch_version")))


def _case_fields(entry: Mapping[str, Any], where: str) -> dict[str, str | int]:
    fields = entry.get("case")
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise _Problem(f"{where}: 'case' should be an object, got {fields!r:.60}")
    found: dict[str, str | int] = {}
    for key in CASE_FIELDS:
        value = fields.get(key)
        if value is None:
            continue
        if key == "batch_size":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _Problem(f"{where}: case 'batch_size' should be a whole number >= 1, got {value!r:.60}")
        elif not isinstance(value, str):
            raise _Problem(f"{where}: case {key!r} should be text, got {value!r:.60}")
        found[key] = value
    return found


def _case(entry: Any, index: int) -> AbCase:
    label = entry.get("benchmark_id") if isinstance(entry, dict) else None
    where = f"cases[{index}]" + (f" ({label})" if isinstance(label, str) else "")
    if not isinstance(entry, dict):
        raise _Problem(f"{where} should be an object, got {entry!r:.60}")
    status = _text(entry, "status", where)
    if status is not None and status not in AB_STATUSES:
        raise _Problem(f"{where}: 'status' {status!r} is not one of {', '.join(AB_STATUSES)}")
    return AbCase(
        benchmark_id=_text(entry, "benchmark_id", where),
        case=_case_fields(entry, where),
        status=status,
        base_median_s=_number(entry, "base_median_s", where, 0, strictly=True),
        head_median_s=_number(entry, "head_median_s", where, 0, strictly=True),
        ratio=_number(entry, "ratio", where, 0, strictly=True),
        ci_low=_number(entry, "ci_low", where, 0, strictly=True),
        ci_high=_number(entry, "ci_high", where, 0, strictly=True),
        floor=_number(entry, "floor", where, 0, strictly=False),
        tolerance=_number(entry, "tolerance", where, 0, strictly=False, below=1),
        largest_output_difference=_number(entry, "largest_output_difference", where, 0, strictly=False),
        message=_text(entry, "message", where),
        explanation=_explanation_lines(entry, where),
        head_model_file=_head_model_file(entry, where),
    )


def _explanation_lines(entry: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The lines of a case's explanation by the ops (none where the file has none)."""
    explanation = entry.get("explanation")
    if explanation is None:
        return ()
    lines = explanation.get("lines") if isinstance(explanation, dict) else None
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise _Problem(f"{where}: 'explanation' should be an object whose 'lines' is a list of text, got "
                       f"{explanation!r:.60}")
    return tuple(lines)


def _head_model_file(entry: Mapping[str, Any], where: str) -> str | None:
    files = entry.get("model_files")
    if files is None:
        return None
    if not isinstance(files, dict):
        raise _Problem(f"{where}: 'model_files' should be an object, got {files!r:.60}")
    return _text(files, "head", f"{where} model_files")


def ab_summary_from_json(document: Any, path: Path) -> AbReading:
    """Validate an A/B document read from `path`: the summary with its good cases, and a problem per bad entry (or
    for the whole file, when it is not an A/B summary of a version this perfsuite reads)."""
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else None
        return AbReading(None, (FileProblem(path, f"is not an A/B summary: its \"schema\" is {found!r}, not "
                                                  f"{SCHEMA!r}", REMEDY),))
    version = document.get("schema_version")
    if version is not None and (isinstance(version, bool) or version not in READ_VERSIONS):
        newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
        remedy = "Upgrade perfsuite to read it." if newer else REMEDY
        return AbReading(None, (FileProblem(path, f"has schema_version {version!r}; this perfsuite reads "
                                                  f"{' and '.join(map(str, READ_VERSIONS))}", remedy),))
    try:
        base, head = _side(document, "base"), _side(document, "head")
        started_at = _text(document, "started_at", "the summary")
        entries = document.get("cases", [])
        if not isinstance(entries, list):
            raise _Problem(f"'cases' should be a list, got {entries!r:.60}")
    except _Problem as problem:
        return AbReading(None, (FileProblem(path, str(problem), REMEDY),))
    cases, problems = [], []
    for index, entry in enumerate(entries):
        try:
            cases.append(_case(entry, index))
        except _Problem as problem:
            problems.append(FileProblem(path, f"{problem} (this entry is left out)", REMEDY))
    return AbReading(AbSummary(path, started_at, base, head, tuple(cases)), tuple(problems))


def read_ab_file(path: Path) -> AbReading:
    """The A/B summary at `path` and its problems; an unreadable file is a problem, never an exception."""
    try:
        document = read_json_file(path, REMEDY)
    except BadFileError as error:
        return AbReading(None, (FileProblem.of(error),))
    return ab_summary_from_json(document, path)
