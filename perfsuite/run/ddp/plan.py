"""`train-ddp` decisions, pure: the threads of each rank and the scaling efficiency of the results (how many ranks
run, and whether they can run here, is each device backend's: `ddp_default_processes`, `ddp_unusable`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

SCALING_KEYS = ("device", "dtype", "model", "batch_size", "profile")


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


