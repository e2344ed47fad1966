"""`train-ddp`: training with DistributedDataParallel over several processes, timed from rank 0.

pytest-benchmark times rounds in the pytest process, so that process is rank 0. It starts the other
ranks as worker processes (`python -c ...`, never a fork: CUDA cannot be forked), and every rank builds
the same module (same seed, so DDP's initial broadcast changes nothing) with its own inputs (seeded by
rank, as a data loader with a distributed sampler would give), wraps it in DistributedDataParallel
(nccl with one GPU per rank on CUDA, gloo on the CPU) and composes the same step as `train`
(`perfsuite.run.steps.make_train_step`).

Workers loop on a command from rank 0: before each of its steps rank 0 broadcasts "step", so one timed
round on rank 0 is one DDP step of every rank (the gradient all-reduce keeps them in lockstep). `close()`
broadcasts "stop", joins the workers (killing any that do not exit in time) and destroys the process
group. A worker that fails writes its error to the rendezvous store and exits; rank 0 raises
`DistributedWorkerError` naming the rank and the error, and never waits forever: collectives have a
timeout, worker liveness is watched, and on nccl a dead worker aborts the communicator.

The pure functions at the top decide how many processes run, whether a case can run here, and the
scaling efficiency of the results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import IO, Any

import pandas as pd
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from perfsuite.matrix.cases import Case, UsageError
from perfsuite.run.steps import PreparedCase, config_digest, make_train_step, to_device
from perfsuite.workloads import Workload, registered_workloads
from perfsuite.workloads.random_weights import materialize_random_weights

PROCESSES_ENV = "PERFSUITE_DDP_PROCESSES"
MPS_SKIP_REASON = (
    "one device: DDP needs several processes with one device each; MPS has one GPU and no nccl/gloo GPU backend"
)
# Longest wait of one collective, or of the workers' start-up; a rank that takes longer is reported as stuck.
DEFAULT_TIMEOUT_S = 300.0
# Longest wait for workers to exit after "stop" before they are killed.
JOIN_TIMEOUT_S = 30.0
# After a failed step, how long rank 0 waits for a worker's failure to show before blaming itself.
WORKER_FAILURE_GRACE_S = 2.0
MODULE_SEED = 0
SCALING_KEYS = ("device", "dtype", "model", "batch_size", "profile")

_STEP, _STOP, _CHECKSUM = 1, 0, 2
_HOST = "127.0.0.1"
_LIVENESS_POLL_S = 0.05
_STDERR_TAIL_LINES = 20


class DistributedWorkerError(RuntimeError):
    """A worker rank of a `train-ddp` case failed; the message names the rank and its error.

    A RuntimeError, so that a worker running out of memory ("... out of memory ...") is handled like rank
    0 running out of memory.
    """


# Decisions: pure functions.


def default_processes(device: str, device_count: int) -> int:
    """Processes of a `train-ddp` case when the user sets none: one per CUDA GPU (at least one: DDP in
    one process on one GPU measures DDP's own overhead), two on the CPU."""
    if device == "cuda":
        return max(1, device_count)
    return 2


def ddp_processes(device: str, device_count: int, configured: str | None) -> int:
    """The number of `train-ddp` processes: `configured` (the value of PERFSUITE_DDP_PROCESSES, which
    --perf-ddp-processes sets) when given, else `default_processes`. Raises UsageError for a value that
    is not a positive integer."""
    if configured is None or not str(configured).strip():
        return default_processes(device, device_count)
    try:
        processes = int(str(configured).strip())
    except ValueError:
        processes = 0
    if processes < 1:
        raise UsageError(
            f"--perf-ddp-processes ({PROCESSES_ENV}): {configured!r} is not a positive integer; "
            "give the number of processes of a train-ddp case, e.g. 2"
        )
    return processes


def ddp_skip_reason(device: str, processes: int, device_count: int) -> str | None:
    """Why a `train-ddp` case with `processes` processes cannot run on `device`, of which this machine
    has `device_count`; None when it can."""
    if device == "mps":
        return MPS_SKIP_REASON
    if device == "cuda" and processes > device_count:
        return (
            f"train-ddp with {processes} processes needs {processes} CUDA GPUs, one per process, and "
            f"{device_count} are visible; set --perf-ddp-processes to at most {device_count}"
        )
    return None


def backend_for(device: str) -> str:
    """The torch.distributed backend of `device`: nccl on CUDA, gloo on the CPU."""
    return "nccl" if device == "cuda" else "gloo"


def threads_per_process(threads_available: int, processes: int) -> int:
    """CPU threads for each rank, so that the ranks together use the threads one process would have,
    not `processes` times as many (torchrun's OMP_NUM_THREADS=1 is the extreme of the same rule)."""
    return max(1, threads_available // processes)


def scaling_efficiency(samples_per_s_n: float, samples_per_s_1: float, processes: int) -> float:
    """Throughput of N processes over N times the throughput of one: 1.0 is perfect linear scaling."""
    return samples_per_s_n / (processes * samples_per_s_1)


def scaling_table(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per `train-ddp` result, next to the `train` result of the same device, dtype, model,
    batch size (per process) and profile: `samples_per_s_1` (train), `samples_per_s_n` (train-ddp),
    `speedup` and `scaling_efficiency`; both are NaN where no `train` result matches.

    `results` are the `extra_info` of benchmark results; other modes are ignored. Raises ValueError when
    two `train` results share a key, since the efficiency would depend on which one is taken.
    """
    results = list(results)
    train: dict[tuple, float] = {}
    for result in results:
        if result.get("mode") != "train":
            continue
        key = tuple(result.get(k) for k in SCALING_KEYS)
        if key in train:
            raise ValueError(
                f"two train results for {'/'.join(map(str, key))}; give the results of one run "
                "(one train result per device, dtype, model, batch size and profile)"
            )
        train[key] = _samples_per_s(result)
    rows = []
    for result in results:
        if result.get("mode") != "train-ddp":
            continue
        key = tuple(result.get(k) for k in SCALING_KEYS)
        processes = int(result["processes"])
        samples_per_s_1 = train.get(key, float("nan"))
        samples_per_s_n = _samples_per_s(result)
        rows.append({
            **dict(zip(SCALING_KEYS, key, strict=True)),
            "processes": processes,
            "samples_per_s_1": samples_per_s_1,
            "samples_per_s_n": samples_per_s_n,
            "speedup": samples_per_s_n / samples_per_s_1,
            "scaling_efficiency": scaling_efficiency(samples_per_s_n, samples_per_s_1, processes),
        })
    columns = [*SCALING_KEYS, "processes", "samples_per_s_1", "samples_per_s_n", "speedup", "scaling_efficiency"]
    return pd.DataFrame(rows, columns=columns)


def _samples_per_s(result: Mapping[str, Any]) -> float:
    value = result.get("samples_per_s")
    return float("nan") if value is None else float(value)


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

    def __init__(self, case: Case, processes: int, backend: str, store: dist.TCPStore) -> None:
        self.case = case
        self.processes = processes
        self.backend = backend
        self.parameter_count = 0
        self.config_digest = ""
        self.facts: dict[str, Any] = {}
        self._store = store
        self._workers: list[subprocess.Popen] = []
        self._logs: list[IO[bytes]] = []
        self._rank: _Rank | None = None
        self._healthy = True
        self._closed = False
        self._stopping = threading.Event()
        self._worker_exited = threading.Event()
        self._monitor: threading.Thread | None = None
        self._threads_before: int | None = None
        flag_device = _rank_device(case.device, 0)
        self._flags = {
            command: torch.tensor([command], dtype=torch.int64, device=flag_device)
            for command in (_STEP, _STOP, _CHECKSUM)
        }

    @classmethod
    def start(
        cls, case: Case, workload: Workload, processes: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> DdpTraining:
        """Start `processes - 1` workers, join them as rank 0 and wrap every rank's module in DDP."""
        device_count = torch.cuda.device_count() if case.device == "cuda" else 1
        if processes is None:
            processes = ddp_processes(case.device, device_count, os.environ.get(PROCESSES_ENV))
        reason = ddp_skip_reason(case.device, processes, device_count)
        if reason:
            raise ValueError(f"{case.benchmark_id} cannot run: {reason}; run train-ddp on cuda or cpu")
        if dist.is_initialized():
            raise RuntimeError(
                f"{case.benchmark_id}: this process already belongs to a torch.distributed process group; "
                "train-ddp starts its own, so run perfsuite without torchrun or another launcher"
            )
        backend = backend_for(case.device)
        # Port 0: the store picks a free port itself, so two sessions on one machine cannot collide.
        store = dist.TCPStore(_HOST, 0, processes, True, timedelta(seconds=timeout_s), wait_for_workers=False)
        training = cls(case, processes, backend, store)
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
    def worker_pids(self) -> list[int]:
        """Process ids of the worker ranks 1..N-1."""
        return [worker.pid for worker in self._workers]

    def step(self) -> torch.Tensor:
        """One training step on every rank, finished on this rank's device when it returns; returns rank 0's
        loss."""
        if self._closed or not self._healthy:
            raise RuntimeError(f"{self.case.benchmark_id}: the DDP ranks are stopped (closed, or an earlier failure)")
        try:
            dist.broadcast(self._flags[_STEP], src=0)
            loss = self._rank.train_step()
            # On CUDA the step is only queued; waiting here lets a failed all-reduce surface as this step's
            # error. The runner's own synchronisation after it then costs nothing.
            _synchronize(self.case.device)
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
        dist.broadcast(self._flags[_CHECKSUM], src=0)
        gathered = _gather_checksums(self._rank.module, self.processes)
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
                dist.broadcast(self._flags[_STOP], src=0)
                _synchronize(self.case.device)
        _stop_workers(self._workers, JOIN_TIMEOUT_S if self._healthy else 0.0)
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
        for log in self._logs:
            log.close()
        if self._threads_before is not None:
            torch.set_num_threads(self._threads_before)
        self._rank = None
        self._store = None

    def _start(self, workload: Workload, timeout_s: float) -> None:
        threads = None
        if self.case.device == "cpu":
            threads = threads_per_process(torch.get_num_threads(), self.processes)
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(threads)
        spec = {
            "case": dataclasses.asdict(self.case),
            "workload": workload.name,
            "workload_sources": _workload_sources(workload),
            "world_size": self.processes,
            "store_port": self._store.port,
            "backend": self.backend,
            "timeout_s": timeout_s,
            "threads": threads,
            "sys_path": [p for p in sys.path if isinstance(p, str)],
            "parent_pid": os.getpid(),
        }
        for rank in range(1, self.processes):
            self._spawn_worker({**spec, "rank": rank}, threads)
        # Killed at interpreter exit if close() never ran (an interrupted session).
        weakref.finalize(self, _stop_workers, self._workers, 0.0)
        if self.case.device == "cuda":
            torch.cuda.set_device(0)
        module, inputs, target = _build_module_and_data(self.case, workload, rank=0)
        self.parameter_count = sum(p.numel() for p in module.parameters())
        # The process count is part of the configuration: a baseline of 8 GPUs is not one of 4.
        self.config_digest = config_digest(f"{workload.name} ddp x{self.processes}", module, inputs)
        self._wait_for_workers_ready(timeout_s)
        with _nccl_timeout_spares_this_process(self.backend):
            dist.init_process_group(
                self.backend, store=self._store, rank=0, world_size=self.processes,
                timeout=timedelta(seconds=timeout_s),
            )
        self._rank = _wrap_in_ddp(self.case, workload, module, inputs, target, rank=0)
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
            [sys.executable, "-c", _WORKER_CODE, json.dumps(spec)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
        ))

    def _wait_for_workers_ready(self, timeout_s: float) -> None:
        keys = [_ready_key(rank) for rank in range(1, self.processes)]
        deadline = time.monotonic() + timeout_s
        while not self._store.check(keys):
            failure = self._worker_failure(grace_s=0.0)
            if failure is not None:
                raise failure
            if time.monotonic() > deadline:
                waiting = [rank for rank in range(1, self.processes) if not self._store.check([_ready_key(rank)])]
                raise DistributedWorkerError(
                    f"{self.case.benchmark_id}: train-ddp rank(s) {waiting} did not finish building the model "
                    f"within {timeout_s:.0f} s; they are alive but stuck or very slow"
                )
            time.sleep(_LIVENESS_POLL_S)

    def _watch_workers(self) -> None:
        # A blocked gloo collective fails by itself when a peer's socket closes; an nccl one waits on the
        # GPU until the timeout, so a dead worker aborts the communicator to free rank 0 at once.
        while not self._stopping.wait(_LIVENESS_POLL_S):
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
                        f"{_exit_description(code)} without reporting an error; its last output:\n"
                        f"{self._log_tail(rank)}"
                    )
            if time.monotonic() >= deadline:
                return None
            time.sleep(_LIVENESS_POLL_S)

    def _reported_error(self, rank: int) -> tuple[float, int, str] | None:
        """(time reported, rank, what failed) from the store, or None."""
        try:
            if not self._store.check([_error_key(rank)]):
                return None
            report = json.loads(self._store.get(_error_key(rank)))
        except Exception:  # the store may be gone while closing
            return None
        return float(report["time_s"]), rank, str(report["text"])

    def _log_tail(self, rank: int) -> str:
        log = self._logs[rank - 1]
        log.seek(0)
        lines = log.read().decode(errors="replace").splitlines()
        return "\n".join(lines[-_STDERR_TAIL_LINES:]) or "(no output)"


# Every rank: build, wrap, step.


@dataclasses.dataclass
class _Rank:
    module: DistributedDataParallel
    train_step: Callable[[], torch.Tensor]


def _rank_device(device: str, rank: int) -> torch.device:
    return torch.device("cuda", rank) if device == "cuda" else torch.device(device)


def _build_module_and_data(case: Case, workload: Workload, rank: int) -> tuple[torch.nn.Module, Any, Any]:
    torch.manual_seed(MODULE_SEED)
    module = materialize_random_weights(workload.build_module(case.profile), case.device, seed=MODULE_SEED)
    module.train()
    # Each rank trains on its own batch, as with a distributed sampler; this also makes unsynchronised
    # ranks diverge, so equal weights after a step show that DDP averaged the gradients.
    torch.manual_seed(MODULE_SEED + 1 + rank)
    inputs = to_device(workload.make_inputs(case.profile, case.batch_size), case.device)
    target = to_device(workload.make_target(case.profile, case.batch_size), case.device)
    return module, inputs, target


def _wrap_in_ddp(
    case: Case, workload: Workload, module: torch.nn.Module, inputs: Any, target: Any, rank: int
) -> _Rank:
    device_ids = [rank] if case.device == "cuda" else None
    ddp_module = DistributedDataParallel(module, device_ids=device_ids)
    return _Rank(ddp_module, make_train_step(case, workload, ddp_module, inputs, target))


def _gather_checksums(module: torch.nn.Module, processes: int) -> list[torch.Tensor]:
    flat = torch.cat([p.detach().double().flatten() for p in module.parameters()])
    checksum = torch.stack([flat.sum(), flat.square().sum()])
    gathered = [torch.empty_like(checksum) for _ in range(processes)]
    dist.all_gather(gathered, checksum)
    return [c.cpu() for c in gathered]


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@contextlib.contextmanager
def _nccl_timeout_spares_this_process(backend: str) -> Iterator[None]:
    """While rank 0's process group is created, ask nccl to clean up after a timeout instead of ending the
    process (its default, SkipCleanUp = 3): rank 0 is the pytest session, which must survive to report.
    The value is read when the group is created (ErrorHandlingMode in c10d/ProcessGroupNCCL.hpp)."""
    name = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    if backend != "nccl" or name in os.environ:
        yield
        return
    os.environ[name] = "2"  # CleanUpOnly
    try:
        yield
    finally:
        del os.environ[name]


def _ready_key(rank: int) -> str:
    return f"perfsuite/ready/{rank}"


def _error_key(rank: int) -> str:
    return f"perfsuite/error/{rank}"


def _exit_description(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def _stop_workers(workers: list[subprocess.Popen], timeout_s: float) -> None:
    """Wait up to `timeout_s` for the workers to exit, then kill and reap the rest."""
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=max(0.0, deadline - time.monotonic()))
    for worker in workers:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


# Where a worker finds the workload: the modules that define its functions.


def _workload_sources(workload: Workload) -> list[dict[str, str | None]]:
    """The modules defining the workload's functions, by name and file: a worker imports them until the
    workload is registered or found among a module's globals (a conftest.py that registers it, say)."""
    sources: list[dict[str, str | None]] = []
    for function in (workload.build_module, workload.make_inputs, workload.make_target, workload.loss):
        while hasattr(function, "func"):  # functools.partial
            function = function.func
        name = getattr(function, "__module__", None)
        module = sys.modules.get(name) if name else None
        if module is None:
            continue
        source = {"module": name, "file": getattr(module, "__file__", None)}
        if source not in sources:
            sources.append(source)
    return sources


def _find_workload(name: str, sources: list[dict[str, str | None]]) -> Workload:
    registered = registered_workloads()
    if name in registered:
        return registered[name]
    for index, source in enumerate(sources):
        module = _import_source(source, index)
        registered = registered_workloads()
        if name in registered:
            return registered[name]
        for value in vars(module).values():
            if isinstance(value, Workload) and value.name == name:
                return value
    shown = ", ".join(str(s["file"] or s["module"]) for s in sources) or "(none found)"
    raise LookupError(
        f"workload {name!r} was not found in a worker process after importing the modules that define its "
        f"functions ({shown}); register it or assign it at the top level of one of them"
    )


def _import_source(source: dict[str, str | None], index: int) -> Any:
    import importlib
    import importlib.util

    name, file = source["module"], source["file"]
    # By name when that name finds the same file (keeps package-relative imports working), else by path
    # under a private name, so that a script's `if __name__ == "__main__":` block does not run again.
    if name and name != "__main__":
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            if spec is not None and (file is None or _same_file(spec.origin, file)):
                return importlib.import_module(name)
    if file is None:
        raise LookupError(f"module {name!r} cannot be imported in a worker process and has no file")
    spec = importlib.util.spec_from_file_location(f"_perfsuite_ddp_source_{index}", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _same_file(a: str | None, b: str) -> bool:
    try:
        return a is not None and os.path.samefile(a, b)
    except OSError:
        return False


# A worker process: ranks 1..N-1.

_WORKER_CODE = (
    "import json, sys\n"
    "spec = json.loads(sys.argv[1])\n"
    "sys.path[:] = spec['sys_path'] + [p for p in sys.path if p not in spec['sys_path']]\n"
    "from perfsuite.run.ddp import run_worker\n"
    "sys.exit(run_worker(spec))\n"
)


def run_worker(spec: Mapping[str, Any]) -> int:
    """The life of worker rank `spec["rank"]`: build, join the group, then run a step for every "step"
    rank 0 broadcasts until "stop". An error is written to the store for rank 0 and gives exit code 1."""
    rank = int(spec["rank"])
    threading.Thread(target=_exit_when_orphaned, args=(int(spec["parent_pid"]),), daemon=True).start()
    timeout = timedelta(seconds=float(spec["timeout_s"]))
    store = dist.TCPStore(_HOST, int(spec["store_port"]), int(spec["world_size"]), False, timeout)
    phase = "while starting"
    try:
        if spec["threads"] is not None:
            torch.set_num_threads(int(spec["threads"]))
        case = Case(**spec["case"])
        if case.device == "cuda":
            torch.cuda.set_device(rank)
        workload = _find_workload(spec["workload"], spec["workload_sources"])
        module, inputs, target = _build_module_and_data(case, workload, rank)
        store.set(_ready_key(rank), "1")
        dist.init_process_group(
            spec["backend"], store=store, rank=rank, world_size=int(spec["world_size"]), timeout=timeout
        )
        ddp_rank = _wrap_in_ddp(case, workload, module, inputs, target, rank)
        flag = torch.zeros(1, dtype=torch.int64, device=_rank_device(case.device, rank))
        phase = "in a training step"
        while True:
            dist.broadcast(flag, src=0)
            command = int(flag.item())
            if command == _STOP:
                break
            if command == _CHECKSUM:
                _gather_checksums(ddp_rank.module, int(spec["world_size"]))
            else:
                ddp_rank.train_step()
        dist.destroy_process_group()
        return 0
    except BaseException as error:
        report = f"{phase}: {type(error).__name__}: {error}\n{traceback.format_exc()}"
        with contextlib.suppress(Exception):
            store.set(_error_key(rank), json.dumps({"time_s": time.time(), "text": report}))
        print(report, file=sys.stderr, flush=True)
        # Without the process group's teardown: peers blocked on this rank learn of the failure from the
        # closed connection (gloo) or from rank 0's watcher (nccl).
        os._exit(1)


def _exit_when_orphaned(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)
        time.sleep(1.0)
