"""What the site is built from: baseline folders and files, archives and files of published figures, read without
ever raising on a bad file.

A folder is read as the baseline store lays it out: `<folder>/<device>/<machine>.json` are baseline files,
`<folder>/reference/*.json` published figures (each read as what its "schema" says it is), and `<folder>/archive/`
the archive; a folder named `archive` is read as an archive. A JSON file in the folder itself is read when its
schema is one of those (a device folder given alone) and listed as not read otherwise (e.g. the MPS fallback
allowlist beside the device folders). A file given is read as what its schema says. A file that cannot be used,
and an entry of a baseline file that cannot (the other entries still count), becomes a FileProblem naming the
file, what is wrong and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.analyse.compare import PUBLISHED_SCHEMA
from perfsuite.errors import BadFileError
from perfsuite.records import BaselineEntry
from perfsuite.site.history import BaselineSource
from perfsuite.store import archive
from perfsuite.store.archive import ARCHIVE_FOLDER, ArchivedFile, FileProblem
from perfsuite.store.baselines import BAD_BASELINE_REMEDY, BaselineFile, baseline_from_json
from perfsuite.store.baselines import SCHEMA as BASELINE_SCHEMA
from perfsuite.store.jsonfile import read_json_file

# The store renames an unreadable baseline to <name>.bad-<UTC time>.json before recording afresh.
MOVED_ASIDE = re.compile(r"\.bad-[0-9TZ]+\.json$")
WHAT_TO_PASS = (
    "Pass a baseline folder (e.g. baselines/, which holds <device>/<machine>.json and archive/), a baseline file, "
    "an archive folder or file, or a file of published figures"
)


@dataclass(frozen=True)
class SkippedFile:
    """A file found in a folder that is not a history by where it lies, and why it was not read."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Sources:
    """Everything read: archived sessions, baseline files (their good entries), files of published figures,
    problems, and the files found but not read (with why)."""

    archived: tuple[ArchivedFile, ...]
    baselines: tuple[BaselineSource, ...]
    references: tuple[Path, ...]
    problems: tuple[FileProblem, ...]
    skipped: tuple[SkippedFile, ...]


def read_sources(inputs: Sequence[Path]) -> Sources:
    """Read every HISTORY input (folders and files, see the module docstring); each file once, however often it
    is named. Never raises on a bad file."""
    archived: list[ArchivedFile] = []
    baselines: list[BaselineSource] = []
    references: list[Path] = []
    problems: list[FileProblem] = []
    skipped: list[SkippedFile] = []
    seen: set[Path] = set()

    def read_file(path: Path, remedy: str = f"{WHAT_TO_PASS}.", other_schema_skipped: bool = False) -> None:
        if path.resolve() in seen:
            return
        seen.add(path.resolve())
        if MOVED_ASIDE.search(path.name):
            skipped.append(SkippedFile(path, "a bad baseline that --perf-rebaseline moved aside"))
            return
        if not path.is_file():
            # Reading a pipe or a device would never end.
            problems.append(FileProblem(path, "is not a regular file (a device, a pipe or a broken link)", remedy))
            return
        try:
            document = read_json_file(path, remedy)
        except BadFileError as error:
            problems.append(FileProblem.of(error))
            return
        schema = document.get("schema") if isinstance(document, dict) else None
        if schema == BASELINE_SCHEMA:
            source, found = baseline_source(path, document)
            problems.extend(found)
            if source is not None:
                baselines.append(source)
        elif schema == archive.SCHEMA:
            try:
                archived.append(ArchivedFile(path, archive.session_from_json(document, path)))
            except BadFileError as error:
                problems.append(FileProblem.of(error))
        elif schema == PUBLISHED_SCHEMA:
            references.append(path)
        elif other_schema_skipped:
            skipped.append(SkippedFile(path, f"not a history: its \"schema\" is {schema!r}"))
        else:
            problems.append(FileProblem(
                path, f"is not a history: its \"schema\" is {schema!r}, not {BASELINE_SCHEMA!r}, "
                f"{archive.SCHEMA!r} or {PUBLISHED_SCHEMA!r}", remedy,
            ))

    def read_archive_folder(folder: Path) -> None:
        if folder.resolve() in seen:
            return
        seen.add(folder.resolve())
        reading = archive.read_archive(folder)
        archived.extend(reading.files)
        problems.extend(reading.problems)

    for given in inputs:
        if given.is_file():
            read_file(given)
        elif not given.is_dir():
            problems.append(FileProblem(given, "no such file or folder", f"{WHAT_TO_PASS}."))
        elif given.name == ARCHIVE_FOLDER:
            read_archive_folder(given)
        else:
            for child in _visible(given.iterdir()):
                if child.is_dir() and child.name == ARCHIVE_FOLDER:
                    read_archive_folder(child)
                elif child.is_dir():
                    for path in _visible(child.glob("*.json")):
                        read_file(path, BAD_BASELINE_REMEDY.replace("FILE", str(path)))
                elif child.suffix == ".json":
                    # A device folder given itself, or a file beside the device folders (e.g. an allowlist).
                    read_file(child, other_schema_skipped=True)
    return Sources(tuple(archived), tuple(baselines), tuple(references), tuple(problems), tuple(skipped))


def _visible(paths: Iterable[Path]) -> list[Path]:
    return sorted(p for p in paths if not p.name.startswith("."))


def baseline_source(path: Path, document: dict[str, Any]) -> tuple[BaselineSource | None, list[FileProblem]]:
    """The entries of a baseline document that pass the store's validation, checked one at a time, and a problem
    for each that does not; (None, [problem]) when the file as a whole is not a usable baseline."""
    entries = document.get("entries")
    try:
        empty = baseline_from_json({**document, "entries": {} if isinstance(entries, dict) else entries}, path)
    except BadFileError as error:
        return None, [FileProblem.of(error)]
    assert isinstance(entries, dict)  # baseline_from_json refused anything else
    good: dict[str, BaselineEntry] = {}
    problems: list[FileProblem] = []
    for benchmark_id, entry in entries.items():
        try:
            good.update(baseline_from_json({**document, "entries": {benchmark_id: entry}}, path).entries)
        except BadFileError as error:
            problems.append(FileProblem(
                error.path, f"{error.problem} (this entry is left out; the file's other entries are shown)",
                BAD_BASELINE_REMEDY.replace("FILE", str(path)),
            ))
    machine = path.stem
    return BaselineSource(path, machine, BaselineFile(empty.device, good, empty.schema_version)), problems
