"""docs/measurement-quality.md from selftest files: pure rendering of their figures, no measuring.

`render_report(documents)` takes the parsed `selftest-*.json` documents (perfsuite/selftest/measure.py, analysed by
perfsuite/selftest/analysis.py) and returns the markdown; `target_rows` states each target's verdict on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.render.units import format_seconds
from perfsuite.run.devices import DEVICES, DeviceBackend, backend, is_accelerator
from perfsuite.selftest.analysis import (
    BASELINE_RUNS,
    CURRENT_RUNS,
    DETECTION_TARGET,
    FALSE_ALARM_TARGET,
    FLOOR_MARGIN,
)

GPU_ACCURACY_TARGET = 0.02
OVERHEAD_TARGET = 0.01
BAND = 0.10


@dataclass(frozen=True)
class TargetRow:
    """One target judged on one run: what, the figure as text, and whether it was met."""

    run: str
    target: str
    subject: str
    figure: str
    met: bool | None


def run_label(document: Mapping[str, Any]) -> str:
    """How the report names a run: the device and its accelerator or CPU, the processes it measured; on the
    CPU also the thread count, the load average when it started and the busy processes the run added."""
    machine = document.get("machine") or {}
    device = document["device"]
    plan = document.get("plan") or {}
    known = device_backend(device)
    name = known.machine_name(machine) if known else machine.get("accelerator_name")
    label = f"{device}" + (f" ({name})" if name else "")
    if plan.get("processes"):
        label += f", {plan['processes']} processes"
    if is_accelerator(device):
        return label
    threads = plan.get("threads")
    used = threads or (document.get("probe") or {}).get("torch_threads")
    label += f", {used} thread{'s' if used != 1 else ''}" if used else ""
    label += "" if threads else " (torch's default)"
    label += f", load {document.get('load_average_before', 0):.1f}"
    if plan.get("contention"):
        label += f", +{plan['contention']} busy processes"
    return label


def device_backend(device: str) -> DeviceBackend | None:
    """The backend of a run's device; None for a name perfsuite has no backend for (the report still renders it)."""
    return backend(device) if device in DEVICES else None


def percent(fraction: float | None, digits: int = 1) -> str:
    """0.0123 -> `1.2%`; `-` for None."""
    return "-" if fraction is None else f"{fraction * 100:.{digits}f}%"


def signed_percent(fraction: float | None) -> str:
    """A relative difference: 0.0123 -> `+1.2%`; `-` for None."""
    return "-" if fraction is None else f"{fraction * 100:+.1f}%"


def relative_difference(value: float | None, reference: float | None) -> float | None:
    """value / reference - 1; None when either is missing or the reference is not > 0."""
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference - 1


def gpu_reference_s(row: Mapping[str, Any]) -> float | None:
    """The profiler's GPU time of a CUDA accuracy row: kernel time summed per step."""
    return row.get("profiler_kernel_s")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def _met_text(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "no figure"}[met]


def _render_targets(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [
        (row.target, row.run, row.subject, row.figure, _met_text(row.met))
        for document in documents for row in target_rows(document)
    ]
    return ["## The targets", "", *_table(("target", "run", "case", "figure", "verdict"), rows)]


def _render_runs(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## The runs", ""]
    rows = []
    for document in documents:
        plan = document["plan"]
        analysis = document["analysis"]
        machine = document.get("machine") or {}
        rows.append((
            run_label(document), document.get("started_at", "-"), str(analysis["processes"]),
            f"{plan['max_time_s']:g} s", str(document.get("cpu_count", "-")),
            f"{document.get('load_average_before', 0):.1f} / {document.get('load_average_after', 0):.1f}",
            f"{document.get('wall_s', 0):.0f} s", machine.get("torch_version", document.get("torch_version", "-")),
        ))
    lines += _table(("run", "started (UTC)", "processes K", "max time per case", "CPU cores",
                     "load average before / after", "wall", "torch"), rows)
    lines.append("Commands:")
    lines.append("")
    for document in documents:
        lines.append(f"- {run_label(document)}: `{document.get('command', 'perfsuite selftest')}`"
                     f"{' (file ' + document['source_file'] + ')' if document.get('source_file') else ''}")
        for note in document.get("notes", []):
            lines.append(f"  - {note}")
        if document.get("worker_failures"):
            lines.append(f"  - failed processes: {len(document['worker_failures'])}: "
                         f"{document['worker_failures'][0][:200]}")
    return lines + [""]


ACCURACY_REFERENCES = (
    ("timer_blocked_s", "Timer blocked_autorange"), ("synced_s", "one step + drain per round"),
    ("timer_per_call_s", "Timer per call"), ("profiler_kernel_s", "profiler GPU kernel time"),
)


def _render_accuracy(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """One table per run: the suite's median step (pipelined rounds) beside each reference measured in turn with it;
    references a run did not take (the profiler off CUDA, older files) are left out."""
    lines = ["## Accuracy", ""]
    for document in documents:
        accuracy = (document.get("probe") or {}).get("accuracy", [])
        if not accuracy:
            continue
        keys = [(key, title) for key, title in ACCURACY_REFERENCES if any(key in row for row in accuracy)]
        header = ("case", "steps a round", "suite median", *[c for _, title in keys for c in (title, "diff")])
        rows: list[Sequence[str]] = []
        for row in accuracy:
            if "error" in row:
                rows.append((row["name"], row["error"][:120], *["-"] * (len(header) - 2)))
                continue
            suite = row["suite_s"]
            cells = [row["name"], str(row.get("steps_per_round", 1)), format_seconds(suite)]
            for key, _ in keys:
                cells += [format_seconds(row.get(key)), signed_percent(relative_difference(suite, row.get(key)))]
            rows.append(cells)
        lines += [f"### {run_label(document)}", ""] + _table(header, rows)
    return lines


def _render_overhead(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = []
    for document in documents:
        overhead = (document.get("probe") or {}).get("overhead") or {}
        if "harness_round_s" not in overhead:
            rows.append((run_label(document), overhead.get("error", "not measured"), *["-"] * 6))
            continue
        rows.append((
            run_label(document), format_seconds(overhead["harness_round_s"]),
            percent(overhead["harness_fraction_of_1ms"], 3), format_seconds(overhead["timer_pair_s"]),
            format_seconds(overhead["synchronize_idle_s"]), format_seconds(overhead["tiny_step_round_s"]),
            format_seconds(overhead.get("tiny_step_event_s")), format_seconds(overhead["harness_wall_per_round_s"]),
        ))
    return ["## Overhead", "", *_table(
        ("run", "round of an empty step", "of a 1 ms step", "timer pair alone", "synchronize, idle device",
         "round of a one-element add", "its device time (events)", "wall time per round"), rows)]


def target_rows(document: Mapping[str, Any]) -> list[TargetRow]:
    """Each target judged on one run (None for `met` where the run has no figure): false alarms <= 1% for every
    unchanged case, >= 95% detection of every slowdown at least 1.5x the floor the gate reported, per current
    process count; on CUDA the GPU timing accuracy; the harness overhead."""
    label = run_label(document)
    analysis = document["analysis"]
    rows = []
    for current, by_case in analysis["false_alarms"].items():
        for name, rates in by_case.items():
            rows.append(TargetRow(
                label, f"false alarms <= 1% (K = {current})", name, percent(rates["gate_regressed"]),
                rates["gate_regressed"] <= FALSE_ALARM_TARGET,
            ))
    for current, by_case in analysis["detection"].items():
        for name, rates in by_case.items():
            if rates["expected"]:
                rows.append(TargetRow(
                    label, f">= 95% detection of a slowdown >= {FLOOR_MARGIN:g}x the floor (K = {current})",
                    f"{name} (+{rates['nominal_slowdown'] * 100:.0f}%)", percent(rates["gate_regressed"]),
                    rates["gate_regressed"] >= DETECTION_TARGET,
                ))
    for current, by_case in analysis.get("scaled_detection", {}).items():
        for name, rates in by_case.items():
            rows.append(TargetRow(
                label, f">= 95% detection of {FLOOR_MARGIN:g}x the case's own floor, runs scaled (K = {current})",
                f"{name} (+{rates['slowdown'] * 100:.0f}%)", percent(rates["gate_regressed"]),
                rates["gate_regressed"] >= DETECTION_TARGET,
            ))
    known = device_backend(document["device"])
    if known is not None and known.profiles_kernels:
        for row in (document.get("probe") or {}).get("accuracy", []):
            difference = relative_difference(row.get("suite_s"), gpu_reference_s(row))
            rows.append(TargetRow(
                label, "GPU timing within 2% of the profiler's GPU time", row["name"],
                signed_percent(difference) if difference is not None else row.get("error", "no figure"),
                None if difference is None else abs(difference) <= GPU_ACCURACY_TARGET,
            ))
    overhead = (document.get("probe") or {}).get("overhead") or {}
    share = overhead.get("harness_fraction_of_1ms")
    rows.append(TargetRow(label, "overhead <= 1% of a 1 ms step", "empty step",
                          percent(share, 3) if share is not None else overhead.get("error", "no figure"),
                          None if share is None else share <= OVERHEAD_TARGET))
    return rows


def _render_false_alarms(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## False alarms and floors", "",
             f"Unchanged cases: every flag is a false alarm. Baseline: {BASELINE_RUNS} runs; current: K runs of other "
             "processes. `floor` is the median smallest slowdown the gate said it would catch with 95% power.", ""]
    rows = []
    for document in documents:
        analysis = document["analysis"]
        for current, by_case in analysis["false_alarms"].items():
            for name, r in by_case.items():
                spread = analysis["run_spread"].get(name)
                floor = r["floor"]
                rows.append((
                    run_label(document), current, name, str(r["splits"]),
                    "-" if spread is None else percent(spread), percent(r["gate_regressed"]),
                    percent(r["gate_improved"]),
                    percent(r["gate_uncalibrated"]), "-" if floor is None else f">= {percent(floor)}",
                    "-" if floor is None else "above" if floor > BAND else "under",
                    percent(r["pytest_benchmark"]), percent(r["asv"]),
                ))
    return lines + _table(
        ("run", "K", "case", "splits", "run-to-run sd", "gate: regressed", "gate: improved", "gate: uncalibrated",
         "floor", "floor vs 10% band", "pytest-benchmark median:10%", "asv 1.1 & p<0.002"), rows)


def _render_detection(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Detection", "",
             "The chain with extra blocks, judged as the plain chain that became slower. `expected` marks the "
             f"slowdowns at least {FLOOR_MARGIN:g}x the plain chain's floor, where >= 95% must be caught.", ""]
    rows = []
    for document in documents:
        for current, by_case in document["analysis"]["detection"].items():
            for r in by_case.values():
                floor = r["chain_floor"]
                rows.append((
                    run_label(document), current, f"+{r['nominal_slowdown'] * 100:.0f}%",
                    f"x{r['median_ratio']:.3f}", "-" if floor is None else f">= {percent(floor)}",
                    "yes" if r["expected"] else "no", percent(r["gate_regressed"]), percent(r["pytest_benchmark"]),
                    percent(r["asv"]),
                ))
    return lines + _table(
        ("run", "K", "slowdown (work)", "measured ratio", "chain floor", "expected", "gate", "pytest-benchmark",
         "asv"), rows)


def _render_scaled_detection(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Detection at each case's own floor", "",
             f"Every unchanged case's current runs with their round times multiplied by 1 + {FLOOR_MARGIN:g} x the "
             "case's median reported floor, judged against the same baseline runs: the floor claim checked case by "
             "case on this case's noise (scaled runs, not re-measured ones).", ""]
    rows = []
    for document in documents:
        for current, by_case in document["analysis"].get("scaled_detection", {}).items():
            for name, r in by_case.items():
                rows.append((
                    run_label(document), current, name, f"+{r['slowdown'] * 100:.0f}%", percent(r["gate_regressed"]),
                    percent(r["gate_uncalibrated"]), percent(r["pytest_benchmark"]), percent(r["asv"]),
                ))
    return lines + _table(
        ("run", "K", "case", "slowdown (scaled)", "gate", "gate: uncalibrated", "pytest-benchmark", "asv"), rows)


def render_report(documents: Sequence[Mapping[str, Any]]) -> str:
    """The whole report: how it is measured, the targets, then one section per measure with every run side by
    side."""
    documents = sorted(documents, key=lambda d: (is_accelerator(d["device"]), run_label(d)))
    lines = [
        "# Measurement quality",
        "",
        "How accurate perfsuite's timings are, what the harness costs per round, and how often the regression",
        "gate raises a false alarm or misses a slowdown, measured by `perfsuite selftest` (perfsuite/selftest/)",
        "and rendered from docs/records/selftest/*.json by `perfsuite selftest --report docs/records/selftest/*.json`.",
        "Do not edit by hand: re-render.",
        "",
        *METHOD,
        *_render_targets(documents),
        *_render_runs(documents),
        *_render_accuracy(documents),
        *_render_overhead(documents),
        *_render_false_alarms(documents),
        *_render_detection(documents),
        *_render_scaled_detection(documents),
    ]
    return "\n".join(lines).rstrip() + "\n"


METHOD = [
    "## How it is measured",
    "",
    "- **Accuracy**: the suite's median round of a case (pytest-benchmark's round loop around",
    "  `PreparedCase.timed_step`, the step then the device synchronize) against independent references for",
    "  the same prepared step, in three alternating turns: `torch.utils.benchmark.Timer` (single calls, and on",
    "  the CPU `blocked_autorange`); on CUDA, CUDA events around each step and torch.profiler's GPU time.",
    "- **Overhead**: pytest-benchmark's runner timing `PreparedCase.timed_step` around a step that does nothing.",
    "- **Runs**: K processes (`python -m perfsuite.selftest.measure worker`, one after another) each time the same",
    "  cases with the one measuring path (`perfsuite.run.measure.measure`, as a `--perf-processes` worker does), in an",
    "  order shuffled per process: ResNet18 smoke infer and train, a chain of 20 identical matmul blocks, and the",
    "  chain with 1, 2, 3, 5 or 10 extra blocks (+5, +10, +15, +25, +50% of the work).",
    f"- **Judging**: seeded splits of the processes into a baseline history of {BASELINE_RUNS} runs and K current",
    f"  runs of other processes (K in {', '.join(map(str, CURRENT_RUNS))}), each judged by the gate's own",
    "  `perfsuite.judge.verdicts.judge` (the entry built as the store keeps it; the machine spread pooled over the",
    "  baseline runs of every unchanged case, as the gate pools a baseline file) with the default 10% band.",
    "  Splits share processes, so they are not independent draws.",
    "- **The rules users would otherwise pick**, on the same runs: pytest-benchmark's",
    "  `--benchmark-compare-fail=median:10%` (its last saved run against the first current run) and asv's",
    "  factor 1.1 with a Mann-Whitney p < 0.002 on the rounds of every run of each side",
    "  (asv/commands/compare.py, asv/statistics.py).",
    "- **Conditions**: this 2-core machine is shared with other developers; each run's name carries its load",
    "  average when it started; `--contention N` adds N bursty busy processes; `--threads N` sets the threads.",
    "",
]
