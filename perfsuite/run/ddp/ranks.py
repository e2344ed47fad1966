"""What every `train-ddp` rank does: build the module and its data, wrap it in DDP, step; the store keys they share."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from perfsuite.records import Case
from perfsuite.run.devices import backend
from perfsuite.run.steps import make_train_step, to_device
from perfsuite.workloads import Workload
from perfsuite.workloads.random_weights import materialize_random_weights

# Longest wait of one collective, or of the workers' start-up; a rank that takes longer is reported as stuck.
DEFAULT_TIMEOUT_S = 300.0
# Longest wait for workers to exit after "stop" before they are killed.
JOIN_TIMEOUT_S = 30.0
# After a failed step, how long rank 0 waits for a worker's failure to show before blaming itself.
WORKER_FAILURE_GRACE_S = 2.0
MODULE_SEED = 0

STEP, STOP, CHECKSUM = 1, 0, 2
HOST = "127.0.0.1"
LIVENESS_POLL_S = 0.05
STDERR_TAIL_LINES = 20

# Every rank: build, wrap, step.


@dataclasses.dataclass
class RankState:
    module: DistributedDataParallel
    train_step: Callable[[], torch.Tensor]


def build_module_and_data(case: Case, workload: Workload, rank: int) -> tuple[torch.nn.Module, Any, Any]:
    torch.manual_seed(MODULE_SEED)
    module = materialize_random_weights(workload.build_module(case.profile), case.device, seed=MODULE_SEED)
    module.train()
    # Each rank trains on its own batch, as with a distributed sampler; this also makes unsynchronised
    # ranks diverge, so equal weights after a step show that DDP averaged the gradients.
    torch.manual_seed(MODULE_SEED + 1 + rank)
    inputs = to_device(workload.make_inputs(case.profile, case.batch_size), case.device)
    make_target = workload.make_target
    if make_target is None:
        raise ValueError(f"{workload.name} has no make_target; it cannot train")
    target = to_device(make_target(case.profile, case.batch_size), case.device)
    return module, inputs, target


def wrap_in_ddp(
    case: Case, workload: Workload, module: torch.nn.Module, inputs: Any, target: Any, rank: int
) -> RankState:
    # One GPU per rank where the device's ranks each have their own (CUDA); the CPU's ranks share it.
    device_ids = [rank] if backend(case.device).one_device_per_rank else None
    ddp_module = DistributedDataParallel(module, device_ids=device_ids)
    return RankState(ddp_module, make_train_step(case, workload, ddp_module, inputs, target))


def gather_checksums(module: torch.nn.Module, processes: int) -> list[torch.Tensor]:
    flat = torch.cat([p.detach().double().flatten() for p in module.parameters()])
    checksum = torch.stack([flat.sum(), flat.square().sum()])
    gathered = [torch.empty_like(checksum) for _ in range(processes)]
    dist.all_gather(gathered, checksum)
    return [c.cpu() for c in gathered]


def synchronize_rank(device: str) -> None:
    backend(device).synchronize()


@contextlib.contextmanager
def nccl_timeout_spares_this_process(backend: str) -> Iterator[None]:
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


def loopback_store(world_size: int, timeout_s: float) -> dist.TCPStore:
    """Rank 0's rendezvous store, listening on HOST (127.0.0.1) alone, at a port the system picks (so two sessions
    on one machine cannot collide).

    The store is unauthenticated, and TCPStore's server listens on every interface whatever host it is given
    (torch 2.13, libuv and legacy backends alike); so the socket is bound to loopback here and handed to the store
    as `master_listen_fd`, which both backends listen on as it is.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((HOST, 0))
        store = dist.TCPStore(
            HOST, listener.getsockname()[1], world_size, True, timedelta(seconds=timeout_s),
            wait_for_workers=False, master_listen_fd=listener.fileno(),
        )
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store owns the descriptor now, and closes it
    return store


def ready_key(rank: int) -> str:
    return f"perfsuite/ready/{rank}"


def error_key(rank: int) -> str:
    return f"perfsuite/error/{rank}"


def exit_description(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def stop_workers(workers: list[subprocess.Popen], timeout_s: float) -> None:
    """Wait up to `timeout_s` for the workers to exit, then kill and reap the rest."""
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=max(0.0, deadline - time.monotonic()))
    for worker in workers:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


