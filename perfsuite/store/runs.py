"""The codec of a `Run` as JSON: how a worker process hands its runs to the pytest process, and how the
selftest keeps them. Derived figures (median, samples/s) are not written: they follow from the rounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from perfsuite.records import Case, Run


def run_to_json(run: Run) -> dict[str, Any]:
    """`run` as JSON-ready data."""
    document = asdict(run)
    document["round_times_s"] = list(run.round_times_s)
    document["facts"] = dict(run.facts)
    return document


def run_from_json(document: Mapping[str, Any]) -> Run:
    """The `Run` that `run_to_json` wrote; ValueError or KeyError/TypeError on a document of another shape."""
    values = dict(document)
    values["case"] = Case(**values["case"])
    values["round_times_s"] = tuple(values["round_times_s"])
    values["facts"] = dict(values.get("facts") or {})
    return Run(**values)
