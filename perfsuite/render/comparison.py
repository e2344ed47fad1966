"""Render a comparison for people: a terminal table, markdown, CSV and a PNG chart.

Everything here except `plot_ratio_chart` is pure and returns text. Times are shown in milliseconds and
memory in MiB; the CSV keeps the code's units (seconds, bytes) so other tools read exact figures.
matplotlib is an optional extra (`pip install 'perfsuite[plot]'`), imported only when a chart is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfsuite.analyse.compare import (
    KEY_FIELDS,
    Comparison,
    ResultSet,
    count_figure_agreement,
    geometric_mean_ratio,
)
from perfsuite.matrix.axes import EAGER, compile_mode_rank
from perfsuite.render.escape import markdown_text, plot_text, terminal_text
from perfsuite.render.units import format_percent, format_time_ratio

NOT_STATED = "?"
ABSENT = "-"


class PlottingUnavailable(RuntimeError):
    """matplotlib is missing; the message says how to install it."""


def summary_line(comparison: Comparison) -> str:
    """One line: the geometric mean of the B/A time ratios over the joined rows, how many of them set two different
    figures (step, latency) against each other or hold a figure a side does not state, and the one-sided counts."""
    rows = comparison.rows
    joined = int((rows["side"] == "both").sum())
    mean = geometric_mean_ratio(rows)
    only_a, only_b = int((rows["side"] == "A only").sum()), int((rows["side"] == "B only").sum())
    speed = "none" if mean is None else f"{format_time_ratio(mean)} (A runs at {format_percent(mean)} of B's speed)"
    agreement = count_figure_agreement(rows)
    figures = (
        "each with the same figure on both sides" if agreement["same figure"] == joined else
        f"{agreement['figures differ']} of them set a step time against a latency time, "
        f"{agreement['figure not stated']} hold a figure a side does not state"
    )
    return (
        f"geometric mean of B/A time over {joined} joined row(s): {speed}; {figures}; "
        f"{only_a} row(s) only in A, {only_b} only in B"
    )


def short_label(result_set: ResultSet) -> str:
    """A few words for a side, e.g. `mps on apple-m2-max` or `published cuda figures (article-...)`."""
    devices = ", ".join(result_set.devices)
    machines = ", ".join(result_set.machines) or "an unnamed machine"
    if result_set.published:
        return f"published {devices} figures ({machines})"
    return f"{devices} on {machines}"


def display_table(comparison: Comparison) -> pd.DataFrame:
    """The comparison as text cells for people: which figure each side's time is (step, latency; `?` not stated by
    the source), times in ms, ratio to 2 decimals (2 figures below 0.1), memory in MiB.

    Device columns appear only when a side holds more than one device (otherwise the header names it); the compile
    column only when some row is not eager.
    """
    rows = comparison.rows
    table = pd.DataFrame(
        {
            "model": rows["model"].map(_key_cell),
            "mode": rows["mode"].map(_key_cell),
            "dtype": rows["dtype"].map(_key_cell),
            "batch": rows["batch_size"].map(_key_cell),
            "profile": rows["profile"].map(_key_cell),
        }
    )
    if shows_compile_modes(rows):
        table["compile"] = rows["compile"].map(_key_cell)
    if len(comparison.a.devices) > 1 or len(comparison.b.devices) > 1:
        table["A device"] = rows["device_a"].map(_text_cell)
        table["B device"] = rows["device_b"].map(_text_cell)
    table["A figure"] = [_figure_cell(f, t) for f, t in zip(rows["figure_a"], rows["time_a_s"], strict=True)]
    table["B figure"] = [_figure_cell(f, t) for f, t in zip(rows["figure_b"], rows["time_b_s"], strict=True)]
    table["A ms"] = rows["time_a_s"].map(lambda t: _figure(t * 1e3 if _known(t) else None))
    table["B ms"] = rows["time_b_s"].map(lambda t: _figure(t * 1e3 if _known(t) else None))
    table["B/A"] = rows["ratio_b_over_a"].map(lambda r: format_time_ratio(r) if _known(r) else ABSENT)
    table["A samples/s"] = rows["samples_per_s_a"].map(_figure)
    table["B samples/s"] = rows["samples_per_s_b"].map(_figure)
    table["A MiB"] = rows["memory_a_bytes"].map(lambda m: _figure(m / 2**20 if _known(m) else None))
    table["B MiB"] = rows["memory_b_bytes"].map(lambda m: _figure(m / 2**20 if _known(m) else None))
    table["note"] = rows["note"].map(lambda n: n or "")
    return table


def shows_compile_modes(rows: pd.DataFrame) -> bool:
    """Whether the compile mode is worth a column: some row is compiled (or its source does not state it)."""
    return bool((rows["compile"] != EAGER).any())


def legend_lines(comparison: Comparison) -> list[str]:
    """What the columns mean for this comparison: the ratio, unstated fields and the memory figures."""
    lines = [ratio_legend(comparison.a, comparison.b)]
    lines.append(
        "figure = what a time is: step (steps back to back, the device drained once a round: what a training or "
        "serving loop sees per step) or latency (one step and a drain a round: what one request waits); "
        f"{NOT_STATED} = not stated by the source. A joined row whose figures differ or are not stated says so in its "
        "note: its B/A sets one figure against another, or against an unknown one."
    )
    if comparison.published_side is not None:
        lines.append(
            f"{comparison.published_side} holds published figures, not measurements: each joins the cases of its "
            "model whose fields match the ones the source states, so one figure can stand against several cases."
        )
    if shows_compile_modes(comparison.rows):
        lines.append(
            "compile = how the step ran: eager, torch.compile (inductor, reduce-overhead) or a captured CUDA graph "
            "(cuda-graph); a case joins only the same compile mode, and one that does not name it is eager."
        )
    if comparison.rows[list(KEY_FIELDS)].isna().any().any():
        lines.append(f"{NOT_STATED} = not stated by the published source.")
    figures_a = _distinct(comparison.rows["memory_figure_a"])
    figures_b = _distinct(comparison.rows["memory_figure_b"])
    if figures_a or figures_b:
        line = f"memory A: {', '.join(figures_a) or 'none'}; memory B: {', '.join(figures_b) or 'none'}"
        if figures_a and figures_b and figures_a != figures_b:
            line += " (different figures: compare memory with care)"
        lines.append(line + ".")
    return lines


def ratio_legend(a: ResultSet, b: ResultSet) -> str:
    """What B/A means, worded from the devices and machines of the two sides, e.g. `B/A = B's time / A's time
    per batch (cuda time on nvidia-h200 / cpu time on shared-2core-vm): below 1, A is slower.`"""
    # The names themselves, not a trait: the source article's ratio was of these two devices.
    article = "; the source article's CUDA time / MPS time" if (a.devices, b.devices) == (("mps",), ("cuda",)) else ""
    return (
        f"B/A = B's time / A's time per batch ({_time_words(b)} / {_time_words(a)}{article}): below 1, A is slower."
    )


def _time_words(result_set: ResultSet) -> str:
    devices = ", ".join(result_set.devices) or "unknown device"
    machines = ", ".join(result_set.machines) or "an unnamed machine"
    published = "published " if result_set.published else ""
    return f"{published}{devices} time on {machines}"


def render_terminal(comparison: Comparison) -> str:
    """The comparison as plain text for a terminal: who A and B are, the table, the summary and legend."""
    table = display_table(comparison).map(terminal_text).to_string(index=False)
    parts = [f"A: {terminal_text(comparison.a.description)}", f"B: {terminal_text(comparison.b.description)}", "",
             table, "", terminal_text(summary_line(comparison)), *map(terminal_text, legend_lines(comparison))]
    return "\n".join(parts) + "\n"


def render_markdown(comparison: Comparison) -> str:
    """The comparison as a markdown document: sides, summary, table and legend."""
    table = display_table(comparison)
    parts = [
        "# perfsuite compare", "",
        f"- **A**: {markdown_text(comparison.a.description)}",
        f"- **B**: {markdown_text(comparison.b.description)}", "",
        f"**{markdown_text(summary_line(comparison))}**", "",
        markdown_table(list(table.columns), table.itertuples(index=False)), "",
        *(f"- {markdown_text(line)}" for line in legend_lines(comparison)),
    ]
    return "\n".join(parts) + "\n"


def markdown_table(header: Sequence[str], rows: Any) -> str:
    """A GitHub-flavoured markdown table from a header and rows of cells, each escaped for it."""
    lines = ["| " + " | ".join(markdown_text(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(markdown_text(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def render_csv(comparison: Comparison) -> str:
    """The comparison rows as CSV in the code's units (seconds, bytes); empty cells where a value is absent."""
    return comparison.rows.to_csv(index=False, lineterminator="\n")


def ratio_chart_data(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, dtype and compile mode: the geometric mean of the joined rows' B/A time ratios and how many rows
    it covers.

    Columns: model, dtype, compile (`not stated` where a published source gives none), ratio_b_over_a, rows.
    """
    joined = rows[(rows["side"] == "both") & rows["ratio_b_over_a"].notna()].copy()
    for column in ("dtype", "compile"):
        joined[column] = joined[column].map(lambda v: "not stated" if v is None else v)
    groups = joined.groupby(["model", "dtype", "compile"], sort=True)["ratio_b_over_a"]
    data = groups.agg(ratio_b_over_a=lambda r: float(np.exp(np.log(r.astype(float)).mean())), rows="size")
    return data.reset_index()


def plot_ratio_chart(comparison: Comparison, path: Path) -> Path:
    """Draw the B/A time ratio per model, one bar per dtype (and compile mode, where some row is compiled), into a
    PNG at `path`; return the path.

    Raises PlottingUnavailable when matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlottingUnavailable(
            "the PNG chart needs matplotlib, which is not installed: pip install 'perfsuite[plot]'"
        ) from None
    data = ratio_chart_data(comparison.rows)
    with_compile = shows_compile_modes(comparison.rows)
    data["series"] = data["dtype"] + " " + data["compile"] if with_compile else data["dtype"]
    models = list(dict.fromkeys(data["model"]))
    # Bars of one dtype side by side, eager first, then the compile modes in their declared order.
    ordered = data.assign(compile_order=data["compile"].map(compile_mode_rank)).sort_values(["dtype", "compile_order"])
    series = list(dict.fromkeys(ordered["series"]))
    width = 0.8 / max(len(series), 1)
    figure = Figure(figsize=(max(6.0, 1.6 * len(models) + 2), 4.5), layout="constrained")
    axes = figure.add_subplot()
    for index, label in enumerate(series):
        part = data[data["series"] == label].set_index("model").reindex(models)
        positions = np.arange(len(models)) + (index - (len(series) - 1) / 2) * width
        bars = axes.bar(positions, part["ratio_b_over_a"].fillna(0.0), width, label=plot_text(label))
        labels = [format_time_ratio(r) if not math.isnan(r) else "" for r in part["ratio_b_over_a"]]
        axes.bar_label(bars, labels=labels, fontsize=8)
    axes.axhline(1.0, color="grey", linewidth=1, linestyle="--")
    axes.set_xticks(np.arange(len(models)), [plot_text(model) for model in models])
    axes.set_ylabel("B time / A time (below 1: A slower)")
    axes.set_title(
        f"A = {plot_text(short_label(comparison.a))}, B = {plot_text(short_label(comparison.b))}\n"
        "B/A time per model (geometric mean over batch sizes and modes)",
        fontsize=9,
    )
    axes.legend(title="dtype, compile" if with_compile else "dtype", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path


def _known(value: Any) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and math.isnan(value))


def _key_cell(value: Any) -> str:
    return str(value) if _known(value) else NOT_STATED


def _figure_cell(figure: Any, time_s: Any) -> str:
    """A side's figure: its name, `?` where the side has a time but states no figure, `-` where it has no case."""
    if _known(figure):
        return str(figure)
    return NOT_STATED if _known(time_s) else ABSENT


def _text_cell(value: Any) -> str:
    return str(value) if _known(value) else ABSENT


def _figure(value: Any) -> str:
    """Three significant figures; whole numbers from 100 up without an exponent."""
    if not _known(value):
        return ABSENT
    value = float(value)
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:#.3g}"


def _distinct(values: pd.Series) -> list[str]:
    return sorted({str(v) for v in values if _known(v)})

