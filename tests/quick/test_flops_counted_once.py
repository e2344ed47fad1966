"""A case's FLOPs are a fact of the case: a session of worker processes counts them in the first process that measures
the case and carries the count to its later runs, so the other processes skip the counter (whose dispatch mode makes
torch import its compiler: about a second of a small case's process) and every figure they take is taken the same
way. The FLOPs are counted after every other figure, so the counting process's figures match the others'."""

from __future__ import annotations

import pytest
import torch

from perfsuite import Workload, workloads
from perfsuite.records import Case, Run
from perfsuite.run import measure as measure_module
from perfsuite.run import processes
from perfsuite.run.devices import cpu
from perfsuite.run.measure import measure
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan
from perfsuite.run.wire import outcome_to_json
from perfsuite.run.worker import standalone_benchmark
from perfsuite.run.workers import WorkerGone

MLP = Case("cpu", "fp32", "mlp", 2, "infer", "smoke")
CNN = Case("cpu", "fp32", "cnn", 2, "infer", "smoke")
FLOPS = {"mlp": 1000, "cnn": 5000}


class FakeWorkers:
    """Stands in for the worker processes: each reports a run per case it is asked to measure, with FLOPs where the
    request asks for them (as the real worker does), and crashes on the cases named in `crash_on` the first time it
    meets them. `specs` holds, per worker started, the cases it was asked for and those whose FLOPs it counted."""

    def __init__(self, crash_on: set[str] = frozenset(), digest_of: dict[int, str] | None = None) -> None:
        self.specs: list[dict] = []
        self.crash_on = set(crash_on)
        self.digest_of = digest_of or {}

    def start(self, spec, *arguments, **keywords) -> FakeWorker:
        self.specs.append({"cases": [], "count_flops_of": []})
        return FakeWorker(self, self.specs[-1], len(self.specs))


class FakeWorker:
    """One fake worker process of `FakeWorkers`, the `number`th started."""

    def __init__(self, workers: FakeWorkers, spec: dict, number: int) -> None:
        self.workers, self.spec, self.number = workers, spec, number

    def request(self, document: dict) -> dict:
        case = Case(**document["case"])
        self.spec["cases"].append(document["case"])
        if document["count_flops"]:
            self.spec["count_flops_of"].append(case.benchmark_id)
        if case.model in self.workers.crash_on:
            self.workers.crash_on.discard(case.model)
            raise WorkerGone("the measuring worker exited with status -9: killed", "exited with status -9", -9,
                             "killed")
        counted = bool(document["count_flops"])
        run = Run(
            case, (0.01, 0.011, 0.012), samples_per_step=2,
            flops_per_step=FLOPS[case.model] if counted else None,
            memory_figure="cpu_peak_rss_bytes", memory_bytes=1, torch_version=torch.__version__, threads=1,
            config_digest=self.workers.digest_of.get(self.number, "same"),
            facts={"flops_uncounted_ops": "aten.odd_mm"} if counted and case.model == "cnn" else {},
        )
        return {"ok": True, "outcome": outcome_to_json(run)}

    def stop(self, at_once: bool = False) -> None:
        pass


def plan(processes_count: int = 3) -> SessionPlan:
    return SessionPlan((MLP, CNN), processes=processes_count, measure=MeasureSettings(warmup_steps=1),
                       rounds=RoundSettings())


@pytest.fixture
def workers(monkeypatch):
    fake = FakeWorkers()
    monkeypatch.setattr(processes.Workers, "start", fake.start)
    return fake


def test_only_the_first_process_of_each_case_counts_its_flops(workers):
    processes.measure_in_processes(plan())
    first_pass, later_passes = workers.specs[:2], workers.specs[2:]
    assert all(spec["count_flops_of"] == [Case(**spec["cases"][0]).benchmark_id]
               for spec in first_pass)
    assert {spec["cases"][0]["model"] for spec in first_pass} == {"mlp", "cnn"}
    assert len(later_passes) == 4 and all(spec["count_flops_of"] == [] for spec in later_passes)


def test_every_run_carries_the_count_and_its_facts(workers):
    outcomes = processes.measure_in_processes(plan())
    assert [run.flops_per_step for run in outcomes[MLP.benchmark_id]] == [1000] * 3
    assert [run.flops_per_step for run in outcomes[CNN.benchmark_id]] == [5000] * 3
    assert all(run.facts["flops_uncounted_ops"] == "aten.odd_mm" for run in outcomes[CNN.benchmark_id])


def test_a_case_whose_first_process_died_is_counted_by_the_next(monkeypatch):
    fake = FakeWorkers(crash_on={"mlp"})
    monkeypatch.setattr(processes.Workers, "start", fake.start)
    outcomes = processes.measure_in_processes(plan())
    first, *runs = outcomes[MLP.benchmark_id]
    assert first.kind == "crashed"
    assert [run.flops_per_step for run in runs] == [1000, 1000]
    assert sum(MLP.benchmark_id in spec["count_flops_of"] for spec in fake.specs) == 2  # the crash, then the count


def test_a_run_of_another_config_does_not_take_the_count(monkeypatch):
    fake = FakeWorkers(digest_of={3: "widened"})  # the third process meets another config
    monkeypatch.setattr(processes.Workers, "start", fake.start)
    outcomes = processes.measure_in_processes(plan())
    runs = [run for case_runs in outcomes.values() for run in case_runs]
    assert [run.flops_per_step is None for run in runs].count(True) == 1
    assert next(run for run in runs if run.flops_per_step is None).config_digest == "widened"


def test_a_plan_that_counts_no_flops_asks_no_worker_to(workers):
    quiet = SessionPlan((MLP, CNN), processes=2, measure=MeasureSettings(warmup_steps=1, count_flops=False),
                        rounds=RoundSettings())
    processes.measure_in_processes(quiet)
    assert all(spec["count_flops_of"] == [] for spec in workers.specs)


def test_a_measurement_counts_the_flops_after_its_memory_figures(monkeypatch):
    """The real measuring: the counter's dispatch mode runs after the rounds and the memory reading, so the counting
    process's figures are taken as the others' are."""
    workload = Workload(name="mlp", build_module=lambda profile: torch.nn.Linear(8, 8),
                        make_inputs=lambda profile, batch_size: torch.ones(batch_size, 8), batch_sizes={"smoke": (2,)})
    monkeypatch.setattr(workloads, "_REGISTRY", {**workloads.registered_workloads(), "mlp": workload})
    order: list[str] = []
    real_count, real_memory = measure_module.flop_count, cpu.Backend.memory_figures_bytes
    monkeypatch.setattr(measure_module, "flop_count", lambda step: order.append("count") or real_count(step))
    monkeypatch.setattr(cpu.Backend, "memory_figures_bytes",
                        lambda self: order.append("memory") or real_memory(self))
    rounds = RoundSettings(min_rounds=2, max_time_s=0.01)
    run = measure(MLP, MeasureSettings(warmup_steps=1), rounds, standalone_benchmark(MLP.benchmark_id, rounds))
    assert isinstance(run, Run) and run.flops_per_step == 2 * 2 * 8 * 8
    assert order == ["memory", "count"]
    uncounted = measure(MLP, MeasureSettings(warmup_steps=1, count_flops=False), rounds,
                        standalone_benchmark(MLP.benchmark_id, rounds))
    assert isinstance(uncounted, Run) and uncounted.flops_per_step is None
