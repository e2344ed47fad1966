"""A recording killed with SIGKILL at random moments leaves the old baseline byte for byte or the new one whole,
and the next recording runs clean (no temporary or lock file left behind, nothing refused).

A child process records into a baseline file (`record_runs`, as `--perf-update-baseline` does) and is killed
after a seeded random delay within the time an uninterrupted recording takes; small files and one of about 10 MB
(a write that takes long enough for most kills to land inside it).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfsuite.store.baselines import load_baseline

pytestmark = pytest.mark.slow

CHILD = '''
import sys
from perfsuite.records import BaselineEntry, Case
from perfsuite.store.baselines import record_runs, stored_run

path, entries, value = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rounds = [value * (1 + i / 1000) for i in range(50)]
built = {}
for index in range(entries):
    case = Case("cpu", "fp32", f"model{index}", 4, "infer", "smoke")
    built[case.benchmark_id] = BaselineEntry(
        case=case, config_digest="a1b2c3d4e5f6", torch_version="2.13.0", threads=1, machine={"name": "kill-test"},
        memory_figure="cpu_peak_rss_bytes", samples_per_step=4, flops_per_step=None, gpu_busy_fraction=None,
        tolerance=0.1, memory_tolerance=0.1,
        runs=tuple(stored_run(rounds, 1000, f"2026-12-03T00:00:{run:02d}Z", None) for run in range(20)),
    )
record_runs(path, "cpu", built, rebaseline=True)
'''


def record(script: Path, path: Path, entries: int, value: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), str(path), str(entries), str(value)])


@pytest.mark.parametrize("entries, trials", [
    pytest.param(1, 10, id="small"),
    pytest.param(600, 10, id="about-10MB", marks=pytest.mark.slow),  # a minute of recordings killed
])
def test_a_recording_killed_at_random_moments_leaves_the_old_file_or_the_new_one_and_the_next_runs_clean(
    tmp_path, entries, trials
):
    script = tmp_path / "record.py"
    script.write_text(CHILD)
    path = tmp_path / "baselines" / "cpu" / "kill-test.json"
    reference = tmp_path / "reference" / "cpu" / "kill-test.json"
    started = time.monotonic()
    assert record(script, path, entries, 0.010).wait() == 0
    assert record(script, reference, entries, 0.020).wait() == 0
    duration_s = (time.monotonic() - started) / 2
    old, new = path.read_bytes(), reference.read_bytes()
    assert old != new and (entries == 1 or len(new) > 8 * 2**20)
    outcomes = {"old": 0, "new": 0}
    delays = random.Random(entries)
    for _ in range(trials):
        child = record(script, path, entries, 0.020)
        time.sleep(delays.uniform(0, duration_s))
        child.send_signal(signal.SIGKILL)
        child.wait()
        now = path.read_bytes()
        assert now in (old, new), "the baseline is neither the old file nor the new one"
        outcomes["old" if now == old else "new"] += 1
        path.write_bytes(old)  # the next trial starts from the old file again
    assert record(script, path, entries, 0.020).wait() == 0
    assert path.read_bytes() == new and load_baseline(path).entries
    assert sorted(p.name for p in path.parent.iterdir()) == ["kill-test.json"], "a temporary file was left"
    assert sum(outcomes.values()) == trials and outcomes["old"] >= 1, outcomes
    print(f"{entries} entries, {len(new) / 2**20:.1f} MiB, {duration_s:.2f} s a recording: {outcomes}")
