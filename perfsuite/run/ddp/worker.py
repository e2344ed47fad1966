"""A `train-ddp` worker process: ranks 1..N-1, started by rank 0."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from perfsuite.records import Case
from perfsuite.run.ddp.ranks import (
    CHECKSUM,
    HOST,
    STOP,
    build_module_and_data,
    error_key,
    gather_checksums,
    ready_key,
    wrap_in_ddp,
)
from perfsuite.run.devices import backend
from perfsuite.run.lifetime import watch_parent
from perfsuite.workloads.sources import find_workload

# A worker process: ranks 1..N-1.

WORKER_CODE = (
    "import json, sys\n"
    "spec = json.loads(sys.argv[1])\n"
    "sys.path[:] = spec['sys_path'] + [p for p in sys.path if p not in spec['sys_path']]\n"
    "from perfsuite.run.ddp.worker import run_worker\n"
    "sys.exit(run_worker(spec))\n"
)


def run_worker(spec: Mapping[str, Any]) -> int:
    """The life of worker rank `spec["rank"]`: build, join the group, then run a step for every "step"
    rank 0 broadcasts until "stop". An error is written to the store for rank 0 and gives exit code 1."""
    rank = int(spec["rank"])
    watch_parent(int(spec["parent_pid"]))
    timeout = timedelta(seconds=float(spec["timeout_s"]))
    store = dist.TCPStore(HOST, int(spec["store_port"]), int(spec["world_size"]), False, timeout)
    phase = "while starting"
    try:
        if spec["threads"] is not None:
            torch.set_num_threads(int(spec["threads"]))
        case = Case(**spec["case"])
        backend(case.device).use_rank_device(rank)
        workload = find_workload(spec["workload"], spec["workload_sources"])
        module, inputs, target = build_module_and_data(case, workload, rank)
        store.set(ready_key(rank), "1")
        dist.init_process_group(
            spec["backend"], store=store, rank=rank, world_size=int(spec["world_size"]), timeout=timeout
        )
        ddp_rank = wrap_in_ddp(case, workload, module, inputs, target, rank)
        flag = torch.zeros(1, dtype=torch.int64, device=backend(case.device).rank_device(rank))
        phase = "in a training step"
        while True:
            dist.broadcast(flag, src=0)
            command = int(flag.item())
            if command == STOP:
                break
            if command == CHECKSUM:
                gather_checksums(ddp_rank.module, int(spec["world_size"]))
            else:
                ddp_rank.train_step()
        dist.destroy_process_group()
        return 0
    except BaseException as error:
        report = f"{phase}: {type(error).__name__}: {error}\n{traceback.format_exc()}"
        with contextlib.suppress(Exception):
            store.set(error_key(rank), json.dumps({"time_s": time.time(), "text": report}))
        print(report, file=sys.stderr, flush=True)
        # Without the process group's teardown: peers blocked on this rank learn of the failure from the
        # closed connection (gloo) or from rank 0's watcher (nccl).
        os._exit(1)


