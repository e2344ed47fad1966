"""Rank 0 of a `train-ddp` case: the pytest process, which starts the worker ranks and times the steps."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from datetime import timedelta
from typing import IO, Any

import torch
import torch.distributed as dist

from perfsuite.records import Case
from perfsuite.run.ddp.plan import threads_per_process
from perfsuite.run.ddp.ranks import (
    CHECKSUM,
    DEFAULT_TIMEOUT_S,
    JOIN_TIMEOUT_S,
    LIVENESS_POLL_S,
    STDERR_TAIL_LINES,
    STEP,
    STOP,
    WORKER_FAILURE_GRACE_S,
    RankState,
    build_module_and_data,
    error_key,
    exit_description,
    gather_checksums,
    loopback_store,
    nccl_timeout_spares_this_process,
    ready_key,
    stop_workers,
    synchronize_rank,
    wrap_in_ddp,
)
from perfsuite.run.ddp.worker import WORKER_CODE
from perfsuite.run.devices import backend
from perfsuite.run.steps import PreparedCase, config_digest
from perfsuite.workloads import Workload
from perfsuite.workloads.sources import workload_sources


class DistributedWorkerError(RuntimeError):
    """A worker rank of a `train-ddp` case failed; the message names the rank and its error.

    A RuntimeError, so that a worker running out of memory ("... out of memory ...") is handled like rank
    0 running out of memory.
    """


# Rank 0: the pytest process.


def prepare_ddp_case(case: Case, workload: Workload, processes: int | None = None) -> PreparedCase:
    """Start the ranks of a `train-ddp` case and return it ready to time from rank 0 (this process).

    `processes` defaults to PERFSUITE_DDP_PROCESSES, else one per CUDA GPU or two on the CPU. The batch
    size is per process: a step processes `batch_size * processes` samples. Call `close()` to stop the
    workers.
    """
    return DdpTraining.start(case, workload, processes).as_prepared_case()


class DdpTraining:
    """The ranks of one `train-ddp` case, seen from rank 0: `step()` runs one step on every rank,
    `close()` stops them. Use `start` to make one."""

    def __init__(self, case: Case, processes: int, ddp_backend: str, store: dist.TCPStore) -> None:
        self.case = case
        self.processes = processes
        self.backend = ddp_backend
        self.parameter_count = 0
        self.config_digest = ""
        self.facts: dict[str, Any] = {}
        self._store: dist.TCPStore | None = store
        self._workers: list[subprocess.Popen] = []
        self._logs: list[IO[bytes]] = []
        self._rank: RankState | None = None
        self._healthy = True
        self._closed = False
        self._stopping = threading.Event()
        self._worker_exited = threading.Event()
        self._monitor: threading.Thread | None = None
        self._threads_before: int | None = None
        flag_device = backend(case.device).rank_device(0)
        self._flags = {
            command: torch.tensor([command], dtype=torch.int64, device=flag_device)
            for command in (STEP, STOP, CHECKSUM)
        }

    @classmethod
    def start(
        cls, case: Case, workload: Workload, processes: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> DdpTraining:
        """Start `processes - 1` workers, join them as rank 0 and wrap every rank's module in DDP."""
        device = backend(case.device)
        visible = device.count()
        processes = processes or device.ddp_default_processes(visible)
        reason = device.ddp_unusable(processes, visible)
        if reason or device.ddp_backend is None:
            raise ValueError(f"{case.benchmark_id} cannot run: {reason}; run train-ddp on cuda or cpu")
        if dist.is_initialized():
            raise RuntimeError(
                f"{case.benchmark_id}: this process already belongs to a torch.distributed process group; "
                "train-ddp starts its own, so run perfsuite without torchrun or another launcher"
            )
        ddp_backend = device.ddp_backend
        store = loopback_store(processes, timeout_s)
        training = cls(case, processes, ddp_backend, store)
        try:
            training._start(workload, timeout_s)
        except Exception as error:
            worker_error = training._worker_failure(grace_s=WORKER_FAILURE_GRACE_S)
            training._healthy = False
            training.close()
            if worker_error is not None and not isinstance(error, DistributedWorkerError):
                raise worker_error from error
            raise
        except BaseException:
            training._healthy = False
            training.close()
            raise
        return training

    def as_prepared_case(self) -> PreparedCase:
        """The case as the runner times it: `step` as its step, `close` as its close."""
        return PreparedCase(
            self.case,
            self.step,
            self.parameter_count,
            self.config_digest,
            close=self.close,
            samples_per_step=self.case.batch_size * self.processes,
            extra_facts=self.facts,
        )

    @property
    def store_port(self) -> int:
        """The port of the rendezvous store, which listens on 127.0.0.1 only."""
        return self._open_store().port

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker ranks 1..N-1."""
        return [worker.pid for worker in self._workers]

    def step(self) -> torch.Tensor:
        """One training step on every rank, finished on this rank's device when it returns; returns rank 0's
        loss."""
        if self._closed or not self._healthy:
            raise RuntimeError(f"{self.case.benchmark_id}: the DDP ranks are stopped (closed, or an earlier failure)")
        try:
            dist.broadcast(self._flags[STEP], src=0)
            loss = self._started_rank().train_step()
            # On CUDA the step is only queued; waiting here lets a failed all-reduce surface as this step's
            # error. The runner's own synchronisation after it then costs nothing.
            synchronize_rank(self.case.device)
            if self._worker_exited.is_set():
                raise RuntimeError("a worker process exited during the step")
            return loss
        except Exception as error:
            self._healthy = False
            worker_error = self._worker_failure(grace_s=WORKER_FAILURE_GRACE_S)
            if worker_error is not None:
                raise worker_error from error
            raise

    def parameter_checksums(self) -> list[tuple[float, float]]:
        """(sum, sum of squares) of every rank's parameters, in float64, by rank: equal tuples mean the
        ranks hold the same weights. A check for tests and debugging, not part of a timed step."""
        dist.broadcast(self._flags[CHECKSUM], src=0)
        gathered = gather_checksums(self._started_rank().module, self.processes)
        return [(float(c[0]), float(c[1])) for c in gathered]

    def close(self) -> None:
        """Stop the workers (killing any that do not exit in time), leave the process group and restore
        this process's CPU threads. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        if self._healthy and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.broadcast(self._flags[STOP], src=0)
                synchronize_rank(self.case.device)
        stop_workers(self._workers, JOIN_TIMEOUT_S if self._healthy else 0.0)
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
        for log in self._logs:
            log.close()
        if self._threads_before is not None:
            torch.set_num_threads(self._threads_before)
        self._rank = None
        self._store = None

    def _started_rank(self) -> RankState:
        if self._rank is None:
            raise RuntimeError(f"{self.case.benchmark_id}: the DDP ranks are not started, or already closed")
        return self._rank

    def _open_store(self) -> dist.TCPStore:
        if self._store is None:
            raise RuntimeError(f"{self.case.benchmark_id}: the DDP store is closed")
        return self._store

    def _start(self, workload: Workload, timeout_s: float) -> None:
        store = self._open_store()
        threads = None
        if not backend(self.case.device).is_accelerator:  # ranks share the CPU's threads
            threads = threads_per_process(torch.get_num_threads(), self.processes)
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(threads)
        spec = {
            "case": dataclasses.asdict(self.case),
            "workload": workload.name,
            "workload_sources": workload_sources(workload),
            "world_size": self.processes,
            "store_port": store.port,
            "backend": self.backend,
            "timeout_s": timeout_s,
            "threads": threads,
            "sys_path": [p for p in sys.path if isinstance(p, str)],
            "parent_pid": os.getpid(),
        }
        for rank in range(1, self.processes):
            self._spawn_worker({**spec, "rank": rank}, threads)
        # Killed at interpreter exit if close() never ran (an interrupted session).
        weakref.finalize(self, stop_workers, self._workers, 0.0)
        backend(self.case.device).use_rank_device(0)
        module, inputs, target = build_module_and_data(self.case, workload, rank=0)
        self.parameter_count = sum(p.numel() for p in module.parameters())
        # The process count is part of the configuration: a baseline of 8 GPUs is not one of 4.
        self.config_digest = config_digest(f"{workload.name} ddp x{self.processes}", module, inputs)
        self._wait_for_workers_ready(timeout_s)
        with nccl_timeout_spares_this_process(self.backend):
            dist.init_process_group(
                self.backend, store=store, rank=0, world_size=self.processes,
                timeout=timedelta(seconds=timeout_s),
            )
        self._rank = wrap_in_ddp(self.case, workload, module, inputs, target, rank=0)
        self.facts = {
            "processes": self.processes,
            "backend": self.backend,
            "global_batch_size": self.case.batch_size * self.processes,
        }
        if threads is not None:
            self.facts["threads_per_process"] = threads
        self._monitor = threading.Thread(target=self._watch_workers, name="perfsuite-ddp-monitor", daemon=True)
        self._monitor.start()

    def _spawn_worker(self, spec: dict[str, Any], threads: int | None) -> None:
        # Three of the variables torchrun sets, for workloads that ask which rank they are; the rendezvous
        # itself goes through the store, whose port travels in the spec.
        rank = str(spec["rank"])
        env = {**os.environ, "RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": str(self.processes)}
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(threads)
        log = tempfile.TemporaryFile()
        self._logs.append(log)
        self._workers.append(subprocess.Popen(
            [sys.executable, "-c", WORKER_CODE, json.dumps(spec)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
        ))

    def _wait_for_workers_ready(self, timeout_s: float) -> None:
        keys = [ready_key(rank) for rank in range(1, self.processes)]
        deadline = time.monotonic() + timeout_s
        store = self._open_store()
        while not store.check(keys):
            failure = self._worker_failure(grace_s=0.0)
            if failure is not None:
                raise failure
            if time.monotonic() > deadline:
                waiting = [rank for rank in range(1, self.processes) if not store.check([ready_key(rank)])]
                raise DistributedWorkerError(
                    f"{self.case.benchmark_id}: train-ddp rank(s) {waiting} did not finish building the model "
                    f"within {timeout_s:.0f} s; they are alive but stuck or very slow"
                )
            time.sleep(LIVENESS_POLL_S)

    def _watch_workers(self) -> None:
        # A blocked gloo collective fails by itself when a peer's socket closes; an nccl one waits on the
        # GPU until the timeout, so a dead worker aborts the communicator to free rank 0 at once.
        while not self._stopping.wait(LIVENESS_POLL_S):
            if any(worker.poll() is not None for worker in self._workers):
                self._worker_exited.set()
                if self.backend == "nccl" and not self._stopping.is_set():
                    with contextlib.suppress(Exception):
                        dist.distributed_c10d._get_default_group().abort()
                return

    def _worker_failure(self, grace_s: float) -> DistributedWorkerError | None:
        """The failed workers' error, waiting up to `grace_s` for one to show; None if none failed.

        The rank that reported first is named as the cause: when one rank fails, the others report the
        connection it left behind."""
        deadline = time.monotonic() + grace_s
        ranks = range(1, self.processes)
        while True:
            reports = sorted(report for rank in ranks if (report := self._reported_error(rank)) is not None)
            if reports:
                _, rank, text = reports[0]
                also = f"\n(then rank(s) {', '.join(str(r[1]) for r in reports[1:])} failed too)" if reports[1:] else ""
                return DistributedWorkerError(
                    f"{self.case.benchmark_id}: train-ddp rank {rank} of {self.processes} failed {text}{also}"
                )
            for rank, worker in zip(ranks, self._workers, strict=False):  # fewer if a start failed
                code = worker.poll()
                if code is not None:
                    return DistributedWorkerError(
                        f"{self.case.benchmark_id}: train-ddp rank {rank} of {self.processes} exited with "
                        f"{exit_description(code)} without reporting an error; its last output:\n"
                        f"{self._log_tail(rank)}"
                    )
            if time.monotonic() >= deadline:
                return None
            time.sleep(LIVENESS_POLL_S)

    def _reported_error(self, rank: int) -> tuple[float, int, str] | None:
        """(time reported, rank, what failed) from the store, or None."""
        try:
            store = self._open_store()
            if not store.check([error_key(rank)]):
                return None
            report = json.loads(store.get(error_key(rank)))
        except Exception:  # the store may be gone while closing
            return None
        return float(report["time_s"]), rank, str(report["text"])

    def _log_tail(self, rank: int) -> str:
        log = self._logs[rank - 1]
        log.seek(0)
        lines = log.read().decode(errors="replace").splitlines()
        return "\n".join(lines[-STDERR_TAIL_LINES:]) or "(no output)"


