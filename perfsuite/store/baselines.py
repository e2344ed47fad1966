"""The baseline store: one JSON file per device and machine, each entry a case's history of runs.

Layout: `<baseline_dir>/<device>/<machine>.json`, e.g. `baselines/cuda/nvidia-h200.json`; `<machine>` is the
`--perf-machine` name when given, else made from the hardware (`machine_slug`). The format (schema 3: schema 2 with
each run's conditions, docs/conditions.md) is documented in docs/gate.md; schema-1 files (one run per entry, the
machine once per file) are read as one-run histories, schema-2 files as histories whose conditions were not
recorded, and both are only rewritten, as schema 3, when the user records into them. An entry may carry the op
summary of the last session that profiled the case (`op_profile`, bounded by `stored_op_profile`): an optional
field that readers before it ignore, so it needs no new schema version; an entry without it reads as None.

Reading never changes a file. `record_runs` is the only writer: it appends runs to each entry's history
(keeping the newest `MAX_HISTORY_RUNS`) under a lock, with an atomic replace, so a file is never half-written.
What it writes it can read back: the text is parsed by the reader before it replaces the old file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from perfsuite.errors import REBASELINE_COMMAND, BadFileError
from perfsuite.matrix.axes import COMPILE_MODES, DEVICES, EAGER
from perfsuite.records import (
    FIGURES,
    HOST_TIMES_FASTEST_STEP,
    HOST_TIMES_SUMMED,
    LATENCY_FIGURE,
    MAX_PROFILE_KERNELS,
    MAX_PROFILE_OPS,
    MIN_ROUND_TIME_S,
    STEP_FIGURE,
    BaselineEntry,
    Case,
    Conditions,
    Measurement,
    OpProfile,
    OpTime,
    StoredRun,
    conditions_from_json,
    conditions_to_json,
    is_finite_positive,
)
from perfsuite.run.devices import backend
from perfsuite.run.profiling import merge_profiles
from perfsuite.run.wire import op_profile_to_json
from perfsuite.store.files import refuse_special_file, special_file_kind, write_text_atomically
from perfsuite.store.jsonfile import MAX_JSON_INTEGER, parse_json_text, read_json_file

SCHEMA = "perfsuite-baseline"
# Schema 3 adds each run's conditions (`conditions_before`, `conditions_after`); a perfsuite that reads only 2 would
# judge a session on battery against a history on AC as if they were one, so it refuses a schema-3 file. Schema-2
# runs read as runs whose conditions were not recorded.
SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
MAX_STORED_ROUNDS = 50
MAX_HISTORY_RUNS = 20
STORED_SIGNIFICANT_FIGURES = 4
# What a stored op summary keeps of a name or a fallback message (an op's name is far shorter; a compiled region's
# or a warning's can run to kilobytes).
MAX_STORED_NAME_CHARACTERS = 200
# The most ops whose calls a stored summary keeps (every op of a step; SD 1.5's UNet training step has a few hundred):
# beyond it the summary keeps only its largest ops' calls, as an older perfsuite did.
MAX_STORED_OP_CALLS = 2000
NAME_MAX_BYTES = 255  # the longest file name on Linux and macOS file systems
# The longest file name the store makes from a machine name is a bad file moved aside,
# `<machine>.bad-YYYYmmddTHHMMSSZ.json`; the lock `.<machine>.json.lock` and temporaries are shorter.
MAX_MACHINE_NAME_BYTES = NAME_MAX_BYTES - len(".bad-20261203T101010Z.json")
BAD_BASELINE_REMEDY = (
    f"Restore it from version control (git checkout -- FILE), or move it aside and record afresh with "
    f"`{REBASELINE_COMMAND}` (the bad file is kept beside it with a timestamped name)"
)


def _remedy(path: Path | str) -> str:
    return BAD_BASELINE_REMEDY.replace("FILE", str(path))


@dataclass(frozen=True)
class BaselineFile:
    """The content of one baseline file: its device and the entries by benchmark id."""

    device: str
    entries: Mapping[str, BaselineEntry]
    schema_version: int = SCHEMA_VERSION


def machine_identity(fingerprint: Mapping[str, Any], device: str, name: str | None = None) -> dict[str, str]:
    """The facts that say two results of `device` came from the same machine, as text: the `name` alone when
    given (`--perf-machine`, a fixed CI runner), else what the device's backend names (for the CPU its model, core
    count, memory, OS and architecture; for CUDA the GPU, their count, the driver and the host CPU; for MPS the chip,
    memory and macOS release)."""
    if name:
        return {"name": name}
    return backend(device).machine_identity(fingerprint)


def machine_slug(fingerprint: Mapping[str, Any], device: str, name: str | None = None) -> str:
    """A readable file name for the machine: the `name` if given, else what the device's backend names it by (the
    accelerator, or the CPU model for the CPU). "NVIDIA H200" -> "nvidia-h200", "Intel(R) Xeon(R) Platinum 8375C
    CPU @ 2.90GHz" -> "intel-xeon-platinum-8375c"."""
    if name:
        return name
    device_backend = backend(device)
    text = device_backend.machine_name(fingerprint)
    # Trademark marks, clock speeds and the words CPU/Processor add nothing that tells two machines apart.
    text = re.sub(r"\((?:r|tm|c)\)", " ", text, flags=re.IGNORECASE)
    text = re.sub(r"@\s*[\d.]+\s*[gm]hz", " ", text, flags=re.IGNORECASE)
    text = re.sub(r"\b(?:cpu|processor)\b", " ", text, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:64].strip("-")
    return slug or f"unknown-{device}{'-device' if device_backend.is_accelerator else ''}"


def baseline_path(baseline_dir: Path | str, device: str, machine_slug: str) -> Path:
    """Where the baseline of `device` on the machine `machine_slug` lives: `<baseline_dir>/<device>/<slug>.json`."""
    return Path(baseline_dir) / device / f"{machine_slug}.json"


def _significant(value: float, figures: int = STORED_SIGNIFICANT_FIGURES) -> float:
    return float(f"{value:.{figures}g}")


def stored_run(
    round_times_s: Sequence[float], memory_bytes: int | None, recorded_at: str, commit: str | None,
    conditions_before: Conditions | None = None, conditions_after: Conditions | None = None,
) -> StoredRun:
    """What the store keeps of a run: the median of every round, the round count and at most
    MAX_STORED_ROUNDS rounds (evenly spaced, in timing order), times at 4 significant figures, and the conditions
    read before and after its rounds."""
    times = list(round_times_s)
    if len(times) > MAX_STORED_ROUNDS:
        # Even spacing keeps early and late rounds alike, so slow drift within a run stays visible.
        indices = np.linspace(0, len(times) - 1, MAX_STORED_ROUNDS).round().astype(int)
        times = [times[i] for i in indices]
    return StoredRun(
        median_s=_significant(float(np.median(round_times_s))),
        rounds=len(round_times_s),
        round_times_s=tuple(_significant(t) for t in times),
        memory_bytes=None if memory_bytes is None else int(memory_bytes),
        recorded_at=recorded_at,
        commit=commit,
        conditions_before=conditions_before,
        conditions_after=conditions_after,
    )


def stored_op_profile(profile: OpProfile, recorded_at: str, commit: str | None) -> OpProfile:
    """What the store keeps of an op summary, recorded at `recorded_at` (UTC) and `commit`: at most MAX_PROFILE_OPS
    ops, MAX_PROFILE_KERNELS kernels, regions and fallback messages (the largest; a profile already keeps no more),
    names cut to MAX_STORED_NAME_CHARACTERS, times at 4 significant figures."""

    def name(text: str) -> str:
        return text[:MAX_STORED_NAME_CHARACTERS]

    def stored(op: OpTime) -> OpTime:
        return OpTime(name(op.name), op.calls, _significant(op.host_self_s),
                      None if op.device_s is None else _significant(op.device_s))

    return replace(
        profile, host_s=_significant(profile.host_s), host_outside_ops_s=_significant(profile.host_outside_ops_s),
        device_wait_s=_significant(profile.device_wait_s),
        ops=tuple(stored(op) for op in profile.ops[:MAX_PROFILE_OPS]),
        other_ops=None if profile.other_ops is None else stored(profile.other_ops),
        kernels=tuple(stored(op) for op in profile.kernels[:MAX_PROFILE_KERNELS]),
        regions=tuple(stored(op) for op in profile.regions[:MAX_PROFILE_KERNELS]),
        fallback_warnings=tuple((name(message), count)
                                for message, count in profile.fallback_warnings[:MAX_PROFILE_KERNELS]),
        limits=tuple(name(limit) for limit in profile.limits[:MAX_PROFILE_KERNELS]),
        recorded_at=recorded_at, commit=commit, op_calls=_stored_op_calls(profile.op_calls),
    )


def _stored_op_calls(op_calls: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Every op's calls as stored: names cut to MAX_STORED_NAME_CHARACTERS (the calls of names that then agree
    summed); none beyond MAX_STORED_OP_CALLS ops."""
    if len(op_calls) > MAX_STORED_OP_CALLS:
        return ()
    calls: Counter[str] = Counter()
    for op, count in op_calls:
        calls[op[:MAX_STORED_NAME_CHARACTERS]] += count
    return tuple(sorted(calls.items()))


def measured_op_profile(measurement: Measurement) -> OpProfile | None:
    """The op summary of a measurement: its runs' profiles merged (each time the median per step over the runs, so a
    burst of other work in one process weighs little); None where no run profiled its ops."""
    profiles = [run.op_profile for run in measurement.runs if run.op_profile is not None]
    return merge_profiles(profiles) if profiles else None


def entry_of(
    measurement: Measurement,
    identity: Mapping[str, str],
    tolerance: float,
    memory_tolerance: float,
    recorded_at: str,
    commit: str | None,
) -> BaselineEntry:
    """The baseline entry holding the runs of `measurement`, recorded on the machine `identity` at `recorded_at`
    (UTC, ISO 8601) and `commit`, with the bands in force; each run keeps its memory figure only where it belongs to
    the case alone (`Run.own_memory_bytes`), and the entry the runs' op summary where they profiled their ops."""
    last = measurement.last
    profile = measured_op_profile(measurement)
    return BaselineEntry(
        case=measurement.case, config_digest=last.config_digest, torch_version=last.torch_version,
        threads=last.threads, machine=dict(identity), memory_figure=last.memory_figure,
        samples_per_step=last.samples_per_step, flops_per_step=last.flops_per_step,
        gpu_busy_fraction=last.gpu_busy_fraction, tolerance=tolerance, memory_tolerance=memory_tolerance,
        figure=last.figure, parameter_count=last.parameter_count,
        op_profile=None if profile is None else stored_op_profile(profile, recorded_at, commit),
        runs=tuple(
            stored_run(run.round_times_s, run.own_memory_bytes, recorded_at, commit, run.conditions_before,
                       run.conditions_after)
            for run in measurement.runs
        ),
    )


class IncompatibleHistory(Exception):
    """Runs of another machine, configuration, torch version or thread count cannot join an entry's history."""


def append_runs(
    existing: BaselineEntry | None, new: BaselineEntry, rebaseline: bool, max_runs: int = MAX_HISTORY_RUNS
) -> BaselineEntry:
    """The entry after recording `new` (the facts of this session and its runs): the runs are appended to the
    existing history, which keeps its newest `max_runs` runs. With `rebaseline` the history starts over.
    Raises IncompatibleHistory when the existing entry's machine, config digest, torch version or threads
    differ from `new`'s and `rebaseline` is not set. A history of unknown threads (schema 1) takes any. The entry
    keeps the newest op summary: `new`'s, else (appending) the existing one."""
    if existing is None or rebaseline:
        return replace(new, runs=new.runs[-max_runs:])
    differences = [
        what for what, old, now in (
            ("machine", dict(existing.machine), dict(new.machine)),
            ("config_digest", existing.config_digest, new.config_digest),
            ("torch_version", existing.torch_version, new.torch_version),
            ("threads", new.threads if existing.threads is None else existing.threads, new.threads),
            ("memory_figure", existing.memory_figure, new.memory_figure),
            ("figure", existing.figure, new.figure),
        ) if old != now
    ]
    if differences:
        raise IncompatibleHistory(
            f"{new.case.benchmark_id}: its baseline history was recorded with another {', '.join(differences)}; "
            f"start it over with `{REBASELINE_COMMAND}`"
        )
    return replace(new, runs=(existing.runs + new.runs)[-max_runs:], op_profile=new.op_profile or existing.op_profile)


# --- the codec --------------------------------------------------------------------------------------------

def baseline_to_json(baseline: BaselineFile) -> dict[str, Any]:
    """The JSON document of a baseline file, schema 3 (see docs/gate.md)."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "device": baseline.device,
        "entries": {benchmark_id: _entry_to_json(entry) for benchmark_id, entry in baseline.entries.items()},
    }


def _entry_to_json(entry: BaselineEntry) -> dict[str, Any]:
    case = entry.case
    return {
        "device": case.device, "dtype": case.dtype, "model": case.model, "batch_size": case.batch_size,
        "mode": case.mode, "profile": case.profile, "compile": case.compile,
        "config_digest": entry.config_digest, "torch_version": entry.torch_version, "threads": entry.threads,
        "machine": dict(entry.machine), "memory_figure": entry.memory_figure,
        "samples_per_step": entry.samples_per_step, "flops_per_step": entry.flops_per_step,
        "gpu_busy_fraction": entry.gpu_busy_fraction, "tolerance": entry.tolerance,
        "memory_tolerance": entry.memory_tolerance, "figure": entry.figure, "parameter_count": entry.parameter_count,
        **({} if entry.op_profile is None else {"op_profile": _op_profile_to_json(entry.op_profile)}),
        "runs": [
            {
                "median_s": run.median_s, "rounds": run.rounds, "round_times_s": list(run.round_times_s),
                "memory_bytes": run.memory_bytes, "recorded_at": run.recorded_at, "commit": run.commit,
                **stored_conditions_to_json(run),
            }
            for run in entry.runs
        ],
    }


def stored_conditions_to_json(run: StoredRun) -> dict[str, Any]:
    """A stored run's conditions as its JSON fields (null where not recorded)."""
    return {name: None if (conditions := getattr(run, name)) is None else conditions_to_json(conditions)
            for name in ("conditions_before", "conditions_after")}


def stored_conditions_of(run: Mapping[str, Any], where: str) -> dict[str, Conditions | None]:
    """A stored run's conditions from its JSON fields (a run recorded before they were stored has none: None);
    ValueError naming `where` and the field for a malformed one."""
    return {name: None if run.get(name) is None else conditions_from_json(run[name], f"{where} {name}")
            for name in ("conditions_before", "conditions_after")}


def _op_profile_to_json(profile: OpProfile) -> dict[str, Any]:
    document = op_profile_to_json(profile)
    return {**document, **{name: list(document[name]) for name in ("ops", "kernels", "regions")}}


class _Problem(Exception):
    """What is wrong with one field of a baseline document; becomes a BadFileError naming the file."""


def _is_time(value: object) -> bool:
    """Whether `value` is a number of seconds a round can take: finite and at least MIN_ROUND_TIME_S."""
    return is_finite_positive(value) and isinstance(value, (int, float)) and value >= MIN_ROUND_TIME_S


def _field(document: Mapping[str, Any], name: str, kind: str, where: str, nullable: bool = False) -> Any:
    """One field of `document`, checked: kind is text, count (int >= 0), size (int >= 1), positive (finite number > 0),
    time (finite seconds >= MIN_ROUND_TIME_S), seconds (finite >= 0), fraction ([0, 1)), share ([0, 1]), flag (a
    bool), object or list."""
    if name not in document:
        raise _Problem(f"{where} misses the field {name!r}")
    value = document[name]
    if value is None and nullable:
        return None
    checks = {
        "text": lambda v: isinstance(v, str),
        "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_JSON_INTEGER,
        "size": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_JSON_INTEGER,
        "positive": is_finite_positive,
        "time": _is_time,
        "fraction": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
        "share": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1,
        "object": lambda v: isinstance(v, dict),
        "list": lambda v: isinstance(v, list),
        "seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
        "flag": lambda v: isinstance(v, bool),
    }
    if not checks[kind](value):
        expected = {
            "text": "text", "count": "a whole number >= 0", "size": "a whole number >= 1",
            "positive": "a finite number > 0", "time": f"a finite time >= {MIN_ROUND_TIME_S:g} seconds",
            "fraction": "a fraction in [0, 1)", "share": "a fraction in [0, 1]", "object": "an object",
            "list": "a list", "seconds": "a finite number of seconds >= 0", "flag": "true or false",
        }[kind]
        null = " or null" if nullable else ""
        raise _Problem(f"{where}: field {name!r} should be {expected}{null}, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    """A field's value for a message: a list or object by its kind and size (printing one nested deep could
    exceed Python's recursion limit), anything else as written, cut at 60 characters."""
    if isinstance(value, (list, dict)):
        size = len(value)
        kind, unit = ("a list", "item") if isinstance(value, list) else ("an object", "key")
        return f"{kind} of {size} {unit}{'' if size == 1 else 's'}"
    beyond = " (beyond 64 bits)" if isinstance(value, int) and value > MAX_JSON_INTEGER else ""
    return f"{value!r:.60}{beyond}"


def _case_of(entry: Mapping[str, Any], benchmark_id: str, device: str) -> Case:
    where = f"entry {benchmark_id!r}"
    case = Case(
        device=_field(entry, "device", "text", where), dtype=_field(entry, "dtype", "text", where),
        model=_field(entry, "model", "text", where), batch_size=_field(entry, "batch_size", "size", where),
        mode=_field(entry, "mode", "text", where), profile=_field(entry, "profile", "text", where),
        # Entries recorded before the compile dimension existed are eager.
        compile=_field(entry, "compile", "text", where) if "compile" in entry else EAGER,
    )
    if case.compile not in COMPILE_MODES:
        raise _Problem(f"{where} has compile {case.compile!r}; valid: {', '.join(COMPILE_MODES)}")
    if case.device != device:
        raise _Problem(f"{where} has device {case.device!r} in a file of device {device!r}")
    if case.benchmark_id != benchmark_id:
        raise _Problem(f"{where} describes the case {case.benchmark_id!r}; its key and fields disagree")
    return case


def _runs_of(entry: Mapping[str, Any], where: str) -> tuple[StoredRun, ...]:
    runs = _field(entry, "runs", "list", where)
    if not runs:
        raise _Problem(f"{where} has no runs")
    parsed = []
    for index, run in enumerate(runs):
        run_where = f"{where} run {index}"
        if not isinstance(run, dict):
            raise _Problem(f"{run_where} is not an object")
        times = _field(run, "round_times_s", "list", run_where)
        if not times or not all(_is_time(t) for t in times):
            raise _Problem(
                f"{run_where}: 'round_times_s' must be a non-empty list of finite times >= {MIN_ROUND_TIME_S:g} seconds"
            )
        rounds = _field(run, "rounds", "count", run_where)
        median = _field(run, "median_s", "time", run_where)
        if rounds < len(times):
            raise _Problem(f"{run_where}: 'rounds' ({rounds}) is smaller than the {len(times)} stored round times")
        # Only where every round is kept must the median lie among them: the median of every round can lie
        # outside an evenly spaced subsample of them.
        if rounds == len(times) and not min(times) <= median <= max(times):
            raise _Problem(
                f"{run_where}: 'median_s' {median} lies outside its stored rounds [{min(times)}, {max(times)}], "
                "which are all its rounds"
            )
        memory = _field(run, "memory_bytes", "count", run_where, nullable=True)
        if memory is not None and memory > 2**50:
            raise _Problem(f"{run_where}: 'memory_bytes' {memory} is beyond any device (over 1 PiB)")
        parsed.append(StoredRun(
            median_s=float(median), rounds=rounds, round_times_s=tuple(float(t) for t in times),
            memory_bytes=memory, recorded_at=_field(run, "recorded_at", "text", run_where),
            commit=_field(run, "commit", "text", run_where, nullable=True), **_conditions_of(run, run_where),
        ))
    return tuple(parsed)


def _conditions_of(run: Mapping[str, Any], where: str) -> dict[str, Conditions | None]:
    try:
        return stored_conditions_of(run, where)
    except ValueError as error:
        raise _Problem(str(error)) from None


def _shared_fields(entry: Any, benchmark_id: str, device: str) -> tuple[str, dict[str, Any]]:
    """The fields schema 1 and 2 entries share, checked, as BaselineEntry arguments; and the entry's name."""
    where = f"entry {benchmark_id!r}"
    if not isinstance(entry, dict):
        raise _Problem(f"{where} is not a JSON object")
    return where, {
        "case": _case_of(entry, benchmark_id, device),
        "config_digest": _field(entry, "config_digest", "text", where),
        "torch_version": _field(entry, "torch_version", "text", where),
        "memory_figure": _field(entry, "memory_figure", "text", where),
        "tolerance": float(_field(entry, "tolerance", "fraction", where)),
        "memory_tolerance": float(_field(entry, "memory_tolerance", "fraction", where)),
        "figure": _figure_of(entry, device, where),
    }


def figure_when_unstated(device: str) -> str:
    """What the rounds of a `device` history that states no figure measured: histories recorded before the figure
    was stored timed one step and a drain of the device a round, latency on an accelerator; on a device that runs
    eagerly (the CPU) a round of one step is what the step figure times too."""
    return LATENCY_FIGURE if backend(device).is_accelerator else STEP_FIGURE


def _figure_of(entry: Mapping[str, Any], device: str, where: str) -> str:
    figure = _field(entry, "figure", "text", where) if "figure" in entry else figure_when_unstated(device)
    if figure not in FIGURES:
        raise _Problem(f"{where} has figure {figure!r}; valid: {', '.join(FIGURES)}")
    return str(figure)


def _entry_v2(entry: Any, benchmark_id: str, device: str) -> BaselineEntry:
    where, shared = _shared_fields(entry, benchmark_id, device)
    machine = _field(entry, "machine", "object", where)
    if not all(isinstance(v, str) for v in machine.values()):
        raise _Problem(f"{where}: every value of 'machine' must be text")
    samples = _field(entry, "samples_per_step", "size", where)
    busy = _field(entry, "gpu_busy_fraction", "share", where, nullable=True)
    return BaselineEntry(
        **shared,
        threads=_field(entry, "threads", "count", where, nullable=True),
        machine=machine,
        samples_per_step=samples,
        flops_per_step=_field(entry, "flops_per_step", "count", where, nullable=True),
        gpu_busy_fraction=None if busy is None else float(busy),
        runs=_runs_of(entry, where),
        parameter_count=(
            _field(entry, "parameter_count", "count", where, nullable=True) if "parameter_count" in entry else None
        ),
        op_profile=_op_profile_of(entry, device, where),
    )


def _op_profile_of(entry: Mapping[str, Any], device: str, where: str) -> OpProfile | None:
    """The entry's op summary, checked field by field; None where it has none (recorded before summaries were
    stored, or without one)."""
    document = _field(entry, "op_profile", "object", where, nullable=True) if "op_profile" in entry else None
    if document is None:
        return None
    where = f"{where} op_profile"

    def op(item: Any, at: str) -> OpTime:
        if not isinstance(item, dict):
            raise _Problem(f"{at} is not an object")
        return OpTime(_field(item, "name", "text", at), _field(item, "calls", "count", at),
                      float(_field(item, "host_self_s", "seconds", at)),
                      _nullable_float(_field(item, "device_s", "seconds", at, nullable=True)))

    def ops(name: str, limit: int) -> tuple[OpTime, ...]:
        items = _field(document, name, "list", where) if name in document else []
        if len(items) > limit:
            raise _Problem(f"{where}: {name!r} holds {len(items)} items; a stored summary keeps at most {limit}")
        return tuple(op(item, f"{where} {name}[{index}]") for index, item in enumerate(items))

    warnings = _field(document, "fallback_warnings", "list", where) if "fallback_warnings" in document else []
    if not all(isinstance(w, list) and len(w) == 2 and isinstance(w[0], str) and isinstance(w[1], int)
               and not isinstance(w[1], bool) and w[1] >= 0 for w in warnings):
        raise _Problem(f"{where}: 'fallback_warnings' must be a list of [message, count] pairs")
    limits = _field(document, "limits", "list", where) if "limits" in document else []
    if not all(isinstance(limit, str) for limit in limits):
        raise _Problem(f"{where}: 'limits' must be a list of text")
    op_calls = _field(document, "op_calls", "list", where) if "op_calls" in document else []
    if len(op_calls) > MAX_STORED_OP_CALLS or not all(
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], int)
            and not isinstance(item[1], bool) and 0 <= item[1] <= MAX_JSON_INTEGER for item in op_calls):
        raise _Problem(f"{where}: 'op_calls' must be a list of at most {MAX_STORED_OP_CALLS} [op name, calls] pairs")
    profile_device = _field(document, "device", "text", where)
    if profile_device != device:
        raise _Problem(f"{where} was profiled on {profile_device!r} in a file of device {device!r}")
    other = _field(document, "other_ops", "object", where, nullable=True) if "other_ops" in document else None
    # A summary stored before profiles said how they took host times summed them over the steps.
    host_times = _field(document, "host_times", "text", where) if "host_times" in document else HOST_TIMES_SUMMED
    if host_times not in (HOST_TIMES_FASTEST_STEP, HOST_TIMES_SUMMED):
        raise _Problem(f"{where}: 'host_times' is {host_times!r}; it must be {HOST_TIMES_FASTEST_STEP!r} or "
                       f"{HOST_TIMES_SUMMED!r}")
    return OpProfile(
        device=profile_device, steps=_field(document, "steps", "size", where),
        host_s=float(_field(document, "host_s", "seconds", where)),
        host_outside_ops_s=float(_field(document, "host_outside_ops_s", "seconds", where)),
        ops=ops("ops", MAX_PROFILE_OPS), other_ops=None if other is None else op(other, f"{where} other_ops"),
        device_wait_s=float(_field(document, "device_wait_s", "seconds", where)),
        kernels=ops("kernels", MAX_PROFILE_KERNELS), regions=ops("regions", MAX_PROFILE_KERNELS),
        fallback_warnings=tuple((message, count) for message, count in warnings[:MAX_PROFILE_KERNELS]),
        watches_fallbacks=_field(document, "watches_fallbacks", "flag", where),
        limits=tuple(limits), recorded_at=_field(document, "recorded_at", "text", where, nullable=True),
        commit=_field(document, "commit", "text", where, nullable=True), host_times=host_times,
        op_calls=tuple((op, calls) for op, calls in op_calls),
    )


def _nullable_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _entry_v1(entry: Any, benchmark_id: str, device: str, machine: Mapping[str, Any]) -> BaselineEntry:
    """A schema-1 entry (one run, the machine once per file) as a one-run history."""
    where, shared = _shared_fields(entry, benchmark_id, device)
    median = _field(entry, "median_s", "time", where)
    samples_per_s = _field(entry, "samples_per_s", "positive", where)
    run = {
        "median_s": median, "rounds": _field(entry, "rounds", "count", where),
        "round_times_s": _field(entry, "round_times_s", "list", where),
        "memory_bytes": _field(entry, "memory_bytes", "count", where, nullable=True),
        "recorded_at": _field(entry, "recorded_at", "text", where),
        "commit": _field(entry, "commit", "text", where, nullable=True),
    }
    flops = _field(entry, "flops_per_step", "positive", where, nullable=True)
    return BaselineEntry(
        **shared,
        threads=None,
        machine=machine_identity(machine, device),
        samples_per_step=max(1, round(samples_per_s * median)),
        flops_per_step=None if flops is None else int(flops),
        gpu_busy_fraction=None,
        runs=_runs_of({"runs": [run]}, where),
    )


def baseline_from_json(document: Any, path: Path | str) -> BaselineFile:
    """Validate and parse a baseline document read from `path` (named in errors); schema 1 or 2.

    Raises BadFileError for another schema or version, or an entry with a missing or malformed field.
    """
    remedy = _remedy(path)
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise BadFileError(path, f"is not a perfsuite baseline (its \"schema\" field is not {SCHEMA!r})", remedy)
    version = document.get("schema_version")
    if isinstance(version, float):
        raise BadFileError(
            path, f"has schema_version {version!r}, a decimal number; it must be the integer "
            f"{' or '.join(map(str, reversed(READABLE_SCHEMA_VERSIONS)))}", remedy,
        )
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise BadFileError(
                path, f"has schema_version {version}, written by a newer perfsuite; this one reads "
                f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}", "Upgrade perfsuite to read it.",
            )
        raise BadFileError(path, f"has the unsupported schema_version {version!r}", remedy)
    device = document.get("device")
    entries = document.get("entries")
    if not isinstance(device, str) or not isinstance(entries, dict):
        raise BadFileError(path, 'lacks the fields "device" (text) and "entries" (an object)', remedy)
    folder = Path(path).parent.name
    if folder in DEVICES and folder != device:
        raise BadFileError(path, f"holds {device} entries but lies in the {folder}/ folder", remedy)
    machine = document.get("machine")
    if version == 1 and not isinstance(machine, dict):
        raise BadFileError(path, 'is schema 1 but lacks its "machine" object', remedy)
    parsed: dict[str, BaselineEntry] = {}
    try:
        for benchmark_id, entry in entries.items():
            if version == 1 and isinstance(machine, dict):  # always a dict for version 1: checked above
                parsed[benchmark_id] = _entry_v1(entry, benchmark_id, device, machine)
            else:
                parsed[benchmark_id] = _entry_v2(entry, benchmark_id, device)
    except _Problem as problem:
        raise BadFileError(path, str(problem), remedy) from None
    return BaselineFile(device=device, entries=parsed, schema_version=version)


def parse_baseline(text: str, path: Path | str) -> BaselineFile:
    """Validate and parse the text of a baseline file; `path` only names the file in errors."""
    return baseline_from_json(parse_json_text(text, path, _remedy(path)), path)


def load_baseline(path: Path | str) -> BaselineFile | None:
    """Read and validate the baseline file at `path`; None when it does not exist. Raises BadFileError when it
    exists but cannot be used."""
    document = read_json_file(path, _remedy(path), missing_ok=True)
    return None if document is None else baseline_from_json(document, path)


# --- writing ------------------------------------------------------------------------------------------------

def baseline_text(baseline: BaselineFile) -> str:
    """The text of a baseline file: JSON with keys sorted, indent 1, a final newline. Non-ASCII text is kept as
    it is, except lone surrogates (from undecodable bytes), written as `\\uXXXX` escapes so the file stays UTF-8."""
    text = json.dumps(baseline_to_json(baseline), indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text) + "\n"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_baseline_file(path: Path | str, baseline: BaselineFile) -> None:
    """Write `baseline` to `path` atomically through `write_text_atomically` (through a symlink to its target;
    never over a folder, device or FIFO), after reading the text back with the reader: a baseline the reader
    would refuse raises BadFileError naming the entry and field, and nothing is written."""
    text = baseline_text(baseline)
    try:
        baseline_from_json(baseline_to_json(baseline), path)  # names the entry and field
        parse_baseline(text, path)  # and what only the text shows
    except BadFileError as error:
        raise BadFileError(
            path, f"perfsuite would write a baseline it cannot read back ({error.problem}), so nothing was written",
            "The old file is unchanged; report this with the benchmark id, it is a defect in perfsuite",
        ) from None
    write_text_atomically(path, text)


def _remove_stale_temporaries(target: Path) -> None:
    """Remove the temporary files of `target` that writers killed before their rename left behind; call it only
    under `_locked(target)`, which proves that no other writer is using one."""
    for stale in target.parent.glob(f".{target.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the hidden sidecar `.<name>.lock` (POSIX flock), so read-merge-write is
    serialised. The holder removes the sidecar before letting go, so none is left in the user's folder (one left
    by a killed recorder goes with the next recording)."""
    import fcntl  # POSIX only; imported here so reading baselines works everywhere

    lock_path = path.with_name(f".{path.name}.lock")
    while True:
        handle = _open_lock_file(lock_path)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except BaseException:
            handle.close()
            raise
        if _is_linked_at(handle.fileno(), lock_path):
            break
        # The holder we waited for removed this sidecar, and a newcomer may already hold a new one: lock that.
        handle.close()
    with handle:
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                lock_path.unlink()


def _open_lock_file(lock_path: Path) -> IO[str]:
    """The lock sidecar, opened for appending (made if absent). Anything but a regular file in its place is refused;
    O_NONBLOCK keeps one put there after the check from blocking the open."""
    with contextlib.suppress(FileNotFoundError):
        kind = special_file_kind(os.stat(lock_path).st_mode)
        if kind is not None:
            raise BadFileError(
                lock_path, f"is {kind}, not a regular file",
                "perfsuite makes this lock file while it records; remove what is in its place",
            )
    descriptor = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NONBLOCK", 0), 0o644)
    return os.fdopen(descriptor, "a")


def _is_linked_at(descriptor: int, path: Path) -> bool:
    """Whether the open file `descriptor` is the file that `path` names now (not removed, not replaced)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def move_aside(path: Path, stamp: str) -> Path:
    """Rename an unusable baseline file to `<name>.bad-<stamp>.json` beside it, so a fresh one can be recorded
    and nothing is lost; returns the new name."""
    aside = path.with_name(f"{path.stem}.bad-{stamp}{path.suffix}")
    os.replace(path, aside)
    return aside


def record_runs(
    path: Path | str, device: str, entries: Mapping[str, BaselineEntry], rebaseline: bool = False
) -> BaselineFile:
    """Append each entry's runs to its history in the baseline file at `path` (create it if needed), keeping
    every other entry; with `rebaseline` the given entries' histories start over. Returns the file written.

    Concurrent recorders into one file are serialised by a lock, so both land. An existing unreadable file
    raises BadFileError and is left as it is; an entry whose history is incompatible raises
    IncompatibleHistory, and nothing is written.
    """
    refuse_special_file(path, _remedy(path))  # named as given, before the symlink is followed
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        _remove_stale_temporaries(path)
        existing = load_baseline(path)
        if existing is not None and existing.device != device:
            raise BadFileError(
                path, f"holds {existing.device} entries, not {device}",
                f"Record {device} results into {device}/ of the baseline folder.",
            )
        merged = dict(existing.entries) if existing is not None else {}
        for benchmark_id, entry in entries.items():
            merged[benchmark_id] = append_runs(merged.get(benchmark_id), entry, rebaseline)
        written = BaselineFile(device=device, entries=merged)
        write_baseline_file(path, written)
    return written

