"""The baseline store: names, entries, the file format, bad files, atomic and concurrent updates."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from perfsuite.records import CaseResult
from perfsuite.store.baselines import (
    BaselineFile,
    BaselineFileError,
    baseline_path,
    baseline_to_json,
    entry_from_result,
    load_baseline,
    machine_slug,
    parse_baseline,
    record_baselines,
)

RECORDED_AT = datetime(2026, 12, 2, 15, 0, tzinfo=timezone.utc)
MACHINE = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "accelerator_name": None, "machine_slug": "amd-epyc-7763"}


def result(benchmark_id: str = "cpu-fp32-resnet18-bs4-train", times_s: tuple[float, ...] = (), **changes) -> CaseResult:
    fields = dict(
        benchmark_id=benchmark_id, device="cpu", dtype="fp32", model="resnet18", batch_size=4, mode="train",
        profile="standard", round_times_s=times_s or (0.0121, 0.0123, 0.0122, 0.0125, 0.0124),
        samples_per_s=327.87, memory_figure="cpu_peak_rss_bytes", memory_bytes=512_000_000, flops_per_step=None,
        tflops_per_s=None, config_digest="a1b2c3d4e5f6", torch_version="2.13.0",
    )
    fields.update(changes)
    return CaseResult(**fields)


def entry(benchmark_id: str = "cpu-fp32-resnet18-bs4-train", **changes):
    return entry_from_result(
        result(benchmark_id, **changes), commit="abc1234", recorded_at=RECORDED_AT, tolerance=0.10,
        memory_tolerance=0.10,
    )


def valid_document() -> dict:
    entries = {"cpu-fp32-resnet18-bs4-train": entry()}
    return baseline_to_json(BaselineFile(device="cpu", machine=MACHINE, entries=entries))


# --- names and paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fingerprint, device, slug",
    [
        ({"accelerator_name": "NVIDIA H200"}, "cuda", "nvidia-h200"),
        ({"accelerator_name": "Apple M2 Max"}, "mps", "apple-m2-max"),
        ({"cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"}, "cpu", "intel-xeon-platinum-8375c"),
        ({"cpu_model": "AMD EPYC 7763 64-Core Processor"}, "cpu", "amd-epyc-7763-64-core"),
        ({"cpu_model": "Apple M2 Max", "accelerator_name": "Apple M2 Max"}, "cpu", "apple-m2-max"),
        ({"accelerator_name": "NVIDIA GeForce RTX 4060 Laptop GPU"}, "cuda", "nvidia-geforce-rtx-4060-laptop-gpu"),
    ],
)
def test_machine_slug_is_a_readable_file_name(fingerprint, device, slug):
    assert machine_slug(fingerprint, device) == slug


def test_cpu_slug_uses_the_cpu_model_even_on_a_gpu_machine():
    fingerprint = {"cpu_model": "AMD EPYC 9654", "accelerator_name": "NVIDIA H200"}
    assert machine_slug(fingerprint, "cpu") == "amd-epyc-9654"


def test_a_machine_without_a_name_gets_an_unknown_slug():
    assert machine_slug({"cpu_model": ""}, "cpu") == "unknown-cpu"


def test_baseline_path_is_device_folder_and_slug_file():
    assert baseline_path("baselines", "cuda", "nvidia-h200") == Path("baselines/cuda/nvidia-h200.json")


# --- entries --------------------------------------------------------------------------------------------


def test_an_entry_keeps_at_most_200_rounds_spread_from_first_to_last():
    times_s = tuple(0.001 * (1 + i / 1000) for i in range(1000))
    recorded = entry(times_s=times_s)
    assert len(recorded.round_times_s) == 200
    assert (recorded.round_times_s[0], recorded.round_times_s[-1]) == (0.001, pytest.approx(0.001999, rel=1e-3))
    assert recorded.rounds == 1000


def test_an_entry_rounds_times_to_four_significant_figures():
    recorded = entry(times_s=(0.0123456789,) * 5)
    assert recorded.round_times_s[0] == 0.01235
    assert recorded.median_s == 0.01235


def test_an_entry_records_the_time_in_utc():
    recorded = entry_from_result(
        result(), commit=None, recorded_at=datetime(2026, 12, 2, 16, 0, tzinfo=timezone(timedelta(hours=1))),
        tolerance=0.10, memory_tolerance=0.10,
    )
    assert recorded.recorded_at == "2026-12-02T15:00:00Z"


def test_an_entry_needs_a_timezone_aware_time():
    with pytest.raises(ValueError, match="timezone-aware"):
        entry_from_result(result(), commit=None, recorded_at=datetime(2026, 12, 2), tolerance=0.1, memory_tolerance=0.1)


def test_an_entry_records_the_reference_median():
    assert entry(reference_round_times_s=(0.0005, 0.0006, 0.0007)).reference_median_s == 0.0006


def test_an_entry_with_a_percent_for_a_tolerance_is_refused():
    with pytest.raises(ValueError, match="tolerance must be a fraction"):
        entry_from_result(result(), commit=None, recorded_at=RECORDED_AT, tolerance=10, memory_tolerance=0.1)


def test_numpy_numbers_in_a_result_are_recorded_as_plain_json(tmp_path):
    path = tmp_path / "cpu.json"
    recorded = entry(memory_bytes=np.int64(512_000_000), flops_per_step=np.int64(10**9))
    record_baselines(path, "cpu", MACHINE, {"a": recorded})
    assert load_baseline(path).entries["a"].memory_bytes == 512_000_000


# --- the file -------------------------------------------------------------------------------------------


def test_a_recorded_file_reads_back_the_same_entries(tmp_path):
    path = tmp_path / "cpu" / "amd-epyc-7763.json"
    written = record_baselines(path, "cpu", MACHINE, {"cpu-fp32-resnet18-bs4-train": entry()})
    assert load_baseline(path) == written


def test_a_file_is_utf8_json_with_sorted_keys_indent_1_and_a_final_newline(tmp_path):
    path = tmp_path / "cpu.json"
    record_baselines(path, "cpu", MACHINE, {"cpu-fp32-resnet18-bs4-train": entry()})
    text = path.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def test_a_file_holds_schema_and_version(tmp_path):
    path = tmp_path / "cpu.json"
    record_baselines(path, "cpu", MACHINE, {"cpu-fp32-resnet18-bs4-train": entry()})
    document = json.loads(path.read_text())
    assert (document["schema"], document["schema_version"]) == ("perfsuite-baseline", 1)


def test_recording_one_entry_leaves_the_others_untouched(tmp_path):
    path = tmp_path / "cpu.json"
    record_baselines(path, "cpu", MACHINE, {"a": entry("a"), "b": entry("b")})
    newer_b = dataclasses.replace(entry("b"), commit="def5678")
    record_baselines(path, "cpu", MACHINE, {"b": newer_b})
    entries = load_baseline(path).entries
    assert (entries["a"], entries["b"]) == (entry("a"), newer_b)


def test_a_new_file_is_readable_by_others(tmp_path):
    path = tmp_path / "cpu.json"
    record_baselines(path, "cpu", MACHINE, {"a": entry("a")})
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_missing_file_is_no_baseline(tmp_path):
    assert load_baseline(tmp_path / "cpu" / "nothing-here.json") is None


def test_a_missing_directory_is_no_baseline(tmp_path):
    assert load_baseline(tmp_path / "no-such-dir" / "cpu" / "x.json") is None


# --- bad files ------------------------------------------------------------------------------------------


def _without(field: str) -> dict:
    document = valid_document()
    del document["entries"]["cpu-fp32-resnet18-bs4-train"][field]
    return document


def _with_entry(**changes) -> dict:
    document = valid_document()
    document["entries"]["cpu-fp32-resnet18-bs4-train"].update(changes)
    return document


BAD_FILES = {
    "empty": ("", "the file is empty"),
    "truncated": (json.dumps(valid_document(), indent=1)[:200], "not valid JSON (line"),
    "not a baseline": (json.dumps({"benchmarks": []}), "not a perfsuite baseline"),
    "old version": (json.dumps({**valid_document(), "schema_version": 0}), "unsupported schema_version 0"),
    "missing field": (
        json.dumps(_without("median_s")), "entry 'cpu-fp32-resnet18-bs4-train' misses the field(s) median_s"
    ),
    "zero time": (json.dumps(_with_entry(round_times_s=[0.01, 0.0])), "finite times > 0"),
    "wrong type": (json.dumps(_with_entry(batch_size="4")), "field 'batch_size' should be int"),
    "percent tolerance": (json.dumps(_with_entry(tolerance=10)), "field 'tolerance' must be a fraction"),
    "other device": (json.dumps(_with_entry(device="cuda")), "has device 'cuda' in a file of device 'cpu'"),
    "entries not an object": (json.dumps({**valid_document(), "entries": []}), '"entries" (objects) are required'),
}


@pytest.mark.parametrize("text, problem", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_file_is_an_error_naming_the_file_the_problem_and_the_fix(tmp_path, text, problem):
    path = tmp_path / "cpu.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineFileError) as raised:
        load_baseline(path)
    message = str(raised.value)
    assert str(path) in message
    assert problem in message
    assert "git checkout --" in message and "--perf-update-baseline" in message


def test_a_file_from_a_newer_perfsuite_asks_for_an_upgrade():
    with pytest.raises(BaselineFileError, match="Upgrade perfsuite"):
        parse_baseline(json.dumps({**valid_document(), "schema_version": 2}), "cpu.json")


def test_a_file_that_is_not_utf8_is_an_error(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(BaselineFileError, match="not UTF-8"):
        load_baseline(path)


def test_recording_into_a_corrupt_file_refuses_and_leaves_it_as_it_was(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text('{"schema": "perfsuite-baseline", "sche')
    before = path.read_bytes()
    with pytest.raises(BaselineFileError):
        record_baselines(path, "cpu", MACHINE, {"a": entry("a")})
    assert path.read_bytes() == before


# --- atomic and concurrent updates ----------------------------------------------------------------------


def test_an_interrupted_update_leaves_the_old_file_intact_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "cpu.json"
    record_baselines(path, "cpu", MACHINE, {"a": entry("a")})
    before = path.read_bytes()

    def dump_half_then_fail(document, handle, **options):
        handle.write(json.dumps(document, **options)[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", dump_half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        record_baselines(path, "cpu", MACHINE, {"b": entry("b")})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu.json", "cpu.json.lock"]


def _record_many(path: str, prefix: str, count: int, start) -> None:
    start.wait()
    for index in range(count):
        record_baselines(Path(path), "cpu", MACHINE, {f"{prefix}-{index}": entry(f"{prefix}-{index}")})


def test_two_concurrent_recorders_into_one_file_both_land(tmp_path):
    path = tmp_path / "cpu.json"
    # fork keeps the test quick on Linux; elsewhere spawn is the safe default.
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    start = context.Barrier(2)
    workers = [
        context.Process(target=_record_many, args=(str(path), prefix, 25, start)) for prefix in ("first", "second")
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    expected = {f"{prefix}-{index}" for prefix in ("first", "second") for index in range(25)}
    assert set(load_baseline(path).entries) == expected
