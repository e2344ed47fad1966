"""The process as the unit: each case of a plan measured in K fresh worker processes, interleaved across cases.

`measure_in_processes` carries out a `SessionPlan` (its passes, and which cases share a process) with worker
processes (`perfsuite.run.worker`, started and asked to measure each case by `perfsuite.run.workers.Workers`) and
collects every process's outcome per case. A case's FLOPs, a fact of the
case, are counted by the first process that measures it and carried to its later runs: counting them costs a small
case's process a second or more (torch imports its compiler for the counter's dispatch mode). A case that ran out of
memory, or cannot run here, is not tried again in later passes. A worker that dies takes only the case it was
measuring with it: that case gets a `crashed` failure with the end of the worker's output, and the cases after it
are measured in a new process.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from perfsuite.records import Case, Failure, Outcome, ProcessProgress, Run
from perfsuite.run.measure import crashed
from perfsuite.run.plan import SessionPlan
from perfsuite.run.steps import FLOP_FACTS
from perfsuite.run.wire import WorkerSpec, outcome_from_json
from perfsuite.run.workers import WorkerGone, Workers

# How long one case may take in a worker before the worker is stopped and the case called crashed.
WORKER_TIMEOUT_S = 3600.0
WORKER_FOLDER_PREFIX = "perfsuite-worker-"


class Interrupted(Exception):
    """The session was interrupted while processes measured; `outcomes` holds what every process reported before."""

    def __init__(self, outcomes: dict[str, list[Outcome]]) -> None:
        super().__init__("interrupted")
        self.outcomes = outcomes


def measure_in_processes(
    plan: SessionPlan, progress: Callable[[ProcessProgress], None] = lambda line: None,
) -> dict[str, list[Outcome]]:
    """Every process's outcome of each case of `plan`, by benchmark id, in the order the processes ran.

    An interrupt (Ctrl-C) raises `Interrupted` holding the outcomes reported before it.
    """
    outcomes: dict[str, list[Outcome]] = {case.benchmark_id: [] for case in plan.cases}
    counted: dict[str, Run] = {}  # the run that counted each case's FLOPs
    total = plan.processes * len(plan.cases)
    done = 0
    start_s = time.perf_counter()
    try:
        for pass_index, pass_cases in enumerate(plan.passes(), start=1):
            todo = [case for case in pass_cases if not _stopped(outcomes[case.benchmark_id])]
            for batch in plan.worker_batches(todo):
                counting = {case.benchmark_id for case in batch} - counted.keys()
                for case, outcome in run_worker(plan, batch, counting):
                    if isinstance(outcome, Run) and case.benchmark_id in counting:
                        counted[case.benchmark_id] = outcome
                    elif isinstance(outcome, Run) and case.benchmark_id in counted:
                        outcome = with_flops_of(outcome, counted[case.benchmark_id])
                    outcomes[case.benchmark_id].append(outcome)
                    done += 1
                    progress(ProcessProgress(
                        pass_index, plan.processes, case.benchmark_id, done, total, time.perf_counter() - start_s,
                    ))
    except KeyboardInterrupt:
        raise Interrupted(outcomes) from None
    return outcomes


def _stopped(outcomes: Sequence[Outcome]) -> bool:
    # Out of memory or impossible here: later passes would meet the same.
    return any(isinstance(outcome, Failure) and outcome.skips for outcome in outcomes)


def with_flops_of(run: Run, counted: Run) -> Run:
    """`run`, measured without counting FLOPs, with the count (and its facts) of `counted`, a run of the same case
    that counted them; unchanged where the two ran different configs or torch releases (then not the same ops)."""
    if (run.config_digest, run.torch_version) != (counted.config_digest, counted.torch_version):
        return run
    count_facts = {key: value for key, value in counted.facts.items() if key in FLOP_FACTS}
    return replace(run, flops_per_step=counted.flops_per_step, facts={**run.facts, **count_facts})


def gate_spec(plan: SessionPlan, fresh_process: bool) -> WorkerSpec:
    """What a gate worker is started with to measure cases as `plan` says; `fresh_process` when it measures one case
    only (its memory figure is then the case's own)."""
    return WorkerSpec(replace(plan.measure, fresh_process=fresh_process), plan.rounds, plan.threads, plan.sys_path,
                      plan.workload_sources)


def run_worker(
    plan: SessionPlan, batch: Sequence[Case], count_flops_of: Collection[str] = (),
) -> list[tuple[Case, Outcome]]:
    """Measure `batch` in a fresh worker process, a case per request, counting the FLOPs of the cases whose benchmark
    ids are in `count_flops_of` (where the plan counts them); a case whose worker died (or gave no answer within
    WORKER_TIMEOUT_S) gets a `crashed` failure, and the cases after it go to a new process. An interrupt (Ctrl-C)
    kills the worker at once."""
    results: list[tuple[Case, Outcome]] = []
    with worker_folder() as folder:
        workers = Workers(folder, WORKER_TIMEOUT_S)
        worker = None
        stopping = True
        try:
            for index, case in enumerate(batch):
                if worker is None:
                    worker = workers.start(gate_spec(plan, fresh_process=len(batch) - index == 1))
                counts = plan.measure.count_flops and case.benchmark_id in count_flops_of
                try:
                    reply = worker.request({"op": "measure", "case": asdict(case), "count_flops": counts})
                    outcome = outcome_from_json(reply["outcome"])
                except WorkerGone as gone:
                    workers.stop(worker, at_once=True)
                    worker = None
                    tail = gone.output_tail
                    if not gone.what.startswith(("exited", "is gone")):  # stopped: no answer in time, or a garbled one
                        tail = f"{tail}\n({gone.what})"
                    outcome = crashed(case, -1 if gone.exit_status is None else gone.exit_status, tail.strip())
                results.append((case, outcome))
            stopping = False
        finally:
            workers.stop_all(at_once=stopping)
    return results


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
