"""`train-ddp` decisions, pure: how many processes run, whether a case can run here, scaling efficiency."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from perfsuite.errors import UsageError

MPS_SKIP_REASON = (
    "one device: DDP needs several processes with one device each; MPS has one GPU and no nccl/gloo GPU backend"
)
SCALING_KEYS = ("device", "dtype", "model", "batch_size", "profile")

# Decisions: pure functions.


def default_processes(device: str, device_count: int) -> int:
    """Processes of a `train-ddp` case when the user sets none: one per CUDA GPU (at least one: DDP in
    one process on one GPU measures DDP's own overhead), two on the CPU."""
    if device == "cuda":
        return max(1, device_count)
    return 2


def ddp_processes(device: str, device_count: int, configured: int | str | None) -> int:
    """The number of `train-ddp` processes: `configured` (--perf-ddp-processes) when given, else
    `default_processes`. Raises UsageError for a value that
    is not a positive integer."""
    if configured is None or not str(configured).strip():
        return default_processes(device, device_count)
    try:
        processes = int(str(configured).strip())
    except ValueError:
        processes = 0
    if processes < 1:
        raise UsageError(
            f"--perf-ddp-processes: {configured!r} is not a positive integer; "
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


