"""One worker for every measuring path: the gate's `--perf-processes` and A/B jobs start the same request/reply
process (`perfsuite.run.worker`) from the same typed spec (`wire.WorkerSpec`) through the same orchestrator
(`perfsuite.run.workers.Workers`), which replaces a worker that died and stops one that gives no answer in time; the
A/B job's progress comes back as records that render/progress.py turns into the lines it always printed.

The tests of this subject that start processes or take long: tests/sessions/test_one_worker_sessions.py."""

from __future__ import annotations

from perfsuite.records import AbBlockProgress, AbProfileFailed, WorkloadSource
from perfsuite.render.progress import ab_progress_line
from perfsuite.run.plan import MeasureSettings, RoundSettings
from perfsuite.run.wire import WorkerSide, WorkerSpec, worker_spec_from_json, worker_spec_to_json


def test_a_gate_spec_reads_back_as_it_was_written():
    spec = WorkerSpec(MeasureSettings(3, 2, True, "forward", False), RoundSettings(4, 0.5, 1e-5), 2, ("/a", "/b"),
                      {"m": (WorkloadSource(module="conftest", file="/a/conftest.py"),
                             WorkloadSource(module="pkg.models", file=None))})
    assert worker_spec_from_json(worker_spec_to_json(spec)) == spec


def test_an_ab_spec_reads_back_as_it_was_written():
    sources = {"m": (WorkloadSource(module="models", file="/base/models.py"),)}
    spec = WorkerSpec(MeasureSettings(2, count_flops=False), RoundSettings(), None,
                      sides=(WorkerSide("base", "/base", sources), WorkerSide("head", "/head", {})),
                      head_root="/head", model_modules=("perfsuite.workloads.mlp",), check_models=("m",))
    assert worker_spec_from_json(worker_spec_to_json(spec)) == spec


def test_an_ab_block_reads_as_the_line_the_job_always_printed():
    progress = AbBlockProgress("cpu-fp32-lin-bs2-infer-smoke", 2, 41.4, 300.0, 1.0042, 8, True)
    assert ab_progress_line(progress) == ("perfsuite A/B: cpu-fp32-lin-bs2-infer-smoke block 2: head/base 1.004 over 8 "
                                          "window pairs (decided) (41 s of 300 s)")
    undecided = AbBlockProgress("cpu-fp32-lin-bs2-infer-smoke", 1, 3.0, 60.0, 0.9, 4, False)
    assert ab_progress_line(undecided).endswith("head/base 0.900 over 4 window pairs (3 s of 60 s)")


def test_a_failed_block_and_a_failed_profile_read_with_their_messages():
    failed = AbBlockProgress("cpu-fp32-lin-bs2-infer-smoke", 3, 10.0, 300.0, failure="base side: it broke")
    assert ab_progress_line(failed) == "perfsuite A/B: cpu-fp32-lin-bs2-infer-smoke block 3: base side: it broke"
    assert ab_progress_line(AbProfileFailed("cpu-fp32-lin-bs2-infer-smoke", "head side: no profiler")) == (
        "perfsuite A/B: cpu-fp32-lin-bs2-infer-smoke: could not profile its ops: head side: no profiler")
