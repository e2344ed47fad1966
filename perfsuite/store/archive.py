"""The archive: every recorded session kept whole, append-only, beside the baseline's window of 20 runs.

A baseline file keeps the newest `MAX_HISTORY_RUNS` runs of each case, and a rebaseline or a torch upgrade
starts a history over. The archive keeps everything: one small JSON file per session and device, never
changed once written, so a rebaseline and a torch upgrade become marks on one continuous history.

Layout: `<baseline_dir>/archive/<device>/<machine-slug>/<UTC stamp>-<commit or nocommit>-<random>.json`, e.g.
`baselines/archive/cuda/nvidia-h200/20261202T160315Z-3d7a4eb-5f0c1a.json`; schema `perfsuite-archive`
version 2 (version 1 without the conditions), documented in docs/site.md. A verdict may carry the lines of its
explanation by the ops (`explanation`, at most MAX_EXPLANATION_LINES): an optional field that readers before it
ignore, so it needed no new version.

`write_session` is the only writer (atomic, never replaces a file). `read_archive` reads a whole archive and
never raises on a bad file: it returns the good sessions and, for each bad file, what is wrong and what to do.
This module imports the records, the errors, the store's reader and writer, and the baseline store's rule for
an unstated figure.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError
from perfsuite.records import (
    FIGURES,
    STEP_FIGURE,
    BaselineEntry,
    Case,
    Conditions,
    StoredRun,
    conditions_from_json,
    conditions_to_json,
    is_finite_positive,
)
from perfsuite.store.baselines import figure_when_unstated, stored_conditions_of, stored_conditions_to_json
from perfsuite.store.files import write_new_text_atomically
from perfsuite.store.jsonfile import read_json_file

SCHEMA = "perfsuite-archive"
# Version 2 adds the session's conditions (`conditions`, read as it started) and each run's (before and after its
# rounds); version-1 files read as sessions whose conditions were not recorded.
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
ARCHIVE_FOLDER = "archive"
MAX_ARCHIVED_ROUNDS = 50
# The lines an archived verdict keeps of its explanation by the ops, each cut to MAX_EXPLANATION_CHARACTERS.
MAX_EXPLANATION_LINES = 24
MAX_EXPLANATION_CHARACTERS = 400
# Both kinds of recording session: `update` appends to the histories, `rebaseline` starts them over.
SESSION_KINDS = ("update", "rebaseline")
# The statuses of perfsuite.judge.verdicts.VERDICT_STATUSES (a test keeps the two equal; the store may not import
# the judge).
VERDICT_STATUSES = ("regressed", "improved", "unchanged", "uncalibrated", "no-baseline", "incompatible",
                    "conditions-differ")
_RECORDED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
FILE_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
NO_COMMIT = "nocommit"
# A device or machine name becomes a folder name: letters, digits, '-', '_' and '.' (as --perf-machine takes them),
# no separators, no leading dot.
_FOLDER_NAME = re.compile(r"[\w-][\w.-]*")
_NEW_NAME_ATTEMPTS = 8
BAD_ARCHIVE_REMEDY = (
    "An archive file is written once and never changed: restore it from version control (git checkout -- FILE) "
    "or move it out of the archive folder"
)


def _remedy(path: Path | str) -> str:
    return BAD_ARCHIVE_REMEDY.replace("FILE", str(path))


@dataclass(frozen=True)
class ArchivedVerdict:
    """What the gate decided for a case in the session: `status` (one of VERDICT_STATUSES), `ratio` of the
    current runs' median over the baseline's with its confidence bounds `ci_low`/`ci_high`, `floor` the smallest
    slowdown the runs could detect (a fraction: 0.14 reads `detects >= 14%`), `tolerance` the band (a fraction);
    `explanation` the lines that explained it by the ops against the history's last op summary, or the one line
    saying why none could (empty where none was asked for)."""

    status: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    floor: float | None
    tolerance: float
    explanation: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in VERDICT_STATUSES:
            raise ValueError(f"verdict status {self.status!r} is not one of {', '.join(VERDICT_STATUSES)}")
        object.__setattr__(self, "explanation", tuple(
            line[:MAX_EXPLANATION_CHARACTERS] for line in self.explanation[:MAX_EXPLANATION_LINES]))


@dataclass(frozen=True)
class ArchivedCase:
    """One case of a session: what identifies its configuration, its runs (oldest first, each with at most
    `MAX_ARCHIVED_ROUNDS` stored rounds, as the baseline store keeps them) and the verdict judged, if any.

    `samples_per_step` is what one step processes (samples/s follows from a run's median); `memory_figure`
    names the memory figure of the runs' `memory_bytes`; `threads` is torch's CPU thread count (None unknown);
    `figure` what the rounds measured (`step` or `latency`, perfsuite.records.FIGURES; a file without it is read
    as the baseline store reads an entry without it, perfsuite.store.baselines.figure_when_unstated).
    """

    case: Case
    config_digest: str
    threads: int | None
    memory_figure: str
    samples_per_step: int
    runs: tuple[StoredRun, ...]
    verdict: ArchivedVerdict | None = None
    figure: str = STEP_FIGURE

    def __post_init__(self) -> None:
        benchmark_id = self.case.benchmark_id
        if not self.runs:
            raise ValueError(f"{benchmark_id}: an archived case needs at least one run")
        if self.figure not in FIGURES:
            raise ValueError(f"{benchmark_id}: figure {self.figure!r} is not one of {', '.join(FIGURES)}")
        too_many = [len(r.round_times_s) for r in self.runs if len(r.round_times_s) > MAX_ARCHIVED_ROUNDS]
        if too_many:
            raise ValueError(
                f"{benchmark_id}: a run keeps at most {MAX_ARCHIVED_ROUNDS} rounds, got {max(too_many)}; "
                "store runs through perfsuite.store.baselines.stored_run"
            )


@dataclass(frozen=True)
class ArchivedSession:
    """One recording session on one device of one machine.

    `machine_slug` names the machine's files (`--perf-machine`, or made from the hardware) and `machine` holds its
    identity (see perfsuite.store.baselines.machine_identity); `recorded_at` is when the session recorded, UTC as
    `YYYY-MM-DDTHH:MM:SSZ`; `commit` the project's short git commit (None outside a checkout); `kind` is
    `update` or `rebaseline`; `conditions` the machine's conditions read as the session started (None: not
    recorded). Every case is of `device`, and every run was recorded at `commit`.
    """

    device: str
    machine_slug: str
    machine: Mapping[str, str]
    recorded_at: str
    commit: str | None
    torch_version: str
    kind: str
    cases: tuple[ArchivedCase, ...] = field(default=())
    conditions: Conditions | None = None

    def __post_init__(self) -> None:
        for what, name in (("device", self.device), ("machine_slug", self.machine_slug)):
            if not _FOLDER_NAME.fullmatch(name):
                raise ValueError(f"{what} {name!r} cannot name a folder: use letters, digits, '-', '_' and '.'")
        if self.kind not in SESSION_KINDS:
            raise ValueError(f"session kind {self.kind!r} is not one of {', '.join(SESSION_KINDS)}")
        _parse_recorded_at(self.recorded_at)
        if not self.cases:
            raise ValueError("an archived session needs at least one case")
        ids = [c.case.benchmark_id for c in self.cases]
        strangers = [c.case.benchmark_id for c in self.cases if c.case.device != self.device]
        if strangers:
            raise ValueError(f"cases of another device than {self.device} in its session: {', '.join(strangers)}")
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"cases given twice in one session: {', '.join(twice)}")
        other_commits = sorted({
            str(r.commit) for c in self.cases for r in c.runs if r.commit != self.commit
        })
        if other_commits:
            raise ValueError(f"runs of commit {', '.join(other_commits)} in a session of commit {self.commit}")


def _parse_recorded_at(text: str) -> datetime:
    # A pattern and fromisoformat rather than strptime, which costs more than the rest of reading a run.
    try:
        if not _RECORDED_AT.fullmatch(text):
            raise ValueError
        return datetime.fromisoformat(text[:-1])
    except (TypeError, ValueError):
        raise ValueError(f"recorded_at {text!r} is not a UTC time written YYYY-MM-DDTHH:MM:SSZ") from None


def archived_case(entry: BaselineEntry, verdict: ArchivedVerdict | None) -> ArchivedCase:
    """The archived case of a session's baseline entry (the runs it gave the store, not the whole history) and
    the verdict judged for it."""
    return ArchivedCase(
        case=entry.case, config_digest=entry.config_digest, threads=entry.threads, memory_figure=entry.memory_figure,
        samples_per_step=entry.samples_per_step, runs=entry.runs, verdict=verdict, figure=entry.figure,
    )


# --- the codec --------------------------------------------------------------------------------------------

def session_to_json(session: ArchivedSession) -> dict[str, Any]:
    """The JSON document of an archived session, schema `perfsuite-archive` version 2 (docs/site.md)."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "device": session.device,
        "machine_slug": session.machine_slug,
        "machine": dict(session.machine),
        "recorded_at": session.recorded_at,
        "commit": session.commit,
        "torch_version": session.torch_version,
        "kind": session.kind,
        "conditions": None if session.conditions is None else conditions_to_json(session.conditions),
        "cases": [_case_to_json(c) for c in session.cases],
    }


def _case_to_json(archived: ArchivedCase) -> dict[str, Any]:
    case, verdict = archived.case, archived.verdict
    return {
        "benchmark_id": case.benchmark_id,
        "case": {
            "device": case.device, "dtype": case.dtype, "model": case.model, "batch_size": case.batch_size,
            "mode": case.mode, "profile": case.profile, "compile": case.compile,
        },
        "config_digest": archived.config_digest,
        "threads": archived.threads,
        "memory_figure": archived.memory_figure,
        "figure": archived.figure,
        "samples_per_step": archived.samples_per_step,
        "runs": [
            {
                "median_s": run.median_s, "rounds": run.rounds, "round_times_s": list(run.round_times_s),
                "memory_bytes": run.memory_bytes, "recorded_at": run.recorded_at, **stored_conditions_to_json(run),
            }
            for run in archived.runs
        ],
        "verdict": None if verdict is None else {
            "status": verdict.status, "ratio": verdict.ratio, "ci_low": verdict.ci_low, "ci_high": verdict.ci_high,
            "floor": verdict.floor, "tolerance": verdict.tolerance,
            **({"explanation": list(verdict.explanation)} if verdict.explanation else {}),
        },
    }


class _Problem(Exception):
    """What is wrong with one field of an archive document; becomes a BadFileError naming the file."""


_EXPECTED = {
    "text": "text", "count": "a whole number >= 0", "size": "a whole number >= 1",
    "positive": "a finite number > 0", "fraction": "a fraction in [0, 1)", "object": "an object", "list": "a list",
}
_CHECKS = {
    "text": lambda v: isinstance(v, str) and v != "",
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "size": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "positive": is_finite_positive,
    "fraction": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
    "object": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
}


def _field(document: Mapping[str, Any], name: str, kind: str, where: str, nullable: bool = False) -> Any:
    if name not in document:
        raise _Problem(f"{where} misses the field {name!r}")
    value = document[name]
    if value is None and nullable:
        return None
    if not _CHECKS[kind](value):
        null = " or null" if nullable else ""
        raise _Problem(f"{where}: field {name!r} should be {_EXPECTED[kind]}{null}, got {value!r:.60}")
    return value


def _case_of(document: Mapping[str, Any], where: str) -> Case:
    fields = _field(document, "case", "object", where)
    case_where = f"{where} case"
    case = Case(
        device=_field(fields, "device", "text", case_where), dtype=_field(fields, "dtype", "text", case_where),
        model=_field(fields, "model", "text", case_where), batch_size=_field(fields, "batch_size", "size", case_where),
        mode=_field(fields, "mode", "text", case_where), profile=_field(fields, "profile", "text", case_where),
        compile=_field(fields, "compile", "text", case_where),
    )
    benchmark_id = _field(document, "benchmark_id", "text", where)
    if case.benchmark_id != benchmark_id:
        raise _Problem(f"{where} describes the case {case.benchmark_id!r} under the id {benchmark_id!r}")
    return case


def _runs_of(document: Mapping[str, Any], commit: str | None, where: str) -> tuple[StoredRun, ...]:
    runs = _field(document, "runs", "list", where)
    if not runs:
        raise _Problem(f"{where} has no runs")
    parsed = []
    for index, run in enumerate(runs):
        run_where = f"{where} run {index}"
        if not isinstance(run, dict):
            raise _Problem(f"{run_where} is not an object")
        times = _field(run, "round_times_s", "list", run_where)
        if not times or len(times) > MAX_ARCHIVED_ROUNDS or not _finite_positive_times(times):
            raise _Problem(
                f"{run_where}: 'round_times_s' must list 1 to {MAX_ARCHIVED_ROUNDS} finite times > 0 seconds"
            )
        rounds = _field(run, "rounds", "size", run_where)
        median = _field(run, "median_s", "positive", run_where)
        if rounds < len(times):
            raise _Problem(f"{run_where}: 'rounds' ({rounds}) is smaller than the {len(times)} stored round times")
        # Only where every round is kept must the median lie among them: the median of every round can lie outside
        # an evenly spaced subsample of them (as the baseline reader holds).
        if rounds == len(times) and not min(times) <= median <= max(times):
            raise _Problem(
                f"{run_where}: 'median_s' {median} lies outside its stored rounds [{min(times)}, {max(times)}], "
                "which are all its rounds"
            )
        recorded_at = _field(run, "recorded_at", "text", run_where)
        try:
            _parse_recorded_at(recorded_at)
        except ValueError as error:
            raise _Problem(f"{run_where}: {error}") from None
        parsed.append(StoredRun(
            median_s=float(median), rounds=rounds, round_times_s=tuple(map(float, times)),
            memory_bytes=_field(run, "memory_bytes", "count", run_where, nullable=True),
            recorded_at=recorded_at, commit=commit, **stored_conditions_of(run, run_where),
        ))
    return tuple(parsed)


def _finite_positive_times(times: list[Any]) -> bool:
    """Whether every item is a number (not a bool) of seconds, finite and > 0; checked a list at a time, since an
    archive holds millions of round times (JSON has no NaN, but a literal like 1e999 reads as infinity)."""
    return set(map(type, times)) <= {float, int} and min(times) > 0 and max(times) < math.inf


def _optional_number(document: Mapping[str, Any], name: str, where: str) -> float | None:
    value = _field(document, name, "positive", where, nullable=True)
    return None if value is None else float(value)


def _verdict_of(document: Mapping[str, Any], where: str) -> ArchivedVerdict | None:
    if document.get("verdict") is None:
        return None
    verdict = _field(document, "verdict", "object", where)
    verdict_where = f"{where} verdict"
    status = _field(verdict, "status", "text", verdict_where)
    if status not in VERDICT_STATUSES:
        raise _Problem(f"{verdict_where}: status {status!r} is not one of {', '.join(VERDICT_STATUSES)}")
    floor = _field(verdict, "floor", "positive", verdict_where, nullable=True)
    return ArchivedVerdict(
        status=status,
        ratio=_optional_number(verdict, "ratio", verdict_where),
        ci_low=_optional_number(verdict, "ci_low", verdict_where),
        ci_high=_optional_number(verdict, "ci_high", verdict_where),
        floor=None if floor is None else float(floor),
        tolerance=float(_field(verdict, "tolerance", "fraction", verdict_where)),
        explanation=_explanation_of(verdict, verdict_where),
    )


def _explanation_of(verdict: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The lines of a verdict's explanation by the ops (none in files written before explanations were kept)."""
    lines = _field(verdict, "explanation", "list", where) if "explanation" in verdict else []
    if len(lines) > MAX_EXPLANATION_LINES or not all(isinstance(line, str) for line in lines):
        raise _Problem(f"{where}: 'explanation' must be a list of at most {MAX_EXPLANATION_LINES} lines of text")
    return tuple(lines)


def _archived_case(document: Any, index: int, device: str, commit: str | None) -> ArchivedCase:
    label = document.get("benchmark_id") if isinstance(document, dict) else None
    where = f"case {index}" + (f" ({label})" if isinstance(label, str) else "")
    if not isinstance(document, dict):
        raise _Problem(f"{where} is not an object")
    case = _case_of(document, where)
    if case.device != device:
        raise _Problem(f"{where} is a {case.device} case in a session of device {device}")
    threads = _field(document, "threads", "count", where, nullable=True)
    return ArchivedCase(
        case=case,
        config_digest=_field(document, "config_digest", "text", where),
        threads=threads,
        memory_figure=_field(document, "memory_figure", "text", where),
        samples_per_step=_field(document, "samples_per_step", "size", where),
        runs=_runs_of(document, commit, where),
        verdict=_verdict_of(document, where),
        figure=_figure_of(document, device, where),
    )


def _figure_of(document: Mapping[str, Any], device: str, where: str) -> str:
    # Files written before the figure was archived hold none: the device's figure of that time.
    if "figure" not in document:
        return figure_when_unstated(device)
    figure = _field(document, "figure", "text", where)
    if figure not in FIGURES:
        raise _Problem(f"{where}: 'figure' {figure!r} is not one of {', '.join(FIGURES)}")
    return str(figure)


def session_from_json(document: Any, path: Path | str) -> ArchivedSession:
    """Validate and parse an archive document read from `path` (named in errors).

    Raises BadFileError for another schema or version, or a missing or malformed field, naming the field.
    """
    remedy = _remedy(path)
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else None
        raise BadFileError(
            path, f"is not a perfsuite archive file (its \"schema\" is {found!r}, not {SCHEMA!r})",
            "Move it out of the archive folder, which holds only the files perfsuite writes there.",
        )
    version = document.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise BadFileError(
                path, f"has schema_version {version}, written by a newer perfsuite; this one reads "
                f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}",
                "Upgrade perfsuite to read it.",
            )
        raise BadFileError(path, f"has the unsupported schema_version {version!r}", remedy)
    try:
        where = "the session"
        device = _field(document, "device", "text", where)
        machine = _field(document, "machine", "object", where)
        if not all(isinstance(v, str) for v in machine.values()):
            raise _Problem("every value of 'machine' must be text")
        commit = _field(document, "commit", "text", where, nullable=True)
        cases = _field(document, "cases", "list", where)
        if not cases:
            raise _Problem("the session holds no cases")
        parsed = tuple(_archived_case(c, i, device, commit) for i, c in enumerate(cases))
        kind = _field(document, "kind", "text", where)
        if kind not in SESSION_KINDS:
            raise _Problem(f"'kind' {kind!r} is not one of {', '.join(SESSION_KINDS)}")
        conditions = document.get("conditions")
        return ArchivedSession(
            device=device, machine_slug=_field(document, "machine_slug", "text", where), machine=machine,
            recorded_at=_field(document, "recorded_at", "text", where), commit=commit,
            torch_version=_field(document, "torch_version", "text", where), kind=kind, cases=parsed,
            conditions=None if conditions is None else conditions_from_json(conditions, "the session"),
        )
    except (_Problem, ValueError) as problem:
        raise BadFileError(path, str(problem), remedy) from None


def read_session_file(path: Path | str) -> ArchivedSession:
    """The session in the archive file at `path`; raises BadFileError naming what is wrong and what to do."""
    return session_from_json(read_json_file(path, _remedy(path)), path)


# --- reading a whole archive --------------------------------------------------------------------------------

@dataclass(frozen=True)
class FileProblem:
    """A file that could not be used: `path`, what is wrong with it (`problem`) and what to do (`remedy`)."""

    path: Path
    problem: str
    remedy: str

    @classmethod
    def of(cls, error: BadFileError) -> FileProblem:
        """The problem a BadFileError describes."""
        return cls(error.path, error.problem, error.remedy)

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}. {self.remedy}"


@dataclass(frozen=True)
class ArchivedFile:
    """An archived session and the file it was read from."""

    path: Path
    session: ArchivedSession


@dataclass(frozen=True)
class ArchiveReading:
    """What `read_archive` found: the good sessions with their files, oldest first, and one problem per file it
    could not use."""

    files: tuple[ArchivedFile, ...]
    problems: tuple[FileProblem, ...]

    @property
    def sessions(self) -> tuple[ArchivedSession, ...]:
        """The good sessions, oldest first."""
        return tuple(f.session for f in self.files)


def read_archive(archive_dir: Path | str) -> ArchiveReading:
    """Every session under `archive_dir` (`<device>/<machine-slug>/*.json`), oldest first; never raises on a bad
    file. A file that cannot be read or parsed, lies outside that layout, sits in the folders of another device or
    machine than it names, or is a temporary file a killed writer left becomes a FileProblem instead."""
    root = Path(archive_dir)
    files: list[ArchivedFile] = []
    problems: list[FileProblem] = []
    if not root.is_dir():
        return ArchiveReading((), (FileProblem(root, "is not a folder", "Pass the archive folder."),))
    for path in sorted(p for p in root.rglob("*") if not p.is_dir()):
        relative = path.relative_to(root)
        if path.name.startswith("."):
            if path.name.endswith(".tmp"):
                problems.append(FileProblem(
                    path, "is a temporary file left by a recording that was stopped before it finished",
                    "Delete it; the session it was writing was not archived.",
                ))
            # Other hidden files (.DS_Store, .gitkeep) belong to tools, not to the archive.
            continue
        if not path.is_file():
            problems.append(FileProblem(
                path, "is not a regular file (a device, a pipe, a socket or a broken link)",
                "Remove it from the archive folder.",
            ))
            continue
        if len(relative.parts) != 3 or path.suffix != ".json":
            problems.append(FileProblem(
                path, "is not where archive files lie (<device>/<machine>/<name>.json under the archive folder)",
                "Move it out of the archive folder.",
            ))
            continue
        try:
            session = read_session_file(path)
        except BadFileError as error:
            problems.append(FileProblem.of(error))
            continue
        device_folder, machine_folder = relative.parts[:2]
        if (device_folder, machine_folder) != (session.device, session.machine_slug):
            problems.append(FileProblem(
                path, f"holds a session of {session.device} on {session.machine_slug} but lies in "
                f"{device_folder}/{machine_folder}/",
                f"Move it to {session.device}/{session.machine_slug}/ of the archive folder.",
            ))
            continue
        files.append(ArchivedFile(path, session))
    files.sort(key=lambda f: (f.session.recorded_at, f.session.device, f.session.machine_slug, f.path.name))
    return ArchiveReading(tuple(files), tuple(problems))


# --- writing --------------------------------------------------------------------------------------------------

def session_file_name(session: ArchivedSession, random_part: str) -> str:
    """`<UTC stamp>-<commit or nocommit>-<random_part>.json`, e.g. `20261202T160315Z-3d7a4eb-5f0c1a.json`."""
    stamp = _parse_recorded_at(session.recorded_at).strftime(FILE_STAMP_FORMAT)
    commit = re.sub(r"[^A-Za-z0-9]+", "-", session.commit or NO_COMMIT).strip("-")[:40] or NO_COMMIT
    return f"{stamp}-{commit}-{random_part}.json"


def write_session(archive_dir: Path | str, session: ArchivedSession) -> Path:
    """Archive `session` as a new file under `archive_dir` (`<baseline_dir>/archive`) and return its path.

    The file is `<device>/<machine_slug>/<UTC stamp>-<commit>-<random>.json`, written by the store's append-only
    writer (`perfsuite.store.files.write_new_text_atomically`): a temporary file in the same folder, fsynced, then
    linked to its name, which fails rather than replace anything already there (a file, or a symlink to anything,
    /dev/null included); on a taken name another random part is drawn. A failure (a read-only folder, a full disk)
    raises OSError and leaves no file behind, temporary or final.

    A recording session calls it once per device (`--perf-update-baseline`: kind `update`, `--perf-rebaseline`:
    kind `rebaseline`), with the same runs the baseline store was given.
    """
    folder = Path(archive_dir) / session.device / session.machine_slug
    # Compact: a session file is written once and read by programs (`python -m json.tool FILE` shows it indented).
    # ASCII: a lone surrogate (from undecodable bytes in a commit or machine name) stays a `\\uXXXX` escape.
    text = json.dumps(session_to_json(session), separators=(",", ":"), sort_keys=True, allow_nan=False)
    return write_new_text_atomically(
        folder, lambda: session_file_name(session, secrets.token_hex(3)), text + "\n", attempts=_NEW_NAME_ATTEMPTS,
    )
