"""The comparison view: each machine that is not CUDA next to the CUDA baselines and the published figures, the
way `perfsuite compare` joins two result sets (perfsuite.analyse.compare does the joining).

Pairs: every measured non-CUDA machine (MPS first) against every measured CUDA machine, every published CUDA
table and the published tables of its own device; every published non-CUDA table against every published CUDA
table (the article's own ratios).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfsuite.analyse.compare import (
    CompareError,
    Comparison,
    ResultSet,
    compare_result_sets,
    read_result_set,
    result_set_from_document,
)
from perfsuite.site.history import BaselineSource
from perfsuite.store.archive import FileProblem
from perfsuite.store.baselines import baseline_to_json

CUDA = "cuda"
COMPARE_REMEDY = "Its cases are left out of the comparison; `perfsuite compare` on the file says the same."
PUBLISHED_REMEDY = "Fix the file of published figures or leave it out (its format: baselines/reference/README.md)."


@dataclass(frozen=True)
class ComparisonView:
    """One pair of result sets: the comparison, or why the two could not be compared (`why_not`)."""

    a: ResultSet
    b: ResultSet
    comparison: Comparison | None
    why_not: str | None


def measured_sets(baselines: Sequence[BaselineSource]) -> tuple[list[ResultSet], list[FileProblem]]:
    """Each baseline file's good entries as a result set (a file without good entries gives none), and a problem
    for each that `perfsuite compare` cannot read."""
    sets, problems = [], []
    for source in baselines:
        if not source.baseline.entries:
            continue
        try:
            sets.append(result_set_from_document(baseline_to_json(source.baseline), str(source.path)))
        except CompareError as error:
            problems.append(FileProblem(source.path, str(error).removeprefix(f"{source.path}: "), COMPARE_REMEDY))
    return sets, problems


def published_sets(paths: Sequence[Path]) -> tuple[list[ResultSet], list[FileProblem]]:
    """The files of published figures as result sets, and a problem for each that cannot be read."""
    sets, problems = [], []
    for path in paths:
        try:
            sets.append(read_result_set(path))
        except CompareError as error:
            problem = str(error).removeprefix(f"{path}: ")
            problems.append(FileProblem(path, problem, PUBLISHED_REMEDY))
    return sets, problems


def plan_pairs(measured: Sequence[ResultSet], published: Sequence[ResultSet]) -> list[tuple[ResultSet, ResultSet]]:
    """(A, B) pairs to compare: measured non-CUDA machines (MPS first) against the measured CUDA machines, the
    published CUDA tables and the published tables of their own device (your Mac against the article's); published
    non-CUDA tables against published CUDA ones (the article's own ratios)."""
    measured_cuda = [s for s in measured if s.devices == (CUDA,)]
    others = sorted((s for s in measured if CUDA not in s.devices), key=lambda s: (s.devices != ("mps",), s.name))
    published_cuda = [s for s in published if s.devices == (CUDA,)]
    published_others = [s for s in published if CUDA not in s.devices]
    pairs = [(a, b) for a in others for b in (*measured_cuda, *published_cuda)]
    pairs += [(a, b) for a in others for b in published_others if b.devices == a.devices]
    pairs += [(a, b) for a in published_others for b in published_cuda]
    return pairs


def compare_pairs(pairs: Sequence[tuple[ResultSet, ResultSet]]) -> list[ComparisonView]:
    """Each pair compared; a pair that cannot be compared keeps the reason compare gives."""
    views = []
    for a, b in pairs:
        try:
            views.append(ComparisonView(a, b, compare_result_sets(a, b), None))
        except CompareError as error:
            views.append(ComparisonView(a, b, None, str(error)))
    return views
