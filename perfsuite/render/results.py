"""The results a person reads after a run: one table per device with the median step time and what it times (the
figure: `step`, steps back to back as a loop runs them, or `latency`, one step and a drain), the latency of one
inference step beside it, samples/s, TFLOP/s, the case's memory figure and its verdict. Pure functions from
measurements and verdict names to text."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

import pandas as pd

from perfsuite.matrix.axes import ACCELERATOR_DEFAULT_PROFILE, CPU_DEFAULT_PROFILE, base_mode
from perfsuite.matrix.cases import MatrixOptions
from perfsuite.records import Measurement
from perfsuite.render.escape import markdown_text, terminal_text
from perfsuite.render.units import format_bytes, format_seconds

RESULT_COLUMNS = ("case", "median", "figure", "latency", "samples/s", "TFLOP/s", "memory", "memory figure", "runs",
                  "verdict")


def result_rows(measurements: Sequence[Measurement], verdicts: Mapping[str, str]) -> dict[str, list[dict[str, str]]]:
    """Display rows by device, in the order measured; `verdicts` maps a benchmark id to its verdict. Names are as
    measured: each renderer escapes them for its target."""
    by_device: dict[str, list[dict[str, str]]] = {}
    for measurement in measurements:
        case, last = measurement.case, measurement.last
        tflops = measurement.tflops_per_s
        by_device.setdefault(case.device, []).append({
            "case": case.benchmark_id.removeprefix(f"{case.device}-"),
            "median": format_seconds(measurement.median_s),
            "figure": last.figure,
            "latency": _latency(measurement),
            "samples/s": f"{measurement.samples_per_s:.4g}",
            "TFLOP/s": "-" if tflops is None else f"{tflops:.3g}",
            "memory": format_bytes(last.memory_bytes),
            "memory figure": last.memory_figure + ("" if _own_memory(measurement) else " (whole process so far)"),
            "runs": str(len(measurement.runs)),
            "verdict": verdicts.get(case.benchmark_id, "-"),
        })
    return by_device


def _latency(measurement: Measurement) -> str:
    """The median over runs of one inference step and its drain (what one request waits); "-" for training, where a
    loop never waits after each step, and where it was not measured."""
    latencies = [run.latency_median_s for run in measurement.runs if run.latency_median_s is not None]
    if base_mode(measurement.case.mode) != "infer" or not latencies:
        return "-"
    return format_seconds(statistics.median(latencies))


def _own_memory(measurement: Measurement) -> bool:
    """Whether the memory figure shown is the case's own (a process's peak RSS is only in a process of its own)."""
    return measurement.last.memory_bytes is None or all(run.own_memory_bytes is not None for run in measurement.runs)


def render_results(measurements: Sequence[Measurement], verdicts: Mapping[str, str]) -> str:
    """A fixed-width table per device, headed by the device's name; '' when nothing was measured."""
    blocks = []
    for device, rows in result_rows(measurements, verdicts).items():
        table = pd.DataFrame(rows, columns=list(RESULT_COLUMNS)).map(terminal_text).to_string(index=False)
        blocks.append(f"{terminal_text(device)}:\n{table}")
    return "\n\n".join(blocks)


def render_results_markdown(measurements: Sequence[Measurement], verdicts: Mapping[str, str]) -> str:
    """The same tables in markdown, a heading per device."""
    lines = []
    for device, rows in result_rows(measurements, verdicts).items():
        lines += [f"## {markdown_text(device)}", "", "| " + " | ".join(RESULT_COLUMNS) + " |",
                  "|" + "|".join("---" for _ in RESULT_COLUMNS) + "|"]
        lines += ["| " + " | ".join(markdown_text(row[c]) for c in RESULT_COLUMNS) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def session_header(options: MatrixOptions, profile_chosen: bool, models: Sequence[str], processes: int) -> list[str]:
    """The lines pytest's header shows: what the session measures and, when the smoke profile runs because no
    accelerator is selected, why and how to run the article's sizes."""
    note = []
    if not profile_chosen and options.profile == CPU_DEFAULT_PROFILE:
        note = [
            f"perfsuite: no accelerator is selected, so the {CPU_DEFAULT_PROFILE} profile runs (the same architectures "
            f"scaled down, minutes on a few CPU cores); the article's sizes: add --perf-profile "
            f"{ACCELERATOR_DEFAULT_PROFILE}"
        ]
    return note + [terminal_text(
        f"perfsuite: profile={options.profile} device={','.join(options.devices)} dtype={','.join(options.dtypes)} "
        f"model={','.join(models)} compile={','.join(options.compile_modes)} processes={processes}"
    )]
