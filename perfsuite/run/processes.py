"""The process as the unit: each case measured in K fresh worker processes, interleaved across cases.

`plan_passes` (pure) makes K passes over the cases, each in its own shuffled order, so a slow spell of the
machine lands on many cases a little rather than on one case wholly. `measure_in_processes` runs them: with
`isolation="case"` every case of every pass gets a fresh process (clean memory figures, a crash or an abort
takes one case with it), with `isolation="pass"` one process measures a whole pass (torch, transformers and
diffusers are imported once per pass; the memory figure of a CPU case is then not its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfsuite.records import Case, Run
from perfsuite.render.progress import remaining_s
from perfsuite.store.runs import run_from_json

Isolation = Literal["case", "pass"]
ISOLATIONS: tuple[Isolation, ...] = ("case", "pass")
WORKER_TIMEOUT_S = 3600.0
WORKER_FOLDER_PREFIX = "perfsuite-worker-"
_STDERR_TAIL_CHARACTERS = 1500


@dataclass(frozen=True)
class RoundSettings:
    """pytest-benchmark's round settings, handed to each worker: at least `min_rounds` rounds, rounds until
    `max_time_s` has passed, each round at least `min_time_s` long."""

    min_rounds: int = 5
    max_time_s: float = 1.0
    min_time_s: float = 5e-6


@dataclass
class CaseOutcome:
    """What the processes made of one case: its runs, the out-of-memory message that stopped it, why it cannot
    run here (`skipped`), or errors."""

    runs: list[Run] = field(default_factory=list)
    out_of_memory: str | None = None
    skipped: str | None = None
    errors: list[str] = field(default_factory=list)


def plan_passes(cases: Sequence[Case], processes: int, seed: int) -> list[list[Case]]:
    """`processes` passes over `cases`, each in an order shuffled by `seed` and the pass number."""
    passes = []
    for index in range(processes):
        order = list(cases)
        random.Random(seed * 1000 + index).shuffle(order)
        passes.append(order)
    return passes


def worker_batches(pass_cases: Sequence[Case], isolation: Isolation) -> list[list[Case]]:
    """The processes of one pass: a process per case, or one process for the whole pass."""
    return [[case] for case in pass_cases] if isolation == "case" else [list(pass_cases)]


def measure_in_processes(
    cases: Sequence[Case],
    processes: int,
    isolation: Isolation,
    spec: Mapping[str, Any],
    seed: int = 0,
    progress: Callable[[str], None] = print,
) -> dict[str, CaseOutcome]:
    """Measure every case in `processes` passes of fresh worker processes; outcomes by benchmark id.

    `spec` holds what every worker needs besides its cases (warm-up, threads, ddp processes, round settings as
    `benchmark`, workload sources, sys_path). A case that ran out of memory, or cannot run here, is not tried again
    in later passes.
    """
    outcomes = {case.benchmark_id: CaseOutcome() for case in cases}
    passes = plan_passes(cases, processes, seed)
    total = processes * len(cases)
    done = 0
    start_s = time.perf_counter()
    for pass_index, pass_cases in enumerate(passes, start=1):
        todo = [
            c for c in pass_cases
            if outcomes[c.benchmark_id].out_of_memory is None and outcomes[c.benchmark_id].skipped is None
        ]
        for batch in worker_batches(todo, isolation):
            for line in run_worker(batch, spec):
                outcome = outcomes[line["benchmark_id"]]
                if line.get("run") is not None:
                    outcome.runs.append(run_from_json(line["run"]))
                elif "out_of_memory" in line:
                    outcome.out_of_memory = line["out_of_memory"]
                elif "skipped" in line:
                    outcome.skipped = line["skipped"]
                elif "error" in line:
                    outcome.errors.append(line["error"])
                done += 1
                left = remaining_s(time.perf_counter() - start_s, done, total)
                shown = "" if left is None else f", about {left:.0f} s left"
                progress(f"perfsuite: process {pass_index}/{processes} measured {line['benchmark_id']} "
                         f"({done}/{total}{shown})")
    return outcomes


def run_worker(batch: Sequence[Case], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run one worker process over `batch`; one line per case. A case the worker did not reach (it crashed or
    aborted) gets an error line with the exit status and the end of its output, and the cases after it are
    measured in a new process."""
    lines: list[dict[str, Any]] = []
    todo = list(batch)
    while todo:
        with worker_folder() as folder:
            spec_path, out_path = folder / "spec.json", folder / "out.jsonl"
            spec_path.write_text(json.dumps({**spec, "cases": [asdict(c) for c in todo]}), encoding="utf-8")
            completed = subprocess.run(
                [sys.executable, "-m", "perfsuite.run.worker", str(spec_path), str(out_path)],
                capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            text = out_path.read_text(encoding="utf-8") if out_path.exists() else ""
            written = [json.loads(line) for line in text.splitlines()]
        lines += written
        todo = todo[len(written):]
        if todo:
            tail = (completed.stdout + completed.stderr).strip()[-_STDERR_TAIL_CHARACTERS:]
            lines.append({
                "benchmark_id": todo[0].benchmark_id,
                "error": f"the worker process exited with status {completed.returncode} while measuring this case: "
                         f"{tail}",
            })
            todo = todo[1:]
    return lines


@contextlib.contextmanager
def worker_folder() -> Iterator[Path]:
    """A fresh temporary folder for one worker's spec and output, removed when the block ends.

    It is named after this process (`perfsuite-worker-<pid>-<random>`): a session killed -9 runs no clean-up, so
    before each new folder the folders of processes that are gone are removed.
    """
    remove_orphaned_worker_folders(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=f"{WORKER_FOLDER_PREFIX}{os.getpid()}-") as folder:
        yield Path(folder)


def remove_orphaned_worker_folders(root: Path) -> None:
    """Remove this user's worker folders under `root` whose session process no longer exists."""
    pattern = re.compile(rf"{re.escape(WORKER_FOLDER_PREFIX)}(\d+)-.+")
    for folder in root.glob(f"{WORKER_FOLDER_PREFIX}*-*"):
        match = pattern.fullmatch(folder.name)
        if match is None or _process_exists(int(match[1])):
            continue
        with contextlib.suppress(OSError):
            status = folder.lstat()
            if folder.is_dir() and not folder.is_symlink() and status.st_uid == os.getuid():
                shutil.rmtree(folder)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
