"""One worker for every measuring path: the gate's `--perf-processes` and A/B jobs start the same request/reply
process (`perfsuite.run.worker`) from the same typed spec (`wire.WorkerSpec`) through the same orchestrator
(`perfsuite.run.workers.Workers`), which replaces a worker that died and stops one that gives no answer in time; the
A/B job's progress comes back as records that render/progress.py turns into the lines it always printed.

The in-process tests of this subject: tests/quick/test_one_worker.py."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from perfsuite.records import Case, Run, WorkloadSource
from perfsuite.run import workers as workers_module
from perfsuite.run.plan import MeasureSettings, RoundSettings
from perfsuite.run.wire import WorkerSpec, outcome_from_json
from perfsuite.run.workers import WorkerGone, Workers

pytestmark = pytest.mark.slow

MODEL = """import torch
from perfsuite import Workload, register_workload

register_workload(Workload(name="lin", build_module=lambda profile: torch.nn.Linear(8, 8),
                           make_inputs=lambda profile, batch_size: torch.ones(batch_size, 8),
                           batch_sizes={"smoke": (2,)}))
"""
CASE = Case("cpu", "fp32", "lin", 2, "infer", "smoke")


def measured(worker, count_flops: bool):
    """The outcome of one `measure` request for CASE."""
    return outcome_from_json(worker.request({"op": "measure", "case": asdict(CASE), "count_flops": count_flops})[
        "outcome"])


def gate_spec(folder: Path) -> WorkerSpec:
    """A gate worker's spec that finds the model `lin` in a module of `folder`."""
    (folder / "lin_models.py").write_text(MODEL)
    sources = {"lin": (WorkloadSource(module="lin_models", file=str(folder / "lin_models.py")),)}
    return WorkerSpec(MeasureSettings(1, fresh_process=True), RoundSettings(min_rounds=2, max_time_s=0.02), 1,
                      (str(folder),), sources)


@pytest.mark.slow  # starts worker processes
def test_a_gate_worker_measures_one_case_per_request_and_a_dead_one_is_replaced(tmp_path: Path):
    pool = Workers(tmp_path, timeout_s=300)
    worker = pool.start(gate_spec(tmp_path))
    try:
        first, second = measured(worker, count_flops=True), measured(worker, count_flops=False)
        assert isinstance(first, Run) and first.flops_per_step == 2 * 2 * 8 * 8
        assert isinstance(second, Run) and second.flops_per_step is None and worker.alive
        worker.process.kill()
        worker.process.wait()
        with pytest.raises(WorkerGone, match=r"is gone \(exit status -9\)"):
            measured(worker, count_flops=False)
        fresh = pool.replace(worker)
        assert fresh.process.pid != worker.process.pid and pool.started == [fresh]
        third = measured(fresh, count_flops=False)
        assert isinstance(third, Run) and third.case == CASE
    finally:
        pool.stop_all()
    assert pool.started == [] and not fresh.alive


@pytest.mark.slow  # starts worker processes
def test_a_worker_that_gives_no_answer_in_time_is_stopped_and_says_so(tmp_path: Path, monkeypatch):
    silent = [sys.executable, "-c", "import sys, time; sys.stderr.write('thinking'); sys.stderr.flush(); "
              "time.sleep(60)"]
    monkeypatch.setattr(workers_module, "worker_command", lambda python, spec_path, harness: silent)
    pool = Workers(tmp_path, timeout_s=1.0)
    worker = pool.start(gate_spec(tmp_path))
    with pytest.raises(WorkerGone, match=r"gave no answer within 1 s and was stopped: thinking") as gone:
        worker.hello  # noqa: B018
    assert not worker.alive and gone.value.exit_status == -9
    pool.stop_all()


@pytest.mark.slow  # starts a worker process
def test_a_gate_case_whose_worker_gives_no_answer_in_time_is_crashed_saying_so(tmp_path: Path, monkeypatch):
    from perfsuite.run import processes
    from perfsuite.run.plan import SessionPlan

    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setattr(workers_module, "worker_command", lambda python, spec_path, harness: silent)
    monkeypatch.setattr(processes, "WORKER_TIMEOUT_S", 1.0)
    plan = SessionPlan((CASE,), processes=2, measure=MeasureSettings(warmup_steps=1), rounds=RoundSettings())
    ((case, outcome),) = processes.run_worker(plan, [CASE])
    assert case == CASE and outcome.kind == "crashed" and "exited with status -9" in outcome.message
    assert outcome.details.endswith("(gave no answer within 1 s and was stopped)")


@pytest.mark.slow  # starts worker processes
def test_workers_stopped_together_exit_together(tmp_path: Path, monkeypatch):
    """Three workers that each take 1 s to exit once asked (as one unloading torch takes tenths of a second): all are
    asked before any is waited for, so stopping them takes about 1 s, not 3."""
    import time

    slow_exit = [sys.executable, "-c", "import sys, time; sys.stdin.readline(); time.sleep(1.0)"]
    monkeypatch.setattr(workers_module, "worker_command", lambda python, spec_path, harness: slow_exit)
    pool = Workers(tmp_path, timeout_s=30)
    started = [pool.start(gate_spec(tmp_path), number) for number in range(3)]
    time.sleep(0.5)  # each is reading its input
    stopping = time.monotonic()
    pool.stop_all()
    assert time.monotonic() - stopping < 2.5
    assert pool.started == [] and [worker.process.returncode for worker in started] == [0, 0, 0]


@pytest.mark.slow  # starts a worker process
def test_a_worker_measuring_a_model_without_meta_parameters_never_imports_accelerate(tmp_path: Path, monkeypatch):
    """accelerate builds the built-in models on the meta device; a worker measuring a user's small model starts
    without it (a tenth of a second or more of every worker's start)."""
    def reporting(python, spec_path, harness):
        return [python, "-c", "import atexit, sys; atexit.register(lambda: sys.stderr.write("
                "f'accelerate imported: {\"accelerate\" in sys.modules}\\n')); from perfsuite.run.worker import main; "
                f"sys.exit(main([{str(spec_path)!r}]))"]

    monkeypatch.setattr(workers_module, "worker_command", reporting)
    pool = Workers(tmp_path, timeout_s=300)
    worker = pool.start(gate_spec(tmp_path))
    assert isinstance(measured(worker, count_flops=False), Run)
    pool.stop_all()
    assert "accelerate imported: False" in worker.log_path.read_text()
