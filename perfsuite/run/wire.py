"""The codecs of what crosses between processes: what a worker process is started with (`WorkerSpec`), and what it
hands back, a `Run` or a `Failure` as JSON, one object per case, and an op profile.

Worker processes read the spec and write the outcomes, the process that started them reads them, and the selftest
keeps runs in them. Derived figures (median, samples/s) are not written: they follow from the rounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from perfsuite.records import (
    Case,
    Failure,
    OpProfile,
    OpTime,
    Outcome,
    Run,
    WorkloadSource,
    conditions_from_json,
    conditions_to_json,
)
from perfsuite.run.plan import MeasureSettings, RoundSettings


def run_to_json(run: Run) -> dict[str, Any]:
    """`run` as JSON-ready data."""
    document = asdict(run)
    document["round_times_s"] = list(run.round_times_s)
    document["facts"] = dict(run.facts)
    document["op_profile"] = None if run.op_profile is None else op_profile_to_json(run.op_profile)
    for name in ("conditions_before", "conditions_after"):
        conditions = getattr(run, name)
        document[name] = None if conditions is None else conditions_to_json(conditions)
    return document


def run_from_json(document: Mapping[str, Any]) -> Run:
    """The `Run` that `run_to_json` wrote; ValueError or KeyError/TypeError on a document of another shape."""
    values = dict(document)
    values["case"] = Case(**values["case"])
    values["round_times_s"] = tuple(values["round_times_s"])
    values["facts"] = dict(values.get("facts") or {})
    values["op_profile"] = None if values.get("op_profile") is None else op_profile_from_json(values["op_profile"])
    for name in ("conditions_before", "conditions_after"):
        values[name] = None if values.get(name) is None else conditions_from_json(values[name], name)
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
    document["op_calls"] = [list(item) for item in profile.op_calls]
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
    values["op_calls"] = tuple((str(op), int(calls)) for op, calls in values.get("op_calls") or ())
    return OpProfile(**values)


@dataclass(frozen=True)
class WorkerSide:
    """One side a worker holds in an A/B job: its name ("base" or "head"), the checkout its project code comes from
    (`root`), and the modules that define each model there."""

    name: str
    root: str
    workload_sources: Mapping[str, Sequence[WorkloadSource]] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process (`perfsuite.run.worker`) is started with: how it measures (`measure`, `rounds`, torch's
    CPU `threads`), and where its models come from: for the gate, the entries put first on its path (`sys_path`) and
    the modules that define each model (`workload_sources`); for an A/B job, its `sides` (each with its own
    checkout), the head's checkout (`head_root`), perfsuite's own model modules when the project is perfsuite itself
    (`model_modules`), and the models each side is checked for before anything is measured (`check_models`)."""

    measure: MeasureSettings
    rounds: RoundSettings
    threads: int | None = None
    sys_path: tuple[str, ...] = ()
    workload_sources: Mapping[str, Sequence[WorkloadSource]] = field(default_factory=dict)
    sides: tuple[WorkerSide, ...] = ()
    head_root: str | None = None
    model_modules: tuple[str, ...] = ()
    check_models: tuple[str, ...] = ()


def _sources_to_json(sources: Mapping[str, Sequence[WorkloadSource]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [dict(source) for source in listed] for name, listed in sources.items()}


def _sources_from_json(document: Mapping[str, Any]) -> dict[str, tuple[WorkloadSource, ...]]:
    return {str(name): tuple(WorkloadSource(module=str(source["module"]),
                                            file=None if source.get("file") is None else str(source["file"]))
                             for source in listed)
            for name, listed in document.items()}


def worker_spec_to_json(spec: WorkerSpec) -> dict[str, Any]:
    """`spec` as JSON-ready data (what the worker reads from its spec file)."""
    return {
        "warmup_steps": spec.measure.warmup_steps, "ddp_processes": spec.measure.ddp_processes,
        "fresh_process": spec.measure.fresh_process, "figure": spec.measure.figure,
        "count_flops": spec.measure.count_flops, "profile_ops": spec.measure.profile_ops,
        "rounds": asdict(spec.rounds), "threads": spec.threads,
        "sys_path": list(spec.sys_path), "workload_sources": _sources_to_json(spec.workload_sources),
        "sides": [{"name": side.name, "root": side.root, "workload_sources": _sources_to_json(side.workload_sources)}
                  for side in spec.sides],
        "head_root": spec.head_root, "model_modules": list(spec.model_modules),
        "check_models": list(spec.check_models),
    }


def worker_spec_from_json(document: Mapping[str, Any]) -> WorkerSpec:
    """The `WorkerSpec` that `worker_spec_to_json` wrote; KeyError, TypeError or ValueError on another shape."""
    measure = MeasureSettings(
        int(document["warmup_steps"]), document.get("ddp_processes"), fresh_process=bool(document["fresh_process"]),
        figure=str(document["figure"]), count_flops=bool(document.get("count_flops", False)),
        profile_ops=bool(document.get("profile_ops", False)),
    )
    sides = tuple(WorkerSide(str(side["name"]), str(side["root"]), _sources_from_json(side["workload_sources"]))
                  for side in document.get("sides") or ())
    return WorkerSpec(
        measure, RoundSettings(**document["rounds"]), document.get("threads"),
        tuple(str(entry) for entry in document.get("sys_path") or ()),
        _sources_from_json(document.get("workload_sources") or {}), sides, document.get("head_root"),
        tuple(str(module) for module in document.get("model_modules") or ()),
        tuple(str(model) for model in document.get("check_models") or ()),
    )
