"""What perfsuite promises a hostile or unlucky user, one input per test.

Read this as the list of promises: each test hands perfsuite one bad input (a file that is not a file, a file
that lies about its size, a broken baseline, an option that cannot work) and checks the promised outcome: a
message that says what was wrong, where and what to do, and what is kept (a file is never half-written, never
silently replaced, never silently ignored). The commands are called as functions where that shows the promise
(`perfsuite.cli.main([...])`); the gate runs through pytest twice, in a subprocess, as a user runs it.
Inputs that could flood memory if a promise broke (/dev/zero) are read in a child capped at 1 GiB.

The tests of this subject that start processes or take long: tests/sessions/test_promises_sessions.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import psutil
import pytest
from hostile_files import fails_after, run_with_memory_cap

from perfsuite.cli import main as perfsuite
from perfsuite.coverage.allowlist import AllowlistError, load_allowlist
from perfsuite.errors import BadFileError, UsageError
from perfsuite.options.settings import RawSettings, load_settings
from perfsuite.records import Case, Run
from perfsuite.run.ddp.ranks import loopback_store
from perfsuite.store import jsonfile
from perfsuite.store.baselines import (
    MAX_STORED_ROUNDS,
    BaselineFile,
    IncompatibleHistory,
    load_baseline,
    record_runs,
    stored_run,
    write_baseline_file,
)
from perfsuite.store.files import write_text_atomically

REPOSITORY = Path(__file__).resolve().parents[2]
REAL_BASELINE = REPOSITORY / "baselines" / "cpu" / "shared-2core-vm.json"
RESULTS_REMEDY = "--benchmark-json"


def real_baseline(tmp_path: Path) -> Path:
    """A copy of a committed baseline file, where the gate would find it."""
    path = tmp_path / "baselines" / "cpu" / "shared-2core-vm.json"
    path.parent.mkdir(parents=True)
    shutil.copy(REAL_BASELINE, path)
    return path


def first_entry(document: dict) -> dict:
    return next(iter(document["entries"].values()))


def edited(path: Path, change) -> Path:
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(BadFileError) as error:
        load_baseline(path)
    assert str(error.value).startswith(f"{path}: ")
    return str(error.value)


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def kept_as_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


# --- a baseline the gate reads -------------------------------------------------------------------------------


def test_a_baseline_symlinked_to_dev_zero_is_refused_unread_naming_the_device(tmp_path):
    link = tmp_path / "cpu" / "m.json"
    link.parent.mkdir()
    link.symlink_to("/dev/zero")
    done = run_with_memory_cap(f"from perfsuite.store.baselines import load_baseline\nload_baseline({str(link)!r})")
    assert f"BadFileError: {link}: is a character device (/dev/zero), not a regular file." in done.stderr


def test_a_baseline_that_is_a_fifo_is_refused_at_once_and_kept(tmp_path):
    path = fifo(tmp_path / "cpu" / "m.json")
    with fails_after(5):
        assert "is a FIFO (named pipe), not a regular file" in refusal(path)
    assert kept_as_fifo(path)


def test_a_baseline_that_is_a_folder_is_refused_naming_it(tmp_path):
    path = tmp_path / "cpu" / "m.json"
    path.mkdir(parents=True)
    assert "is a folder, not a regular file" in refusal(path)


def test_a_truncated_baseline_names_the_line_and_column_and_how_to_restore_it(tmp_path):
    path = real_baseline(tmp_path)
    path.write_text(path.read_text(encoding="utf-8")[:300], encoding="utf-8")
    message = refusal(path)
    assert "is not valid JSON (line" in message and f"git checkout -- {path}" in message


def test_an_empty_baseline_is_named_as_an_interrupted_copy(tmp_path):
    path = real_baseline(tmp_path)
    path.write_text("")
    assert "is empty (an interrupted copy or checkout)" in refusal(path)


def test_nan_in_a_baseline_is_refused(tmp_path):
    path = real_baseline(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace('"median_s": 0.', '"median_s": NaN, "x": 0.', 1))
    assert "holds NaN, which is not a number JSON allows" in refusal(path)


def test_a_baseline_nested_too_deep_is_refused(tmp_path):
    path = real_baseline(tmp_path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nests JSON deeper than Python's parser can follow" in refusal(path)


def test_a_baseline_over_the_size_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonfile, "MAX_JSON_BYTES", 1024)
    assert "more than the 1024 bytes a perfsuite file can be" in refusal(real_baseline(tmp_path))


def test_a_key_given_twice_is_refused_naming_the_key_and_the_entry(tmp_path):
    path = real_baseline(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"threads": 1', '"threads": 1, "threads": 2', 1), encoding="utf-8")
    message = refusal(path)
    assert "holds the key 'threads' twice in entries['cpu-" in message and "silently lost" in message


def test_a_schema_version_of_3_0_is_refused_asking_for_the_integer_3(tmp_path):
    path = edited(real_baseline(tmp_path), lambda d: d.update(schema_version=3.0))
    assert "has schema_version 3.0, a decimal number; it must be the integer 3 or 2 or 1" in refusal(path)


def test_another_schema_is_refused(tmp_path):
    path = edited(real_baseline(tmp_path), lambda d: d.update(schema="pytest-benchmark"))
    assert "is not a perfsuite baseline" in refusal(path)


def test_a_gpu_busy_fraction_of_5_is_refused_as_not_a_fraction(tmp_path):
    path = edited(real_baseline(tmp_path), lambda d: first_entry(d).update(gpu_busy_fraction=5.0))
    assert "field 'gpu_busy_fraction' should be a fraction in [0, 1] or null, got 5.0" in refusal(path)


def test_a_stored_time_of_5e_324_is_refused(tmp_path):
    path = edited(
        real_baseline(tmp_path),
        lambda d: first_entry(d)["runs"][0].update(round_times_s=[5e-324], median_s=5e-324, rounds=1),
    )
    assert "'round_times_s' must be a non-empty list of finite times >= 1e-09 seconds" in refusal(path)


def test_a_bad_field_is_named_with_its_entry_and_run(tmp_path):
    path = edited(real_baseline(tmp_path), lambda d: first_entry(d)["runs"][0].update(memory_bytes=-1))
    message = refusal(path)
    assert "run 0: field 'memory_bytes' should be a whole number >= 0 or null, got -1" in message


def test_reading_a_baseline_never_changes_it(tmp_path):
    path = real_baseline(tmp_path)
    before = path.read_bytes()
    load_baseline(path)
    assert path.read_bytes() == before


# --- recording into a baseline --------------------------------------------------------------------------------


def entry_of(path: Path):
    loaded = load_baseline(path)
    assert loaded is not None
    return next(iter(loaded.entries.items()))


def test_recording_into_a_truncated_baseline_refuses_and_leaves_it_as_it_was(tmp_path):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    path.write_text(path.read_text(encoding="utf-8")[:300], encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(BadFileError, match="is not valid JSON"):
        record_runs(path, "cpu", {benchmark_id: entry})
    assert path.read_bytes() == before


def test_recording_runs_of_another_machine_names_what_differs_and_writes_nothing(tmp_path):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    before = path.read_bytes()
    other = BaselineFile("cpu", {benchmark_id: entry}).entries[benchmark_id]
    stranger = type(other)(**{**other.__dict__, "machine": {"name": "another-runner"}})
    with pytest.raises(IncompatibleHistory, match=rf"{benchmark_id}: .* another machine; start it over with"):
        record_runs(path, "cpu", {benchmark_id: stranger})
    assert path.read_bytes() == before


def test_a_full_disk_while_recording_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    before = path.read_bytes()

    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        record_runs(path, "cpu", {benchmark_id: entry})
    assert path.read_bytes() == before and os.listdir(path.parent) == [path.name]


def test_recording_over_a_fifo_refuses_at_once_and_keeps_it(tmp_path):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    path.unlink()
    fifo(path)
    with fails_after(5), pytest.raises(BadFileError, match="is a FIFO"):
        record_runs(path, "cpu", {benchmark_id: entry})
    assert kept_as_fifo(path)


def test_a_fifo_in_place_of_the_lock_file_refuses_at_once_and_is_kept(tmp_path):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    lock = fifo(path.with_name(f".{path.name}.lock"))
    with fails_after(5), pytest.raises(BadFileError, match=r"\.lock: is a FIFO"):
        record_runs(path, "cpu", {benchmark_id: entry})
    assert kept_as_fifo(lock)


def test_recording_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    target = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(target)
    link = tmp_path / "elsewhere" / "cpu" / "m.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    record_runs(link, "cpu", {benchmark_id: entry})
    assert link.is_symlink() and len(entry_of(target)[1].runs) == len(entry.runs) * 2


def test_recording_through_a_symlink_to_a_device_refuses_and_keeps_the_link(tmp_path):
    link = tmp_path / "cpu" / "m.json"
    link.parent.mkdir()
    link.symlink_to(os.devnull)
    benchmark_id, entry = entry_of(real_baseline(tmp_path / "source"))
    with pytest.raises(BadFileError, match=r"is a character device \(/dev/null\), not a regular file"):
        record_runs(link, "cpu", {benchmark_id: entry})
    assert os.readlink(link) == os.devnull


# --- what the store writes, it reads back -----------------------------------------------------------------


def recorded_and_read_back(tmp_path: Path, runs, commit: str | None = None):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    fresh = type(entry)(**{**entry.__dict__, "runs": tuple(runs)})
    written = record_runs(path, "cpu", {benchmark_id: fresh}, rebaseline=True)
    return written.entries[benchmark_id], entry_of(path)[1]


def test_a_run_whose_median_lies_outside_its_kept_rounds_is_written_and_read_back(tmp_path):
    kept = set(np.linspace(0, 99, MAX_STORED_ROUNDS).round().astype(int).tolist())
    times = [2.0 if index in kept else 1.0 for index in range(100)]
    written, read = recorded_and_read_back(tmp_path, [stored_run(times, None, "2026-12-04T00:00:00Z", None)])
    assert read == written and read.runs[0].median_s == 1.5


def test_a_lone_surrogate_in_a_commit_is_written_and_read_back(tmp_path):
    run = stored_run([0.01, 0.02], None, "2026-12-04T00:00:00Z", "abc\udc80")
    written, read = recorded_and_read_back(tmp_path, [run])
    assert read == written and read.runs[0].commit == "abc\udc80"


def test_a_baseline_the_reader_would_refuse_is_not_written(tmp_path):
    path = real_baseline(tmp_path)
    benchmark_id, entry = entry_of(path)
    before = path.read_bytes()
    unreadable = type(entry)(**{**entry.__dict__, "flops_per_step": 2**64})
    with pytest.raises(BadFileError, match=r"would write a baseline it cannot read back \(entry .*'flops_per_step'"):
        write_baseline_file(path, BaselineFile("cpu", {benchmark_id: unreadable}))
    assert path.read_bytes() == before


def test_a_run_of_5e_324_seconds_is_refused_before_it_reaches_a_summary():
    with pytest.raises(ValueError, match="round times must be finite and at least 1 ns"):
        Run(Case("cpu", "fp32", "resnet18", 1, "infer", "smoke"), (5e-324,), 1, None, "cpu_peak_rss_bytes", None,
            "digest", "2.13.0", 1)


# --- files the commands read -----------------------------------------------------------------------------------


def test_compare_of_a_symlink_to_dev_zero_exits_2_naming_the_device(tmp_path):
    link = tmp_path / "run.json"
    link.symlink_to("/dev/zero")
    done = run_with_memory_cap(
        f"from perfsuite.cli import main\nraise SystemExit(main(['compare', {str(link)!r}, '--no-chart']))"
    )
    assert done.returncode == 2 and f"{link}: is a character device (/dev/zero)" in done.stderr


def test_compare_of_a_fifo_exits_2_at_once(tmp_path, capsys):
    path = fifo(tmp_path / "run.json")
    with fails_after(5):
        assert perfsuite(["compare", str(path), str(REAL_BASELINE), "--output-dir", str(tmp_path / "out")]) == 2
    assert f"{path}: is a FIFO (named pipe), not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_compare_of_a_file_over_the_cap_exits_2_naming_its_size(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(jsonfile, "MAX_JSON_BYTES", 1024)
    assert perfsuite(["compare", str(REAL_BASELINE), str(REAL_BASELINE), "--no-chart"]) == 2
    assert "more than the 1024 bytes a perfsuite file can be" in capsys.readouterr().err


def test_compare_of_a_result_with_a_key_given_twice_exits_2_naming_it(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text('{"benchmarks": [], "benchmarks": []}', encoding="utf-8")
    assert perfsuite(["compare", str(path), str(REAL_BASELINE), "--no-chart"]) == 2
    assert "holds the key 'benchmarks' twice in the top-level object" in capsys.readouterr().err


def test_compare_of_a_missing_file_exits_2_saying_what_to_pass(tmp_path, capsys):
    assert perfsuite(["compare", str(tmp_path / "nope.json"), str(REAL_BASELINE), "--no-chart"]) == 2
    assert "nope.json: no such file or folder; pass a baseline file or folder" in capsys.readouterr().err


def test_gains_of_a_fifo_exits_2_at_once(tmp_path, capsys):
    path = fifo(tmp_path / "run.json")
    with fails_after(5):
        assert perfsuite(["gains", str(path)]) == 2
    assert f"{path}: is a FIFO (named pipe), not a regular file" in capsys.readouterr().err


def test_gains_of_a_symlink_to_dev_zero_exits_2(tmp_path):
    link = tmp_path / "run.json"
    link.symlink_to("/dev/zero")
    done = run_with_memory_cap(f"from perfsuite.cli import main\nraise SystemExit(main(['gains', {str(link)!r}]))")
    assert done.returncode == 2 and "is a character device (/dev/zero)" in done.stderr


def test_gains_of_a_truncated_run_exits_2_naming_the_line(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text('{"benchmarks": [', encoding="utf-8")
    assert perfsuite(["gains", str(path)]) == 2
    assert "is not valid JSON (line 1" in capsys.readouterr().err


def test_selftest_report_of_a_fifo_exits_2_at_once(tmp_path, capsys):
    path = fifo(tmp_path / "selftest.json")
    with fails_after(5):
        assert perfsuite(["selftest", "--report", str(path), "--output", str(tmp_path / "report.md")]) == 2
    assert "is a FIFO (named pipe), not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()


def test_selftest_analyse_of_a_folder_exits_2(tmp_path, capsys):
    assert perfsuite(["selftest", "--analyse", str(tmp_path)]) == 2
    assert "is a folder, not a regular file" in capsys.readouterr().err


def test_doctor_facts_from_a_fifo_exit_2_at_once(tmp_path, capsys):
    path = fifo(tmp_path / "facts.json")
    with fails_after(5):
        assert perfsuite(["doctor", "--facts", str(path)]) == 2
    assert "is a FIFO (named pipe), not a regular file" in capsys.readouterr().err


def test_doctor_facts_with_a_key_given_twice_exit_2(tmp_path, capsys):
    path = tmp_path / "facts.json"
    path.write_text('{"facts_version": 1, "facts_version": 2}', encoding="utf-8")
    assert perfsuite(["doctor", "--facts", str(path)]) == 2
    assert "holds the key 'facts_version' twice" in capsys.readouterr().err


def test_a_coverage_allowlist_that_is_a_fifo_is_refused_at_once(tmp_path):
    path = fifo(tmp_path / "allowlist.json")
    with fails_after(5), pytest.raises(AllowlistError, match="is a FIFO"):
        load_allowlist(path, required=True)


def test_a_pyproject_that_is_a_fifo_is_a_usage_error_at_once(tmp_path):
    path = fifo(tmp_path / "pyproject.toml")
    with fails_after(5), pytest.raises(UsageError, match="is a FIFO"):
        load_settings(RawSettings(), path, ["resnet18"], ["cpu"])


# --- files the commands write ----------------------------------------------------------------------------------


def test_doctor_save_facts_onto_a_fifo_exits_2_and_keeps_it(tmp_path, capsys):
    path = fifo(tmp_path / "facts.json")
    assert perfsuite(["doctor", "--save-facts", str(path)]) == 2
    assert f"{path}: is a FIFO (named pipe), not a regular file" in capsys.readouterr().err
    assert kept_as_fifo(path)


def test_doctor_save_facts_onto_a_symlink_to_a_device_exits_2_and_keeps_the_link(tmp_path, capsys):
    link = tmp_path / "facts.json"
    link.symlink_to(os.devnull)
    assert perfsuite(["doctor", "--save-facts", str(link)]) == 2
    assert "is a character device (/dev/null), not a regular file" in capsys.readouterr().err
    assert os.readlink(link) == os.devnull


def test_doctor_save_facts_onto_a_folder_exits_2_and_leaves_nothing_beside_it(tmp_path, capsys):
    folder = tmp_path / "facts.json"
    folder.mkdir()
    assert perfsuite(["doctor", "--save-facts", str(folder)]) == 2
    assert "is a folder, not a regular file" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["facts.json"]


def test_doctor_save_facts_into_a_missing_folder_makes_it(tmp_path):
    path = tmp_path / "new" / "facts.json"
    perfsuite(["doctor", "--save-facts", str(path)])
    assert json.loads(path.read_text(encoding="utf-8"))["facts_version"]


def test_doctor_save_facts_under_a_file_exits_2_naming_the_path(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("keep")
    assert perfsuite(["doctor", "--save-facts", str(blocker / "facts.json")]) == 2
    assert "cannot write" in capsys.readouterr().err and blocker.read_text() == "keep"


def test_the_atomic_writer_never_replaces_a_device():
    with pytest.raises(BadFileError, match="/dev/null: is a character device, not a regular file"):
        write_text_atomically(os.devnull, "x")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# --- options, refused before anything is measured ------------------------------------------------------------


def settings_error(tmp_path: Path, table: str = "", **cli: str) -> str:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[project]\nname = 'demo'\n{table}\n", encoding="utf-8")
    with pytest.raises(UsageError) as error:
        load_settings(RawSettings(**cli), pyproject, ["resnet18"], ["cpu"])
    return str(error.value)


def test_a_summary_dir_that_is_a_file_is_a_usage_error_naming_the_flag(tmp_path):
    (tmp_path / "report").write_text("x")
    assert settings_error(tmp_path, summary_dir="report").startswith("--perf-summary-dir: 'report' is a file")


def test_a_summary_dir_that_cannot_be_made_is_a_usage_error_naming_the_pyproject_key(tmp_path):
    (tmp_path / "report").write_text("x")
    message = settings_error(tmp_path, '[tool.perfsuite]\nsummary-dir = "report/out"')
    assert "[tool.perfsuite] summary-dir: 'report/out' cannot be made:" in message


def test_a_machine_name_too_long_for_a_file_name_is_a_usage_error(tmp_path):
    assert "is too long for a file name" in settings_error(tmp_path, machine="m" * 300)


def test_a_machine_name_with_a_path_in_it_is_a_usage_error(tmp_path):
    assert "is not a machine name" in settings_error(tmp_path, machine="../elsewhere")


@pytest.mark.parametrize("option, value", [("processes", "1001"), ("warmup", "100001")])
def test_a_count_beyond_its_bound_is_a_usage_error(tmp_path, option, value):
    assert f"--perf-{option}: {value} is too large" in settings_error(tmp_path, **{option: value})


def test_a_bad_pyproject_value_names_the_file_and_key(tmp_path):
    assert "[tool.perfsuite] batch-size: " in settings_error(tmp_path, "[tool.perfsuite]\nbatch-size = 0")


def test_an_unknown_pyproject_key_lists_the_valid_ones(tmp_path):
    assert "unknown key(s) warmups; valid: " in settings_error(tmp_path, "[tool.perfsuite]\nwarmups = 3")


def test_a_pyproject_that_is_not_toml_is_a_usage_error_naming_it(tmp_path):
    assert ": not valid TOML" in settings_error(tmp_path, "[tool.perfsuite\n")


# --- processes ----------------------------------------------------------------------------------------------


def test_the_ddp_rendezvous_store_listens_on_loopback_only():
    store = loopback_store(2, timeout_s=10)
    listening = [
        connection.laddr.ip for connection in psutil.Process().net_connections(kind="inet")
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == store.port
    ]
    del store
    assert listening == ["127.0.0.1"]
