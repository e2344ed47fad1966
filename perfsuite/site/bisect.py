"""Bisect records (schema `perfsuite-bisect` version 1, written by `perfsuite bisect`) as the site marks them on the
pages of the cases they followed. The reader never raises: a file it cannot use is a FileProblem naming it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError
from perfsuite.render.bisect import SCHEMA, SCHEMA_VERSION
from perfsuite.store.archive import FileProblem
from perfsuite.store.jsonfile import read_json_file

REMEDY = "Run `perfsuite bisect` again to write it, or leave the file out of --bisect."


@dataclass(frozen=True)
class BisectMark:
    """What a bisect found, for the pages of the cases it followed (`benchmark_ids`): when it started, the first bad
    commits or releases it named (`named`, their labels) and its sentences."""

    path: Path
    started_at: str | None
    benchmark_ids: frozenset[str]
    named: tuple[str, ...]
    sentences: tuple[str, ...]


@dataclass(frozen=True)
class BisectReading:
    mark: BisectMark | None
    problems: tuple[FileProblem, ...]


def _problem(path: Path, what: str) -> BisectReading:
    return BisectReading(None, (FileProblem(path, what, REMEDY),))


def _label(position: Mapping[str, Any]) -> str:
    commit = position.get("commit")
    if isinstance(commit, str):
        return f"{commit[:12]} {position.get('subject') or ''}".strip()
    return f"torch {position.get('torch_version')} ({position.get('python')})"


def bisect_mark_from_json(document: Any, path: Path) -> BisectReading:
    """The mark of a bisect record read from `path`, or the problem that makes it unusable."""
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else None
        return _problem(path, f"is not a bisect record: its \"schema\" is {found!r}, not {SCHEMA!r}")
    if document.get("schema_version") != SCHEMA_VERSION:
        return _problem(path, f"has schema_version {document.get('schema_version')!r}; this perfsuite reads "
                              f"{SCHEMA_VERSION}")
    positions, steps, finding = document.get("positions"), document.get("steps"), document.get("finding")
    sentences, tracked = document.get("sentences"), document.get("tracked_cases")
    if not (isinstance(positions, list) and all(isinstance(p, dict) for p in positions)
            and isinstance(steps, list) and all(isinstance(s, dict) for s in steps)
            and isinstance(finding, dict) and isinstance(finding.get("changes"), list)
            and isinstance(sentences, list) and all(isinstance(s, str) for s in sentences)
            and isinstance(tracked, list) and all(isinstance(t, str) for t in tracked)):
        return _problem(path, "lacks its positions, steps, finding, sentences or tracked_cases (or one is not a list "
                              "of the right kind)")
    ids = set(tracked)
    for step in steps:
        ids |= {case["benchmark_id"] for case in step.get("cases") or []
                if isinstance(case, dict) and isinstance(case.get("benchmark_id"), str)}
    named = []
    for change in finding["changes"]:
        first_bad = change.get("first_bad") if isinstance(change, dict) else None
        if not isinstance(first_bad, int) or not 0 <= first_bad < len(positions):
            return _problem(path, f"names a first bad position {first_bad!r} outside its {len(positions)} positions")
        named.append(_label(positions[first_bad]))
    started_at = document.get("started_at")
    return BisectReading(BisectMark(path, started_at if isinstance(started_at, str) else None, frozenset(ids),
                                    tuple(named), tuple(sentences)), ())


def read_bisect_file(path: Path) -> BisectReading:
    """The bisect record at `path` as a mark, or its problem; never raises."""
    try:
        document = read_json_file(path, REMEDY)
    except BadFileError as error:
        return BisectReading(None, (FileProblem.of(error),))
    return bisect_mark_from_json(document, path)
