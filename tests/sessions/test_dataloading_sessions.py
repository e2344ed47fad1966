"""The DataLoader benchmark: its cases and skip reasons, the two storages, one pass, and a smoke run.

The in-process tests of this subject: tests/quick/test_dataloading.py."""

import json
from pathlib import Path

import pytest

from perfsuite.run.dataloading import (
    LOADER_SIZES,
)

pytestmark = pytest.mark.slow

BENCHMARK_MODULE = Path(__file__).resolve().parents[1] / "benchmarks" / "test_dataloader.py"


# --- loading ------------------------------------------------------------------------------------------


def test_smoke_benchmark_records_throughput_and_startup_per_case(pytester, run_in_process, monkeypatch):
    pytester.makepyfile(test_dataloader=BENCHMARK_MODULE.read_text())
    monkeypatch.setenv("PERFSUITE_DATALOADER_WORKERS", "0,2")
    result = run_in_process(
        "--benchmark-only", "--perf-profile", "smoke", "--perf-device", "cpu", "--benchmark-json", "out.json",
        "--benchmark-max-time", "0.02", "-p", "no:cacheprovider",
    )
    result.assert_outcomes(passed=4, skipped=4)
    report = json.loads((pytester.path / "out.json").read_text())
    by_id = {b["param"]: b for b in report["benchmarks"]}
    assert sorted(by_id) == sorted(
        f"dataloader-cpu-{storage}-workers{workers}-nopin-smoke"
        for storage in ("memory", "memmap")
        for workers in (0, 2)
    )
    smoke = LOADER_SIZES["smoke"]
    for bench in by_id.values():
        info = bench["extra_info"]
        assert info["samples_per_s"] == pytest.approx(smoke.samples / bench["stats"]["median"])
        assert info["startup_s"] > 0
        assert (info["batch_size"], info["sample_shape"]) == (smoke.batch_size, list(smoke.sample_shape))
    assert by_id["dataloader-cpu-memmap-workers2-nopin-smoke"]["extra_info"]["persistent_workers"] is True


def test_benchmark_skip_skips_the_dataloader_cases(pytester, run_in_process):
    pytester.makepyfile(test_dataloader=BENCHMARK_MODULE.read_text())
    result = run_in_process("--benchmark-skip", "--perf-profile", "smoke", "--perf-device", "cpu")
    result.assert_outcomes(skipped=16)
