"""The baseline store: one JSON file per device and machine, read, validated and written atomically.

Layout: `<baseline_dir>/<device>/<machine-slug>.json`, e.g. `baselines/cuda/nvidia-h200.json`. The format
is documented in docs/gate.md ("Baseline store format"). Reading never changes a file; only
`record_baselines` writes, and it is only called when the user asked for an update.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.judge.stats import check_tolerance
from perfsuite.records import CaseResult

SCHEMA = "perfsuite-baseline"
SCHEMA_VERSION = 1
MAX_STORED_ROUNDS = 200
STORED_SIGNIFICANT_FIGURES = 4
RECORD_COMMAND = "pytest --benchmark-only --perf-update-baseline"


class BaselineFileError(Exception):
    """A baseline file exists but cannot be used: the message names the file, the problem and the fix."""

    def __init__(self, path: Path | str, problem: str, remedy: str | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        self.remedy = remedy or (
            f"Restore it from version control (git checkout -- {self.path}) or delete it and record a new "
            f"baseline with `{RECORD_COMMAND}`."
        )
        super().__init__(f"baseline file {self.path}: {problem}. {self.remedy}")


@dataclass(frozen=True)
class BaselineEntry:
    """The stored measurement of one benchmark id: raw round times (seconds) and the facts to compare them."""

    device: str
    dtype: str
    model: str
    batch_size: int
    mode: str
    profile: str
    round_times_s: tuple[float, ...]
    rounds: int
    median_s: float
    iqr_s: float
    samples_per_s: float
    memory_figure: str
    memory_bytes: int | None
    flops_per_step: float | None
    tflops_per_s: float | None
    config_digest: str
    torch_version: str
    commit: str | None
    recorded_at: str
    tolerance: float
    memory_tolerance: float
    reference_median_s: float | None


@dataclass(frozen=True)
class BaselineFile:
    """The content of one baseline file: its device, the machine fingerprint and the entries by benchmark id.

    Treat `machine` and `entries` as read-only; `merge_entries` returns a new file.
    """

    device: str
    machine: Mapping[str, Any]
    entries: Mapping[str, BaselineEntry] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION


def machine_slug(fingerprint: Mapping[str, Any], device: str) -> str:
    """A readable file name for the machine that ran `device`: the accelerator for cuda and mps, the CPU
    model for cpu. "NVIDIA H200" -> "nvidia-h200", "Apple M2 Max" -> "apple-m2-max",
    "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz" -> "intel-xeon-platinum-8375c".
    """
    name_key = "cpu_model" if device == "cpu" else "accelerator_name"
    name = str(fingerprint.get(name_key) or "")
    # Trademark marks, clock speeds and the words CPU/Processor add nothing that tells two machines apart.
    name = re.sub(r"\((?:r|tm|c)\)", " ", name, flags=re.IGNORECASE)
    name = re.sub(r"@\s*[\d.]+\s*[gm]hz", " ", name, flags=re.IGNORECASE)
    name = re.sub(r"\b(?:cpu|processor)\b", " ", name, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64].strip("-")
    return slug or f"unknown-{'cpu' if device == 'cpu' else device + '-device'}"


def baseline_path(baseline_dir: Path | str, device: str, machine_slug: str) -> Path:
    """Where the baseline of `device` on the machine `machine_slug` lives: `<baseline_dir>/<device>/<slug>.json`."""
    return Path(baseline_dir) / device / f"{machine_slug}.json"


def no_baseline_hint(path: Path | str) -> str:
    """What to tell a user whose baseline file or entry does not exist yet."""
    return f"no baseline in {path}; record one with `{RECORD_COMMAND}`"


def _significant(value: float, figures: int = STORED_SIGNIFICANT_FIGURES) -> float:
    return float(f"{value:.{figures}g}")


def entry_from_result(
    result: CaseResult,
    *,
    commit: str | None,
    recorded_at: datetime,
    tolerance: float,
    memory_tolerance: float,
) -> BaselineEntry:
    """The baseline entry that records `result`: at most 200 round times (evenly subsampled, in timing
    order), times and rates rounded to 4 significant figures, `recorded_at` (timezone-aware) in UTC.
    """
    if recorded_at.tzinfo is None:
        raise ValueError("recorded_at must be timezone-aware, e.g. datetime.now(timezone.utc)")
    check_tolerance(tolerance, f"{result.benchmark_id}: tolerance")
    check_tolerance(memory_tolerance, f"{result.benchmark_id}: memory tolerance")
    times = result.round_times_s
    if len(times) > MAX_STORED_ROUNDS:
        # Even spacing keeps early and late rounds alike, so slow drift within a run stays visible.
        indices = np.linspace(0, len(times) - 1, MAX_STORED_ROUNDS).round().astype(int)
        times = tuple(times[i] for i in indices)
    reference_median_s = result.reference_median_s
    return BaselineEntry(
        device=result.device,
        dtype=result.dtype,
        model=result.model,
        batch_size=int(result.batch_size),
        mode=result.mode,
        profile=result.profile,
        round_times_s=tuple(_significant(t) for t in times),
        rounds=result.rounds,
        median_s=_significant(result.median_s),
        iqr_s=_significant(result.iqr_s),
        samples_per_s=_significant(result.samples_per_s),
        memory_figure=result.memory_figure,
        # int() also turns numpy integers into ones the JSON encoder accepts.
        memory_bytes=None if result.memory_bytes is None else int(result.memory_bytes),
        flops_per_step=None if result.flops_per_step is None else int(result.flops_per_step),
        tflops_per_s=None if result.tflops_per_s is None else _significant(result.tflops_per_s),
        config_digest=result.config_digest,
        torch_version=result.torch_version,
        commit=commit,
        recorded_at=recorded_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tolerance=float(tolerance),
        memory_tolerance=float(memory_tolerance),
        reference_median_s=None if reference_median_s is None else _significant(reference_median_s),
    )


def merge_entries(
    existing: BaselineFile | None, device: str, machine: Mapping[str, Any], entries: Mapping[str, BaselineEntry]
) -> BaselineFile:
    """The file after recording `entries`: those ids are replaced or added, every other entry is kept as it
    was; the machine fingerprint becomes `machine` (the latest recording's)."""
    if existing is not None and existing.device != device:
        raise ValueError(f"cannot record {device} entries into a baseline file of device {existing.device!r}")
    merged = dict(existing.entries) if existing is not None else {}
    merged.update(entries)
    return BaselineFile(device=device, machine=dict(machine), entries=merged)


def baseline_to_json(baseline: BaselineFile) -> dict[str, Any]:
    """The JSON document of a baseline file (see docs/gate.md)."""
    return {
        "schema": SCHEMA,
        "schema_version": baseline.schema_version,
        "device": baseline.device,
        "machine": dict(baseline.machine),
        "entries": {
            benchmark_id: {**asdict(entry), "round_times_s": list(entry.round_times_s)}
            for benchmark_id, entry in baseline.entries.items()
        },
    }


# Every entry field, the JSON types it may hold and whether null is allowed.
_NUMBER = (int, float)
_ENTRY_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "device": ((str,), False),
    "dtype": ((str,), False),
    "model": ((str,), False),
    "batch_size": ((int,), False),
    "mode": ((str,), False),
    "profile": ((str,), False),
    "round_times_s": ((list,), False),
    "rounds": ((int,), False),
    "median_s": (_NUMBER, False),
    "iqr_s": (_NUMBER, False),
    "samples_per_s": (_NUMBER, False),
    "memory_figure": ((str,), False),
    "memory_bytes": ((int,), True),
    "flops_per_step": (_NUMBER, True),
    "tflops_per_s": (_NUMBER, True),
    "config_digest": ((str,), False),
    "torch_version": ((str,), False),
    "commit": ((str,), True),
    "recorded_at": ((str,), False),
    "tolerance": (_NUMBER, False),
    "memory_tolerance": (_NUMBER, False),
    "reference_median_s": (_NUMBER, True),
}


def _is_positive_number(value: Any) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _entry_problem(entry: Any, device: str) -> str | None:
    """What is wrong with one entry's JSON, or None when it is usable."""
    if not isinstance(entry, dict):
        return "is not a JSON object"
    missing = [name for name in _ENTRY_FIELDS if name not in entry]
    if missing:
        return f"misses the field(s) {', '.join(missing)}"
    for name, (types, nullable) in _ENTRY_FIELDS.items():
        value = entry[name]
        if value is None and nullable:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types) + (" or null" if nullable else "")
            return f"field {name!r} should be {expected}, got {value!r}"
    times = entry["round_times_s"]
    if not times or not all(_is_positive_number(t) for t in times):
        return "field 'round_times_s' must be a non-empty list of finite times > 0 seconds"
    for name in ("median_s", "samples_per_s"):
        if not _is_positive_number(entry[name]):
            return f"field {name!r} must be finite and > 0, got {entry[name]!r}"
    if entry["reference_median_s"] is not None and not _is_positive_number(entry["reference_median_s"]):
        return f"field 'reference_median_s' must be finite and > 0 or null, got {entry['reference_median_s']!r}"
    for name in ("tolerance", "memory_tolerance"):
        if not 0 <= entry[name] < 1:
            return f"field {name!r} must be a fraction in [0, 1), got {entry[name]!r}"
    if entry["rounds"] < len(times):
        return f"field 'rounds' ({entry['rounds']}) is smaller than the {len(times)} stored round times"
    if entry["device"] != device:
        return f"has device {entry['device']!r} in a file of device {device!r}"
    return None


def parse_baseline(text: str, path: Path | str) -> BaselineFile:
    """Validate and parse the text of a baseline file; `path` only names the file in errors.

    Raises BaselineFileError for an empty or truncated file, invalid JSON, another schema or schema
    version, or an entry with a missing or malformed field.
    """
    if not text.strip():
        raise BaselineFileError(path, "the file is empty (an interrupted copy or checkout?)")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise BaselineFileError(
            path, f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}); truncated or edited?"
        ) from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise BaselineFileError(path, f"not a perfsuite baseline (its \"schema\" field is not {SCHEMA!r})")
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise BaselineFileError(
                path,
                f"schema_version {version} was written by a newer perfsuite; this one reads {SCHEMA_VERSION}",
                "Upgrade perfsuite (pip install -U perfsuite) to read it.",
            )
        raise BaselineFileError(path, f"unsupported schema_version {version!r}; this perfsuite reads {SCHEMA_VERSION}")
    device = document.get("device")
    machine = document.get("machine")
    entries = document.get("entries")
    if not isinstance(device, str) or not isinstance(machine, dict) or not isinstance(entries, dict):
        raise BaselineFileError(path, 'the fields "device" (text), "machine" and "entries" (objects) are required')
    parsed: dict[str, BaselineEntry] = {}
    for benchmark_id, entry in entries.items():
        problem = _entry_problem(entry, device)
        if problem is not None:
            raise BaselineFileError(path, f"entry {benchmark_id!r} {problem}")
        values = {name: entry[name] for name in _ENTRY_FIELDS}
        values["round_times_s"] = tuple(float(t) for t in entry["round_times_s"])
        parsed[benchmark_id] = BaselineEntry(**values)
    return BaselineFile(device=device, machine=machine, entries=parsed, schema_version=version)


def load_baseline(path: Path | str) -> BaselineFile | None:
    """Read and validate the baseline file at `path`; None when the file (or its directory) does not exist.

    Raises BaselineFileError when it exists but is unreadable or invalid.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise BaselineFileError(
            path, f"cannot be read ({error.strerror})", "Check the path and its permissions."
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BaselineFileError(path, f"not UTF-8 text (byte {error.start})") from None
    return parse_baseline(text, path)


def write_baseline_file(path: Path | str, baseline: BaselineFile) -> None:
    """Write `baseline` to `path` atomically: a temporary file in the same directory, fsynced, then renamed
    over the old one. If anything fails before the rename the old file is untouched and the temporary
    file removed. Keys sorted, indent 1, UTF-8."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(baseline_to_json(baseline), handle, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file private (0600); a baseline is shared through version control.
        os.chmod(temporary_name, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(temporary_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary_name)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; some systems cannot open directories.
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the sidecar `<path>.lock` (POSIX flock), so read-merge-write is serialised."""
    import fcntl  # POSIX only; imported here so reading baselines works everywhere

    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def record_baselines(
    path: Path | str, device: str, machine: Mapping[str, Any], entries: Mapping[str, BaselineEntry]
) -> BaselineFile:
    """Add or replace `entries` in the baseline file at `path`, keeping every other entry; create the file
    and its directories if needed. Returns the file as written.

    Concurrent recorders into the same file are serialised by a lock on `<path>.lock`, so both land.
    An existing invalid file raises BaselineFileError and is left as it is.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        existing = load_baseline(path)
        if existing is not None and existing.device != device:
            raise BaselineFileError(
                path,
                f"holds {existing.device} entries, not {device}",
                f"Record {device} results into {device}/ of the baseline directory.",
            )
        merged = merge_entries(existing, device, machine, entries)
        write_baseline_file(path, merged)
    return merged
