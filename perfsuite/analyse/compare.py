"""Compare two result sets: which cases line up, and how their times relate.

A result set is a baseline file (or a folder of them), the JSON a perfsuite run writes through
pytest-benchmark (`--benchmark-json`, `--benchmark-save`), or a file of published figures
(`baselines/reference/`). Reading turns each into one frame of cases; the decisions (which rows join, the
time ratio, the geometric mean) are pure functions on those frames; `perfsuite.render.comparison` renders the result.

The ratio is the one the source article prints: B's time over A's time (CUDA time / MPS time there), so
0.71 means A runs at 71% of B's speed.

Joining. Rows join on (model, mode, dtype, batch size, profile, compile mode) with one result per case on each
side. A compile mode not written down (results and baseline entries recorded before the dimension existed, and
published figures) reads as eager, so a compiled case meets the same compiled case and never an eager one.
Only the profiles both sides hold are compared: a smoke run against baselines of smoke and standard cases
meets the smoke ones, and the standard ones are left out (the side's description counts them).
Cases measured with different model configs (`config_digest` differs) are never joined: both appear, each
one-sided, with a note.

Figures. Every row carries which figure each side's time is (`figure_a`, `figure_b`): `step` (steps back to back,
the device drained once a round) or `latency` (one step and a drain a round), as the baseline entry or the run
states it; one recorded before the figure was stored is read as the baseline store reads it (latency on an
accelerator, step on the CPU), and a published figure states none (None). A joined row whose figures differ, or
whose figure a side does not state, says so in its note, and the summary counts those rows: a step time is never
set against a latency time silently. Published figures leave some of those fields unstated (null): between two
published sets, null joins only null, so the two sides of one article line up exactly. When exactly one
side is published, a measured case joins the published figure of its model whose stated fields all match
(the most specific one when several do); one published figure then stands against each matching case,
and every such row says which fields the source did not state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfsuite.errors import BadFileError
from perfsuite.matrix.axes import EAGER, compile_mode_rank
from perfsuite.records import FIGURES, BaselineEntry
from perfsuite.run.devices import is_accelerator
from perfsuite.store.baselines import SCHEMA as BASELINE_SCHEMA
from perfsuite.store.baselines import baseline_from_json, figure_when_unstated, machine_slug
from perfsuite.store.jsonfile import parse_json_text, read_json_file

PUBLISHED_SCHEMA = "perfsuite-published-reference"
PUBLISHED_SCHEMA_VERSION = 1

KEY_FIELDS = ("model", "mode", "dtype", "batch_size", "profile", "compile")
KEY_FIELD_WORDS = {"model": "model", "mode": "mode", "dtype": "dtype", "batch_size": "batch size", "profile": "profile",
                   "compile": "compile mode"}
# The key fields every perfsuite run writes into extra_info; `compile` came later, and its absence means eager.
REQUIRED_FACTS = ("device", "model", "mode", "dtype", "batch_size", "profile")

CASE_COLUMNS = (
    "benchmark_id", "device", *KEY_FIELDS, "time_s", "figure", "iqr_s", "rounds", "samples_per_s", "tflops_per_s",
    "memory_figure", "memory_bytes", "config_digest", "torch_version", "machine", "source",
)
SIDES = ("both", "A only", "B only")
COMPARISON_COLUMNS = (
    *KEY_FIELDS, "side", "device_a", "device_b", "time_a_s", "time_b_s", "ratio_b_over_a", "figure_a", "figure_b",
    "samples_per_s_a", "samples_per_s_b", "memory_a_bytes", "memory_b_bytes",
    "memory_figure_a", "memory_figure_b", "benchmark_id_a", "benchmark_id_b", "note",
)
_INTEGER_COLUMNS = ("batch_size", "rounds", "memory_bytes", "memory_a_bytes", "memory_b_bytes")
_FLOAT_COLUMNS = ("time_s", "iqr_s", "samples_per_s", "tflops_per_s", "time_a_s", "time_b_s", "ratio_b_over_a",
                  "samples_per_s_a", "samples_per_s_b")

_WHAT_TO_PASS = (
    "pass a baseline file or folder (baselines/<device>/), a file of published figures "
    "(baselines/reference/), or the JSON of a perfsuite run (--benchmark-json, or .benchmarks/*/NNNN_*.json "
    "after --benchmark-save / --benchmark-autosave)"
)


class CompareError(Exception):
    """Result sets that cannot be read or compared; the message says what was wrong, where, and what to do."""


@dataclass(frozen=True, eq=False)
class ResultSet:
    """One side of a comparison.

    `name` is how the user named it (a path); `kind` is "run", "baseline", "published" or "folder";
    `published` is True for figures copied from a publication rather than measured; `description` says in
    one line what the set is; `cases` has the columns `CASE_COLUMNS` (times in seconds, memory in bytes,
    null where a published source does not state a field).
    """

    name: str
    kind: str
    published: bool
    description: str
    cases: pd.DataFrame

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices the cases ran on, sorted."""
        return tuple(sorted({d for d in self.cases["device"] if d is not None}))

    @property
    def machines(self) -> tuple[str, ...]:
        """The machine slugs the cases came from, sorted; unknown machines are left out."""
        return tuple(sorted({m for m in self.cases["machine"] if m is not None}))


@dataclass(frozen=True, eq=False)
class Comparison:
    """Two result sets joined: `rows` has the columns `COMPARISON_COLUMNS`, one row per case (or per pair
    of a measured case and a published figure); `published_side` is "A" or "B" when exactly that side holds
    published figures, else None."""

    a: ResultSet
    b: ResultSet
    rows: pd.DataFrame
    published_side: str | None


# --- reading ------------------------------------------------------------------------------------------


def read_result_set(path: Path) -> ResultSet:
    """Read a result set from a file, or from a folder holding result files (every *.json below it)."""
    if path.is_dir():
        # Every *.json but folders: a FIFO or device among them is refused by the reader, not skipped silently.
        files = sorted(p for p in path.rglob("*.json") if not p.is_dir())
        if not files:
            raise CompareError(f"{path}: the folder holds no .json result files; {_WHAT_TO_PASS}")
        return merge_result_sets([_read_file(f) for f in files], name=str(path))
    if not path.exists():
        raise CompareError(f"{path}: no such file or folder; {_WHAT_TO_PASS}")
    return _read_file(path)


def _read_file(path: Path) -> ResultSet:
    # The one reader: a regular file only (never a FIFO or a device), at most its size cap.
    try:
        document = read_json_file(path, _WHAT_TO_PASS[0].upper() + _WHAT_TO_PASS[1:])
    except BadFileError as error:
        raise CompareError(str(error)) from None
    return result_set_from_document(document, str(path))


def find_newest_run(runs_dir: Path) -> Path | None:
    """The newest run file pytest-benchmark saved under `runs_dir` (`<machine-id>/NNNN_*.json`), or None.

    Newest by modification time; the NNNN counter is per machine-id folder, so it cannot order runs of
    different interpreters.
    """
    if not runs_dir.is_dir():
        return None
    runs = [p for p in runs_dir.glob("*/[0-9][0-9][0-9][0-9]_*.json") if p.is_file()]
    if not runs:
        return None
    return max(runs, key=lambda p: (p.stat().st_mtime, p.name))


def parse_result_set(text: str, source: str) -> ResultSet:
    """Parse the text of one result file; `source` names it in messages."""
    try:
        document = parse_json_text(text, source, _WHAT_TO_PASS[0].upper() + _WHAT_TO_PASS[1:])
    except BadFileError as error:
        raise CompareError(str(error)) from None
    return result_set_from_document(document, source)


def result_set_from_document(document: object, source: str) -> ResultSet:
    """Build a result set from a parsed JSON document of any of the three kinds; `source` names it."""
    if isinstance(document, dict):
        schema = document.get("schema")
        if schema == BASELINE_SCHEMA:
            return _from_baseline(document, source)
        if schema == PUBLISHED_SCHEMA:
            return _from_published(document, source)
        if schema is None and isinstance(document.get("benchmarks"), list):
            return _from_benchmark_json(document, source)
        if schema is not None:
            raise CompareError(
                f"{source}: unknown schema {schema!r} (expected {BASELINE_SCHEMA!r} or {PUBLISHED_SCHEMA!r}); "
                f"{_WHAT_TO_PASS}"
            )
    found = f"a JSON object with keys {', '.join(sorted(document)[:6])}" if isinstance(document, dict) else (
        f"a JSON {type(document).__name__}"
    )
    raise CompareError(
        f"{source}: not a result file: found {found}, but neither a 'schema' nor pytest-benchmark's "
        f"'benchmarks' list; {_WHAT_TO_PASS}"
    )


def merge_result_sets(sets: Sequence[ResultSet], name: str) -> ResultSet:
    """One result set from several files (a folder); published figures and measurements never mix."""
    published = {s.published for s in sets}
    if len(published) > 1:
        files = ", ".join(s.name for s in sets if s.published)
        raise CompareError(
            f"{name}: the folder mixes published figures ({files}) with measurements; "
            "pass the published file and the measured files separately"
        )
    cases = pd.concat([s.cases for s in sets], ignore_index=True) if len(sets) > 1 else sets[0].cases
    description = "; ".join(dict.fromkeys(s.description for s in sets))
    return ResultSet(name=name, kind="folder", published=published.pop(), description=description, cases=cases)


def select_device(result_set: ResultSet, device: str, side: str) -> ResultSet:
    """Keep only the cases of `device`; `side` ("A" or "B") names the set in the message when none are left."""
    kept = result_set.cases[result_set.cases["device"] == device].reset_index(drop=True)
    if kept.empty:
        raise CompareError(
            f"{side} ({result_set.name}) holds no {device} cases; it holds: {', '.join(result_set.devices) or 'none'}"
        )
    return replace(result_set, cases=kept, description=f"{result_set.description} [{device} cases only]")


def preferred_device(result_set: ResultSet) -> str | None:
    """The one accelerator of a set that also holds CPU cases (e.g. a Mac run of mps and cpu), else None.

    Used when the user named no set: the question then is how far this machine's accelerator is from CUDA.
    """
    accelerators = [d for d in result_set.devices if is_accelerator(d)]
    if len(result_set.devices) > 1 and len(accelerators) == 1:
        return accelerators[0]
    return None


def _check_published_schema_version(document: Mapping[str, Any], source: str) -> None:
    version = document.get("schema_version")
    if version != PUBLISHED_SCHEMA_VERSION:
        raise CompareError(
            f"{source}: schema_version {version!r} is not one this perfsuite reads ({PUBLISHED_SCHEMA_VERSION}); "
            "a newer file needs a newer perfsuite, an older one needs re-recording"
        )


def _entries(document: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    entries = document.get("entries")
    if not isinstance(entries, dict):
        raise CompareError(f"{source}: 'entries' must be an object of benchmark id -> result")
    if not entries:
        raise CompareError(f"{source}: the file holds no entries, so there is nothing to compare")
    return entries


def _from_baseline(document: Mapping[str, Any], source: str) -> ResultSet:
    """A baseline file of either schema version, validated by the baseline store's own reader."""
    try:
        baseline = baseline_from_json(document, source)
    except BadFileError as error:
        raise CompareError(str(error)) from None
    if not baseline.entries:
        raise CompareError(f"{source}: the file holds no entries, so there is nothing to compare")
    # Schema 1 names the machine once per file; schema 2 keeps the machine's identity in every entry.
    file_slug = _optional_str(json_object(document.get("machine")).get("machine_slug"))
    records = [
        _baseline_record(entry, benchmark_id, file_slug, f"{source}, entry {benchmark_id}")
        | {"benchmark_id": benchmark_id, "source": source}
        for benchmark_id, entry in baseline.entries.items()
    ]
    devices = ", ".join(sorted({r["device"] for r in records}))
    machines = ", ".join(sorted({r["machine"] for r in records})) or "an unnamed machine"
    description = f"{devices} on {machines}: baseline {source}"
    return ResultSet(source, "baseline", False, description, _case_frame(records))


def _baseline_record(entry: BaselineEntry, benchmark_id: str, file_slug: str | None, where: str) -> dict[str, Any]:
    """The case columns of one baseline entry: times from the median of its runs' medians, TFLOP/s over every
    process of a step (as a run reports it), the machine as the store names its file."""
    case = entry.case
    if case.batch_size < 1:
        raise CompareError(f"{where}: 'batch_size' must be a positive integer, got {case.batch_size!r}")
    processes = max(1, entry.samples_per_step // case.batch_size)
    return {
        "device": case.device, "model": case.model, "mode": case.mode, "dtype": case.dtype,
        "batch_size": case.batch_size, "profile": case.profile, "compile": case.compile,
        "time_s": entry.median_s, "figure": entry.figure, "iqr_s": None,
        "rounds": sum(run.rounds for run in entry.runs), "samples_per_s": entry.samples_per_s,
        "tflops_per_s": entry.flops_per_step * processes / entry.median_s / 1e12 if entry.flops_per_step else None,
        "memory_figure": entry.memory_figure, "memory_bytes": entry.memory_bytes,
        "config_digest": entry.config_digest, "torch_version": entry.torch_version,
        "machine": file_slug or machine_slug(entry.machine, case.device, entry.machine.get("name")),
    }


def _from_published(document: Mapping[str, Any], source: str) -> ResultSet:
    _check_published_schema_version(document, source)
    machine = json_object(document.get("machine"))
    citation = json_object(document.get("source"))
    records = []
    for entry_id, entry in _entries(document, source).items():
        where = f"{source}, entry {entry_id}"
        if not isinstance(entry, dict):
            raise CompareError(f"{where}: an entry must be an object of fields")
        record = _case_record(entry, where, published=True, default_device=document.get("device"))
        record.update(benchmark_id=entry_id, time_s=_time_s(entry, "per_batch_time_s", where),
                      machine=_optional_str(machine.get("machine_slug")), source=source)
        records.append(record)
    devices = ", ".join(sorted({r["device"] for r in records}))
    title = citation.get("title_en") or citation.get("title") or "a publication"
    machine_words = machine.get("description") or _machine_words(machine)
    description = f"published figures, not measurements: {machine_words} ({devices}), from {title}: {source}"
    return ResultSet(source, "published", True, description, _case_frame(records))


def _from_benchmark_json(document: Mapping[str, Any], source: str) -> ResultSet:
    benchmarks = document["benchmarks"]
    if not benchmarks:
        raise CompareError(
            f"{source}: the run holds no benchmarks (all failed, skipped or deselected?); "
            "re-run the benchmarks and pass the new JSON"
        )
    # DataLoader cases (tests/benchmarks/test_dataloader.py) have no model to join on; `perfsuite gains` reads them.
    benchmarks = [b for b in benchmarks if not _is_dataloader_case(b)]
    if not benchmarks:
        raise CompareError(
            f"{source}: the run holds only DataLoader cases, which have no model to compare; "
            f"read them with `perfsuite gains {source}`"
        )
    fingerprint = json_object(json_object(document.get("machine_info")).get("perfsuite"))
    records = []
    for benchmark in benchmarks:
        if not isinstance(benchmark, dict):
            raise CompareError(f"{source}: 'benchmarks' must be a list of objects")
        benchmark_id = str(benchmark.get("param") or benchmark.get("name") or "?")
        where = f"{source}, benchmark {benchmark_id}"
        facts = json_object(benchmark.get("extra_info"))
        missing = [f for f in REQUIRED_FACTS if f not in facts]
        if missing:
            raise CompareError(
                f"{where}: no perfsuite facts in extra_info (missing {', '.join(missing)}), so this JSON was not "
                "written by a perfsuite run; run the suite's benchmarks with --benchmark-json and pass that file"
            )
        stats = json_object(benchmark.get("stats"))
        record = _case_record(facts, where, published=False, default_device=None)
        record.update(
            benchmark_id=benchmark_id, time_s=_time_s(stats, "median", where),
            iqr_s=_optional_number(stats.get("iqr")), rounds=_optional_number(stats.get("rounds")),
            machine=_run_machine(fingerprint, record["device"]), source=source,
        )
        records.append(record)
    devices = ", ".join(sorted({r["device"] for r in records}))
    machines = ", ".join(sorted({r["machine"] for r in records if r["machine"]})) or "an unnamed machine"
    when = f" ({document['datetime'][:16].replace('T', ' ')} UTC)" if isinstance(document.get("datetime"), str) else ""
    description = f"{devices} on {machines}: run {source}{when}"
    return ResultSet(source, "run", False, description, _case_frame(records))


def _is_dataloader_case(benchmark: object) -> bool:
    facts = benchmark.get("extra_info") if isinstance(benchmark, dict) else None
    return isinstance(facts, dict) and facts.get("kind") == "dataloader"


def _run_machine(fingerprint: Mapping[str, Any], device: str) -> str | None:
    """The machine slug a run's case would have in the baseline store (the accelerator, or the CPU for cpu)."""
    if not fingerprint:
        return None
    return _optional_str(fingerprint.get("machine_slug")) or machine_slug(fingerprint, device)


def _machine_words(machine: Mapping[str, Any]) -> str:
    return machine.get("accelerator_name") or machine.get("cpu_model") or "an unnamed machine"


def _case_record(fields: Mapping[str, Any], where: str, published: bool, default_device: object) -> dict[str, Any]:
    """The key facts of one case, checked; a published source may leave key fields other than the model null.
    A case that does not name its compile mode is eager (it was recorded before compile modes existed)."""
    device = fields.get("device", default_device)
    if not isinstance(device, str) or not device:
        raise CompareError(f"{where}: 'device' must be a device name such as cuda, mps or cpu, got {device!r}")
    record: dict[str, Any] = {"device": device}
    for field in KEY_FIELDS:
        value = fields.get(field, EAGER) if field == "compile" else fields.get(field)
        may_be_null = published and field != "model"
        if value is None and may_be_null:
            record[field] = None
        elif field == "batch_size":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CompareError(f"{where}: 'batch_size' must be a positive integer, got {value!r}")
            record[field] = value
        elif isinstance(value, str) and value:
            record[field] = value
        else:
            raise CompareError(f"{where}: {field!r} must be a non-empty string, got {value!r}")
    record.update(
        figure=_figure(fields, device, where, published),
        samples_per_s=_optional_number(fields.get("samples_per_s")),
        tflops_per_s=_optional_number(fields.get("tflops_per_s")),
        memory_figure=_optional_str(fields.get("memory_figure")),
        memory_bytes=_optional_number(fields.get("memory_bytes")),
        config_digest=_optional_str(fields.get("config_digest")),
        torch_version=_optional_str(fields.get("torch_version")),
        iqr_s=_optional_number(fields.get("iqr_s")),
        rounds=_optional_number(fields.get("rounds")),
    )
    return record


def _figure(fields: Mapping[str, Any], device: str, where: str, published: bool) -> str | None:
    """Which figure a case's time is: as stated; unstated, None for a published figure and, for a run recorded
    before the figure was stored, what the baseline store reads for such an entry (`figure_when_unstated`)."""
    figure = fields.get("figure")
    if figure is None:
        return None if published else figure_when_unstated(device)
    if figure not in FIGURES:
        raise CompareError(f"{where}: 'figure' must be one of {', '.join(FIGURES)}, got {figure!r}")
    return str(figure)


def _time_s(fields: Mapping[str, Any], name: str, where: str) -> float:
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise CompareError(f"{where}: {name!r} must be a time in seconds > 0, got {value!r}; re-record this case")
    return float(value)


def _optional_number(value: object) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def json_object(value: object) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one: for optional sections of a result file."""
    return value if isinstance(value, dict) else {}


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _case_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    return _frame(records, CASE_COLUMNS)


def _frame(records: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A frame with nullable integers, floats, and None (not NaN) for missing text and keys."""
    frame = pd.DataFrame.from_records(list(records), columns=list(columns))
    for column in columns:
        if column in _INTEGER_COLUMNS:
            frame[column] = pd.to_numeric(frame[column]).round().astype("Int64")
        elif column in _FLOAT_COLUMNS:
            frame[column] = pd.to_numeric(frame[column]).astype(float)
        else:
            values = frame[column].astype(object)
            frame[column] = values.where(values.notna(), None)
    return frame


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if _missing(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


# --- joining ------------------------------------------------------------------------------------------


def case_key(case: Mapping[str, Any]) -> tuple[Any, ...]:
    """The join key of a case: (model, mode, dtype, batch size, profile, compile mode), None where not stated."""
    return tuple(case.get(f) for f in KEY_FIELDS)


def describe_key(key: Sequence[Any]) -> str:
    """A key in words, e.g. `resnet18 train bf16 bs64 standard`, with the compile mode unless eager
    (`... standard inductor`); `?` marks a field a source did not state."""
    model, mode, dtype, batch_size, profile, compile_mode = ("?" if v is None else v for v in key)
    compiled = "" if compile_mode == EAGER else f" {compile_mode}"
    return f"{model} {mode} {dtype} bs{batch_size} {profile}{compiled}"


def compare_result_sets(a: ResultSet, b: ResultSet, allow_same_machine: bool = False) -> Comparison:
    """Join A and B case by case (see the module docstring) and compute B/A time ratios.

    Raises CompareError when a side is empty or holds a case twice, when A and B are the same side
    (identical content, or the same machine and device unless `allow_same_machine`), or when no case joins.
    """
    for side, result_set in (("A", a), ("B", b)):
        if result_set.cases.empty:
            raise CompareError(f"{side} ({result_set.name}) holds no cases, so there is nothing to compare")
        _check_one_result_per_case(result_set, side)
    check_distinct_sides(a, b, allow_same_machine)
    a, b = keep_common_profiles(a, b)
    published_side = "A" if a.published and not b.published else "B" if b.published and not a.published else None
    a_cases, b_cases = _records(a.cases), _records(b.cases)
    if published_side is None:
        pairs = _pair_exactly(a_cases, b_cases)
    elif published_side == "B":
        pairs = _pair_with_published(a_cases, b_cases, published_label="B")
    else:
        pairs = [(pa, pb, note) for pb, pa, note in _pair_with_published(b_cases, a_cases, published_label="A")]
    rows = [_comparison_row(case_a, case_b, note) for case_a, case_b, note in pairs]
    rows.sort(key=_row_order)
    frame = _frame(rows, COMPARISON_COLUMNS)
    if not (frame["side"] == "both").any():
        raise CompareError(no_overlap_message(a, b, frame))
    return Comparison(a=a, b=b, rows=frame, published_side=published_side)


def keep_common_profiles(a: ResultSet, b: ResultSet) -> tuple[ResultSet, ResultSet]:
    """A and B narrowed to the profiles both hold; each side's description says how many cases it left out.

    A profile sets the model sizes, so cases of different profiles never join: a smoke run against baselines of
    smoke and standard cases is compared with the smoke ones alone. Cases whose profile a published source does
    not state are kept. Raises CompareError, saying what to run, when the two sides have no profile in common.
    """
    profiles_a, profiles_b = _stated_values(a.cases, "profile"), _stated_values(b.cases, "profile")
    if not profiles_a or not profiles_b:
        return a, b
    common = profiles_a & profiles_b
    if not common:
        raise CompareError(no_common_profile_message(a, b, profiles_a, profiles_b))
    return _keep_profiles(a, common), _keep_profiles(b, common)


def no_common_profile_message(a: ResultSet, b: ResultSet, profiles_a: set[str], profiles_b: set[str]) -> str:
    """Why two sides cannot be compared when their profiles differ, and what to run instead."""
    return (
        f"no case of A ({a.name}) joins a case of B ({b.name}), so there is nothing to compare: "
        f"no profile in common: A has {_joined(profiles_a)}, B has {_joined(profiles_b)}. A profile sets the model "
        "sizes, so cases of different profiles never join. Run the benchmarks of one side in a profile the other "
        f"holds (e.g. --perf-profile {min(profiles_b)}), or name a B that holds {_joined(profiles_a)} results."
    )


def _keep_profiles(result_set: ResultSet, profiles: set[str]) -> ResultSet:
    profile = result_set.cases["profile"]
    kept = profile.isna() | profile.isin(profiles)
    left_out = sorted(str(p) for p in profile[~kept])
    if not left_out:
        return result_set
    counts = ", ".join(f"{left_out.count(p)} {p}" for p in dict.fromkeys(left_out))
    return replace(
        result_set, cases=result_set.cases[kept].reset_index(drop=True),
        description=f"{result_set.description} [{_joined(profiles)} profile only; {counts} case(s) left out]",
    )


def check_distinct_sides(a: ResultSet, b: ResultSet, allow_same_machine: bool = False) -> None:
    """Raise CompareError when A and B are one side twice: the same file, identical measurements, or
    (unless `allow_same_machine`) the same machine and device."""
    if a.name == b.name:
        raise CompareError(
            f"A and B are the same result set ({a.name}); compare two different ones, e.g. your run against "
            "baselines/cuda/"
        )
    if _measurements(a.cases) == _measurements(b.cases):
        raise CompareError(
            f"A ({a.name}) and B ({b.name}) hold identical measurements ({len(a.cases)} cases): one result set "
            "given twice, e.g. a copy; compare two different ones"
        )
    same_machine = len(a.machines) == 1 and a.machines == b.machines and a.devices == b.devices
    if same_machine and not allow_same_machine:
        raise CompareError(
            f"A ({a.name}) and B ({b.name}) are both {', '.join(a.devices)} on {a.machines[0]}: one side twice. "
            "Compare against another machine or device (e.g. baselines/cuda/); to compare two runs of this "
            "machine on purpose (e.g. two torch versions), pass --allow-same-machine"
        )


def _measurements(cases: pd.DataFrame) -> list[tuple[Any, ...]]:
    return sorted((str(c["device"]), *map(str, case_key(c)), c["time_s"]) for c in _records(cases))


def _check_one_result_per_case(result_set: ResultSet, side: str) -> None:
    seen: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for case in _records(result_set.cases):
        key = case_key(case)
        if key in seen:
            first = seen[key]
            if first["device"] != case["device"]:
                option = f"--device-{side.lower()}"
                what_to_do = f"keep one device, e.g. {option} {first['device']} or {option} {case['device']}"
            else:
                what_to_do = "pass a single file of the folder"
            raise CompareError(
                f"{side} ({result_set.name}) holds the case {describe_key(key)} twice: {first['benchmark_id']} "
                f"({first['source']}) and {case['benchmark_id']} ({case['source']}). A result set holds one "
                f"result per case: {what_to_do}"
            )
        seen[key] = case


Pair = tuple[dict[str, Any] | None, dict[str, Any] | None, str]


def _pair_exactly(a_cases: list[dict[str, Any]], b_cases: list[dict[str, Any]]) -> list[Pair]:
    """Pairs of cases with equal keys (a field not stated joins only a field not stated)."""
    b_by_key = {case_key(case): case for case in b_cases}
    pairs: list[Pair] = []
    joined: set[tuple[Any, ...]] = set()
    for case_a in a_cases:
        case_b = b_by_key.get(case_key(case_a))
        if case_b is None:
            pairs.append((case_a, None, "only in A"))
            continue
        joined.add(case_key(case_a))
        pairs.extend(_pair_unless_configs_differ(case_a, case_b, ""))
    pairs.extend((None, case_b, "only in B") for case_b in b_cases if case_key(case_b) not in joined)
    return pairs


def _pair_with_published(
    measured_cases: list[dict[str, Any]], published_cases: list[dict[str, Any]], published_label: str
) -> list[Pair]:
    """Pairs (measured, published): each measured case with the most specific published figure whose stated
    fields all match it."""
    measured_label = "A" if published_label == "B" else "B"
    pairs: list[Pair] = []
    used: set[int] = set()
    for measured in measured_cases:
        matches = [p for p in published_cases if all(measured[f] == p[f] for f in _stated_fields(p))]
        if not matches:
            pairs.append((measured, None, f"only in {measured_label}"))
            continue
        most_specific = max(len(_stated_fields(p)) for p in matches)
        for published in matches:
            if len(_stated_fields(published)) == most_specific:
                used.add(id(published))
                unstated = [KEY_FIELD_WORDS[f] for f in KEY_FIELDS if published[f] is None]
                unstated += ["figure"] if published["figure"] is None else []
                note = f"{published_label} published" + (f", not stating {', '.join(unstated)}" if unstated else "")
                if published["figure"] is not None:
                    pair = (measured, published) if published_label == "B" else (published, measured)
                    note = _joined_notes(note, figure_note(pair[0]["figure"], pair[1]["figure"]))
                pairs.append((measured, published, note))
    pairs.extend(
        (None, p, f"only in {published_label} (published)") for p in published_cases if id(p) not in used
    )
    return pairs


def _stated_fields(case: Mapping[str, Any]) -> list[str]:
    return [f for f in KEY_FIELDS if case[f] is not None]


def _pair_unless_configs_differ(case_a: dict[str, Any], case_b: dict[str, Any], note: str) -> list[Pair]:
    digest_a, digest_b = case_a["config_digest"], case_b["config_digest"]
    if digest_a is not None and digest_b is not None and digest_a != digest_b:
        why = f"config differs (config_digest A {digest_a}, B {digest_b}): not compared"
        return [(case_a, None, why), (None, case_b, why)]
    return [(case_a, case_b, _joined_notes(note, figure_note(case_a["figure"], case_b["figure"])))]


def _joined_notes(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _comparison_row(case_a: Mapping[str, Any] | None, case_b: Mapping[str, Any] | None, note: str) -> dict[str, Any]:
    a, b = case_a or {}, case_b or {}
    row: dict[str, Any] = {f: a.get(f) if a.get(f) is not None else b.get(f) for f in KEY_FIELDS}
    row["side"] = "both" if case_a and case_b else "A only" if case_a else "B only"
    for column, suffix, case in (("device", "a", a), ("device", "b", b)):
        row[f"{column}_{suffix}"] = case.get(column)
    row.update(
        time_a_s=a.get("time_s"), time_b_s=b.get("time_s"),
        ratio_b_over_a=time_ratio(a.get("time_s"), b.get("time_s")), figure_a=a.get("figure"), figure_b=b.get("figure"),
        samples_per_s_a=a.get("samples_per_s"), samples_per_s_b=b.get("samples_per_s"),
        memory_a_bytes=a.get("memory_bytes"), memory_b_bytes=b.get("memory_bytes"),
        memory_figure_a=a.get("memory_figure"), memory_figure_b=b.get("memory_figure"),
        benchmark_id_a=a.get("benchmark_id"), benchmark_id_b=b.get("benchmark_id"), note=note,
    )
    return row


def figure_note(figure_a: str | None, figure_b: str | None) -> str:
    """What a joined row says of its two figures (None: not stated by that side): nothing when both sides hold the
    same figure, else which side holds which, e.g. `figures differ: A step, B latency`."""
    if figure_a is not None and figure_a == figure_b:
        return ""
    if figure_a is None and figure_b is None:
        return "figure not stated by either side"
    if figure_a is None or figure_b is None:
        return f"figure not stated by {'A' if figure_a is None else 'B'}"
    return f"figures differ: A {figure_a}, B {figure_b}"


FIGURE_AGREEMENTS = ("same figure", "figures differ", "figure not stated")


def count_figure_agreement(rows: pd.DataFrame) -> dict[str, int]:
    """Of the joined rows, how many hold the same figure on both sides, two different figures, or a figure a side
    does not state (keys FIGURE_AGREEMENTS)."""
    joined = _records(rows[rows["side"] == "both"])
    counts = dict.fromkeys(FIGURE_AGREEMENTS, 0)
    for row in joined:
        a, b = row["figure_a"], row["figure_b"]
        counts["figure not stated" if a is None or b is None else "same figure" if a == b else "figures differ"] += 1
    return counts


def _row_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    # Unstated fields sort after stated ones; a case's one-sided rows stay next to each other; compile modes
    # sort in their declared order (eager first), not alphabetically.
    fields = (_compile_order(row[f]) if f == "compile" else row[f] for f in KEY_FIELDS)
    return (*((v is None, v) for v in fields), SIDES.index(row["side"]))


def _compile_order(compile_mode: str | None) -> tuple[int, str] | None:
    return None if compile_mode is None else (compile_mode_rank(compile_mode), compile_mode)


def time_ratio(time_a_s: float | None, time_b_s: float | None) -> float | None:
    """B's time over A's time, as the article's ratio (CUDA time / MPS time): 0.71 means A runs at 71% of
    B's speed. None unless both times are known and positive."""
    if time_a_s is None or time_b_s is None or not time_a_s > 0 or not time_b_s > 0:
        return None
    return time_b_s / time_a_s


def geometric_mean_ratio(rows: pd.DataFrame) -> float | None:
    """Geometric mean of the B/A time ratios of the joined rows, or None when no row joined."""
    ratios = rows.loc[rows["side"] == "both", "ratio_b_over_a"].dropna().to_numpy(dtype=float)
    ratios = ratios[ratios > 0]
    if ratios.size == 0:
        return None
    return float(np.exp(np.log(ratios).mean()))


def no_overlap_message(a: ResultSet, b: ResultSet, rows: pd.DataFrame) -> str:
    """Why no case joined: what each side holds, the fields with no value in common, and config conflicts."""
    lines = [f"no case of A ({a.name}) joins a case of B ({b.name}), so there is nothing to compare."]
    for side, result_set in (("A", a), ("B", b)):
        lines.append(f"  {side} holds: {_holdings(result_set.cases)}")
    for field in KEY_FIELDS:
        a_values, b_values = _stated_values(a.cases, field), _stated_values(b.cases, field)
        if a_values and b_values and not a_values & b_values:
            lines.append(
                f"  no {KEY_FIELD_WORDS[field]} in common: A has {_joined(a_values)}, B has {_joined(b_values)}"
            )
    conflicts = int(rows["note"].str.startswith("config differs").sum()) // 2
    if conflicts:
        lines.append(
            f"  {conflicts} case(s) matched but were measured with different model configs (config_digest "
            "differs): the models or inputs changed between the two; re-record one side with this perfsuite"
        )
    lines.append(
        "Run the same cases on both sides (same models, modes, dtypes, batch sizes, profile and compile modes)."
    )
    return "\n".join(lines)


def _stated_values(cases: pd.DataFrame, field: str) -> set[Any]:
    return {v for v in cases[field].tolist() if not _missing(v)}


def _joined(values: set[Any]) -> str:
    return ", ".join(str(v) for v in sorted(values))


def _holdings(cases: pd.DataFrame) -> str:
    parts = []
    for field in ("device", *KEY_FIELDS):
        values = _stated_values(cases, field)
        word = KEY_FIELD_WORDS.get(field, field)
        parts.append(f"{word} {_joined(values)}" if values else f"{word} not stated")
    return "; ".join(parts)
