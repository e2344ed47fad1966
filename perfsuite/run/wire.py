"""The codec of what a measuring process hands back: a `Run` or a `Failure` as JSON, one object per case.

Worker processes write it, the process that started them reads it, and the selftest keeps runs in it. Derived
figures (median, samples/s) are not written: they follow from the rounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from perfsuite.records import Case, Failure, OpProfile, OpTime, Outcome, Run


def run_to_json(run: Run) -> dict[str, Any]:
    """`run` as JSON-ready data."""
    document = asdict(run)
    document["round_times_s"] = list(run.round_times_s)
    document["facts"] = dict(run.facts)
    document["op_profile"] = None if run.op_profile is None else op_profile_to_json(run.op_profile)
    return document


def run_from_json(document: Mapping[str, Any]) -> Run:
    """The `Run` that `run_to_json` wrote; ValueError or KeyError/TypeError on a document of another shape."""
    values = dict(document)
    values["case"] = Case(**values["case"])
    values["round_times_s"] = tuple(values["round_times_s"])
    values["facts"] = dict(values.get("facts") or {})
    values["op_profile"] = None if values.get("op_profile") is None else op_profile_from_json(values["op_profile"])
    return Run(**values)


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """An outcome as one JSON object: `{"run": ...}`, `{"failure": ...}` or `{"not_timed": true}`."""
    if isinstance(outcome, Run):
        return {"run": run_to_json(outcome)}
    if isinstance(outcome, Failure):
        return {"failure": asdict(outcome)}
    return {"not_timed": True}


def outcome_from_json(document: Mapping[str, Any]) -> Outcome:
    """The outcome `outcome_to_json` wrote."""
    if "run" in document:
        return run_from_json(document["run"])
    if "failure" in document:
        values = dict(document["failure"])
        return Failure(**{**values, "case": Case(**values["case"])})
    return None


def op_profile_to_json(profile: OpProfile) -> dict[str, Any]:
    """`profile` as JSON-ready data (times in seconds, totals over its steps)."""
    document = asdict(profile)
    document["fallback_warnings"] = [list(item) for item in profile.fallback_warnings]
    document["limits"] = list(profile.limits)
    return document


def op_profile_from_json(document: Mapping[str, Any]) -> OpProfile:
    """The `OpProfile` that `op_profile_to_json` wrote; ValueError, KeyError or TypeError on another shape."""
    values = dict(document)

    def op(item: Mapping[str, Any]) -> OpTime:
        return OpTime(str(item["name"]), int(item["calls"]), float(item["host_self_s"]),
                      None if item.get("device_s") is None else float(item["device_s"]))

    values["ops"] = tuple(op(item) for item in values["ops"])
    values["kernels"] = tuple(op(item) for item in values.get("kernels") or ())
    values["regions"] = tuple(op(item) for item in values.get("regions") or ())
    values["other_ops"] = None if values.get("other_ops") is None else op(values["other_ops"])
    values["limits"] = tuple(str(limit) for limit in values.get("limits") or ())
    values["fallback_warnings"] = tuple((str(message), int(count))
                                        for message, count in values.get("fallback_warnings") or ())
    return OpProfile(**values)
