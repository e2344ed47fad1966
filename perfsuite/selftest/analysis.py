"""The selftest's analysis: how often the gate errs, judged through the gate's own decision code.

Pure functions on the workers' records (each a process's runs of every case). For each case and each
current process count K, many seeded splits of the processes draw a baseline history of `BASELINE_RUNS`
runs and K current runs from other processes; every split is judged by `perfsuite.judge.verdicts.judge`
(the baseline entry built as the store keeps it, the machine spread pooled over the baseline runs of every
unchanged case, as the gate pools a baseline file), and, on the same runs, by the rules users would
otherwise pick: pytest-benchmark's `--benchmark-compare-fail=median:10%` (its saved run against this run)
and asv's factor 1.1 with Mann-Whitney p < 0.002 (the rounds of every run of each side).

Unchanged cases give false-alarm rates; the matmul chain with extra blocks, judged as the plain chain that
became slower, gives detection rates of real extra work, beside the floor the gate reported for the plain
chain. Every unchanged case is also judged with its current runs' round times scaled by 1 + FLOOR_MARGIN x
its own reported floor: the floor claim checked case by case (scaled, not re-measured: it shows what the
rule does with this case's noise, not how the model's time responds to slower kernels).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from perfsuite.judge.stats import asv_fails, pytest_benchmark_fails, within_spread
from perfsuite.judge.verdicts import judge
from perfsuite.records import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE, BaselineEntry, Measurement, Run
from perfsuite.run.wire import run_from_json
from perfsuite.store.baselines import stored_run

# Three recordings of 3 processes, as the README recommends: 3 current runs can then reach p < 0.01.
BASELINE_RUNS = 9
CURRENT_RUNS = (1, 3)
CHAIN_NAME = "matmul-chain"
FALSE_ALARM_TARGET = 0.01
DETECTION_TARGET = 0.95
# A slowdown is expected to be caught once it is at least this many times the reported floor.
FLOOR_MARGIN = 1.5


def runs_by_case(workers: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, Run]]:
    """Every case's run in every worker process: name -> process index -> Run."""
    table: dict[str, dict[int, Run]] = {}
    for worker in workers:
        for record in worker["records"]:
            table.setdefault(record["name"], {})[int(worker["index"])] = run_from_json(record["run"])
    return table


def extra_blocks_by_case(workers: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The extra matmul blocks each case carries (0 for the unchanged ones)."""
    return {r["name"]: int(r["extra_blocks"]) for w in workers for r in w["records"]}


def baseline_entry(runs: Sequence[Run], identity: Mapping[str, str]) -> BaselineEntry:
    """The entry the store would hold after recording `runs` (rounds at most 50, 4 significant figures)."""
    last = runs[-1]
    return BaselineEntry(
        case=last.case, config_digest=last.config_digest, torch_version=last.torch_version, threads=last.threads,
        machine=dict(identity), memory_figure=last.memory_figure, samples_per_step=last.samples_per_step,
        flops_per_step=last.flops_per_step, gpu_busy_fraction=last.gpu_busy_fraction, tolerance=DEFAULT_TOLERANCE,
        memory_tolerance=DEFAULT_MEMORY_TOLERANCE,
        # Each selftest process ran at its own time, so each stored run is its own recording session.
        runs=tuple(stored_run(r.round_times_s, None, _recorded_at(index), None) for index, r in enumerate(runs)),
    )


def _recorded_at(index: int) -> str:
    return f"2000-01-01T00:{index // 60:02d}:{index % 60:02d}Z"


def as_case(run: Run, template: Run) -> Run:
    """`run` under the identity of `template`: a slowed chain judged as the plain chain that became slower."""
    return Run(
        case=template.case, round_times_s=run.round_times_s, samples_per_step=template.samples_per_step,
        flops_per_step=template.flops_per_step, memory_figure=template.memory_figure, memory_bytes=None,
        config_digest=template.config_digest, torch_version=template.torch_version, threads=template.threads,
    )


def slowed_by(run: Run, slowdown: float) -> Run:
    """`run` with every round time multiplied by 1 + `slowdown`."""
    return replace(run, round_times_s=tuple(t * (1 + slowdown) for t in run.round_times_s))


def splits(processes: Sequence[int], current_runs: int, count: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """`count` seeded draws of (baseline processes, current processes), disjoint, BASELINE_RUNS and
    `current_runs` of them; empty when there are too few processes."""
    needed = BASELINE_RUNS + current_runs
    if len(processes) < needed:
        return []
    rng = random.Random(seed)
    drawn = []
    for _ in range(count):
        chosen = rng.sample(sorted(processes), needed)
        drawn.append((chosen[:BASELINE_RUNS], chosen[BASELINE_RUNS:]))
    return drawn


def judge_split(
    baseline_runs: Sequence[Run],
    current_runs: Sequence[Run],
    identity: Mapping[str, str],
    spread_groups: Sequence[Sequence[float]],
) -> dict[str, Any]:
    """One split judged by the gate (through `judge`) and by pytest-benchmark's and asv's rules."""
    entry = baseline_entry(baseline_runs, identity)
    measurement = Measurement(current_runs[0].case, tuple(current_runs))
    verdict = judge(measurement, entry, identity, machine_spread=within_spread(spread_groups))
    return {
        "gate": verdict.status,
        "detectable_slowdown": verdict.detectable_slowdown,
        "ratio": verdict.ratio,
        "pytest_benchmark": pytest_benchmark_fails(current_runs[0].median_s, baseline_runs[-1].median_s, 0.10),
        "asv": asv_fails(
            [t for r in current_runs for t in r.round_times_s], [t for r in baseline_runs for t in r.round_times_s]
        ),
    }


def rates(judgements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How often each rule flagged a regression over `judgements`, the gate's other outcomes, and the median
    floor the gate reported."""
    count = len(judgements)
    floors = [j["detectable_slowdown"] for j in judgements if j["detectable_slowdown"] is not None]
    return {
        "splits": count,
        "gate_regressed": sum(j["gate"] == "regressed" for j in judgements) / count,
        "gate_improved": sum(j["gate"] == "improved" for j in judgements) / count,
        "gate_uncalibrated": sum(j["gate"] == "uncalibrated" for j in judgements) / count,
        "pytest_benchmark": sum(j["pytest_benchmark"] for j in judgements) / count,
        "asv": sum(j["asv"] for j in judgements) / count,
        "floor": statistics.median(floors) if floors else None,
        "median_ratio": statistics.median(j["ratio"] for j in judgements),
    }


def analyse(
    workers: Sequence[Mapping[str, Any]], identity: Mapping[str, str], split_count: int, seed: int
) -> dict[str, Any]:
    """False alarms of every unchanged case and detection of every slowed chain, per current process count.

    Returns {"false_alarms": {K: {case: rates}}, "detection": {K: {case: rates + nominal slowdown + whether
    it is at least FLOOR_MARGIN times the plain chain's floor}}, "scaled_detection": {K: {case: rates of the
    case's runs slowed by FLOOR_MARGIN times its floor + that slowdown}}, "processes": count, "run_spread":
    {case: sd of log run medians}}.
    """
    table = runs_by_case(workers)
    blocks = extra_blocks_by_case(workers)
    unchanged = sorted(name for name in table if blocks[name] == 0)
    slowed = sorted((name for name in table if blocks[name] > 0), key=lambda name: blocks[name])
    processes = sorted({int(w["index"]) for w in workers})
    false_alarms: dict[str, dict[str, Any]] = {}
    detection: dict[str, dict[str, Any]] = {}
    scaled_detection: dict[str, dict[str, Any]] = {}
    for current_runs in CURRENT_RUNS:
        drawn = splits(processes, current_runs, split_count, seed + current_runs)
        if not drawn:
            continue
        by_case, sides = _judge_splits(table, unchanged, slowed, drawn, identity)
        key = str(current_runs)
        false_alarms[key] = {name: rates(by_case[name]) for name in unchanged if by_case[name]}
        chain_floor = false_alarms[key].get(CHAIN_NAME, {}).get("floor")
        detection[key] = _detection(by_case, slowed, blocks, chain_floor)
        scaled_detection[key] = _scaled_detection(false_alarms[key], sides, identity)
    return {
        "processes": len(processes),
        "baseline_runs": BASELINE_RUNS,
        "false_alarms": false_alarms,
        "detection": detection,
        "scaled_detection": scaled_detection,
        "run_spread": {name: _log_spread([r.median_s for r in table[name].values()]) for name in unchanged},
    }


# A case's baseline runs, current runs and the groups of unchanged cases' baseline medians, per split.
Sides = list[tuple[list[Run], list[Run], list[list[float]]]]


def _judge_splits(
    table: Mapping[str, Mapping[int, Run]], unchanged: Sequence[str], slowed: Sequence[str],
    drawn: Sequence[tuple[Sequence[int], Sequence[int]]], identity: Mapping[str, str],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Sides]]:
    """Every split judged through the gate: each unchanged case against its own baseline runs, each slowed chain
    against the plain chain's; and the unchanged cases' sides, kept for the scaled detection."""
    by_case: dict[str, list[dict[str, Any]]] = {name: [] for name in (*unchanged, *slowed)}
    sides: dict[str, Sides] = {name: [] for name in unchanged}
    for baseline_indices, current_indices in drawn:
        groups = [[table[name][i].median_s for i in baseline_indices if i in table[name]] for name in unchanged]
        for name in unchanged:
            base = [table[name][i] for i in baseline_indices if i in table[name]]
            current = [table[name][i] for i in current_indices if i in table[name]]
            if base and current:
                by_case[name].append(judge_split(base, current, identity, groups))
                sides[name].append((base, current, groups))
        plain = table.get(CHAIN_NAME, {})
        for name in slowed:
            base = [plain[i] for i in baseline_indices if i in plain]
            current = [as_case(table[name][i], plain[i]) for i in current_indices if i in table[name] and i in plain]
            if base and current:
                by_case[name].append(judge_split(base, current, identity, groups))
    return by_case, sides


def _detection(by_case: Mapping[str, list[dict[str, Any]]], slowed: Sequence[str], blocks: Mapping[str, int],
               chain_floor: float | None) -> dict[str, Any]:
    """Each slowed chain's rates, its nominal slowdown, and whether it is at least FLOOR_MARGIN times the plain
    chain's floor (where the gate should see it)."""
    detection: dict[str, Any] = {}
    for name in slowed:
        if not by_case[name]:
            continue
        nominal = blocks[name] / 20
        detection[name] = {
            **rates(by_case[name]),
            "nominal_slowdown": nominal,
            "chain_floor": chain_floor,
            "expected": chain_floor is not None and nominal >= FLOOR_MARGIN * chain_floor,
        }
    return detection


def _scaled_detection(false_alarms: Mapping[str, Mapping[str, Any]], sides: Mapping[str, Sides],
                      identity: Mapping[str, str]) -> dict[str, Any]:
    """Each unchanged case's current runs slowed by FLOOR_MARGIN times its own floor, judged again: its rates and
    that slowdown."""
    scaled: dict[str, Any] = {}
    for name, case_rates in false_alarms.items():
        if case_rates["floor"] is None:
            continue
        slowdown = FLOOR_MARGIN * case_rates["floor"]
        judged = [
            judge_split(base, [slowed_by(run, slowdown) for run in current], identity, groups)
            for base, current, groups in sides[name]
        ]
        scaled[name] = {**rates(judged), "slowdown": slowdown}
    return scaled


def _log_spread(medians_s: Sequence[float]) -> float | None:
    spread = within_spread([medians_s])
    return None if spread is None else spread.log_sd
