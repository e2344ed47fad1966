"""The gains tables for people: text, markdown or CSV from `perfsuite.analyse.gains`' frames (samples/s to three
figures, ratios as `1.30x`, fractions as percent, memory in binary units), with each table's legend."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from perfsuite.analyse.gains import (
    ARTICLE_BF16_CLAIM,
    ARTICLE_WORKERS_ADVICE,
    CHANNELS_LAST_COLUMNS,
    CHECKPOINT_KEY,
    COMPILE_KEY,
    LOADER_GROUP,
    PRECISION_KEY,
    TABLES,
    Gains,
)
from perfsuite.matrix.axes import EAGER
from perfsuite.render.comparison import markdown_table
from perfsuite.render.escape import terminal_text
from perfsuite.render.units import format_bytes, format_seconds

FORMATS = ("text", "md", "csv")

ABSENT = "-"
_TITLES = {
    "precision": "Mixed precision: samples/s at bf16 / fp16 (autocast) over fp32",
    "checkpoint": "Gradient checkpointing: train-checkpoint against train",
    "channels-last": "channels_last memory format against the default",
    "compile": "torch.compile and CUDA graphs: samples/s of each compile mode over eager",
    "dataloader": "DataLoader: samples/s per storage, pin_memory and num_workers",
    "best-workers": "DataLoader: the best num_workers",
}
_HOW_TO_GET = {
    "precision": "no bf16 or fp16 results: run with --perf-dtype fp32,bf16 (or fp16)",
    "checkpoint": "no train-checkpoint results: run with --perf-mode train,train-checkpoint",
    "channels-last": "no channels-last results: run with --perf-mode train,train-channels-last,infer,"
    "infer-channels-last",
    "compile": "no compiled results: run with --perf-compile eager,inductor (and reduce-overhead,cuda-graph on CUDA)",
    "dataloader": "no DataLoader results: perfsuite's own DataLoader cases run in its repository with "
    "--perf-model dataloader --benchmark-only",
}


def display_tables(result: Gains) -> dict[str, pd.DataFrame]:
    """Each non-empty table as text cells for people: samples/s to three figures, ratios as `1.30x`,
    fractions as percent, memory in binary units; keyed by table name (`best-workers` after `dataloader`)."""
    frames = {"precision": result.precision, "checkpoint": result.checkpoint, "channels-last": result.channels_last,
              "compile": result.compiled, "dataloader": result.dataloader, "best-workers": result.best_workers}
    shown = {name: _DISPLAY[name](frame) for name, frame in frames.items() if not frame.empty}
    for name in ("dataloader", "best-workers"):
        if name in shown:
            shown[name]["pin_memory"] = shown[name]["pin_memory"].map({"True": "on", "False": "off"})
    return {
        name: _without_eager_only_compile(table).rename(columns={"batch_size": "batch", "pin_memory": "pin"})
        for name, table in shown.items()
    }


def _precision_cells(p: pd.DataFrame) -> pd.DataFrame:
    return _cells(p[PRECISION_KEY + ["dtype"]]).assign(**{
        "fp32 samples/s": p["fp32_samples_per_s"].map(_figure),
        "samples/s": p["samples_per_s"].map(_figure),
        "speed-up": p["speedup"].map(_speedup),
        "article": p["article_speedup"].map(lambda r: f"{_speedup(r)} (M2 Pro)" if _known(r) else ""),
        "note": p["note"],
    })


def _checkpoint_cells(c: pd.DataFrame) -> pd.DataFrame:
    return _cells(c[CHECKPOINT_KEY + ["memory_figure"]]).assign(**{
        "train memory": c["train_memory_bytes"].map(_bytes),
        "checkpoint memory": c["checkpoint_memory_bytes"].map(_bytes),
        "memory saved": [
            f"{_bytes(b)} ({_percent(f)})" if _known(b) else ABSENT
            for b, f in zip(c["memory_saved_bytes"], c["memory_saved_fraction"], strict=True)
        ],
        "time paid": c["time_paid_fraction"].map(_percent),
        "note": c["note"],
    })


def _channels_last_cells(cl: pd.DataFrame) -> pd.DataFrame:
    return _cells(cl[list(CHANNELS_LAST_COLUMNS[:7])]).assign(**{
        "plain samples/s": cl["plain_samples_per_s"].map(_figure),
        "channels_last samples/s": cl["channels_last_samples_per_s"].map(_figure),
        "speed-up": cl["speedup"].map(_speedup),
        "note": cl["note"],
    })


def _compile_cells(c: pd.DataFrame) -> pd.DataFrame:
    return _cells(c[[*COMPILE_KEY, "compile"]]).assign(**{
        "eager samples/s": c["eager_samples_per_s"].map(_figure),
        "samples/s": c["samples_per_s"].map(_figure),
        "speed-up": c["speedup"].map(_speedup),
        "first call": c["compile_first_call_s"].map(format_seconds),
        "graphs": _cells(c[["compile_graphs"]])["compile_graphs"],
        "graph breaks": _cells(c[["compile_graph_breaks"]])["compile_graph_breaks"],
        "GPU busy eager": c["eager_gpu_busy_fraction"].map(_share),
        "GPU busy": c["gpu_busy_fraction"].map(_share),
        "note": c["note"],
    })


def _dataloader_cells(d: pd.DataFrame) -> pd.DataFrame:
    return _cells(d[[*LOADER_GROUP, "num_workers", "batch_size", "sample_shape"]]).assign(**{
        "samples/s": d["samples_per_s"].map(_figure),
        "vs 0 workers": d["speedup_over_0_workers"].map(_speedup),
        "start-up": d["startup_s"].map(format_seconds),
    })


def _best_workers_cells(b: pd.DataFrame) -> pd.DataFrame:
    return _cells(b[[*LOADER_GROUP, "best_num_workers"]]).assign(**{
        "samples/s": b["samples_per_s"].map(_figure),
        "vs 0 workers": b["speedup_over_0_workers"].map(_speedup),
        "tried": b["worker_counts"],
        "in 2-4 (article)": b["within_article_advice"].map({True: "yes", False: "no"}),
    })


# Each table's cells for people, by table name.
_DISPLAY: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "precision": _precision_cells, "checkpoint": _checkpoint_cells, "channels-last": _channels_last_cells,
    "compile": _compile_cells, "dataloader": _dataloader_cells, "best-workers": _best_workers_cells,
}


def _without_eager_only_compile(table: pd.DataFrame) -> pd.DataFrame:
    """The table without its compile column when every row is eager: a column that says nothing."""
    if "compile" in table.columns and (table["compile"] == EAGER).all():
        return table.drop(columns="compile")
    return table


def legend_lines(result: Gains, table: str) -> list[str]:
    """What `table`'s columns mean, what it leaves out, and the article's word on it."""
    lines: list[str] = []
    if table == "precision":
        lines.append("speed-up = samples/s at the dtype / samples/s at fp32; above 1.00x mixed precision is faster.")
        if (result.precision["article_speedup"].notna()).any():
            lines.append(ARTICLE_BF16_CLAIM + ".")
    elif table == "checkpoint":
        lines.append(
            "memory saved = train's memory figure - train-checkpoint's (share of train's), only where both record "
            "the same figure; time paid = extra time per sample with checkpointing."
        )
        figures = set(result.checkpoint["memory_figure"].dropna())
        if "mps_driver_allocated_bytes" in figures:
            lines.append("mps_driver_allocated_bytes is the Metal driver's allocation after the rounds, not a peak: "
                         "a saving read from it is indicative only.")
        if "cpu_peak_rss_bytes" in figures:
            lines.append("cpu_peak_rss_bytes is the whole process's peak resident set (weights, libraries and all), "
                         "so the share saved is smaller than the share of activations saved.")
    elif table == "channels-last":
        lines.append("speed-up = samples/s in channels_last / samples/s in the default (contiguous) format.")
    elif table == "compile":
        lines.extend(_compile_legend(result.compiled))
    elif table == "dataloader":
        lines.append("vs 0 workers = samples/s over the same storage and pin_memory loaded in the main process; "
                     "start-up = first iterator to first batch (worker start included), not in samples/s.")
        lines.append(ARTICLE_WORKERS_ADVICE + ".")
    if table in result.left_out:
        lines.append(result.left_out[table] + ".")
    return lines


def _compile_legend(compiled: pd.DataFrame) -> list[str]:
    lines = [
        "speed-up = samples/s compiled / samples/s eager of the same case; below 1.00x compilation did not pay.",
        "first call = seconds of the first compiled call, compilation included (cuda-graph: the capture), not in "
        "samples/s; graphs and graph breaks as torch.compile counted them (cuda-graph compiles none; the reasons "
        "are in --format csv); "
        "GPU busy = GPU kernel time / step time (CUDA only).",
        "Compiled and eager rows pair when their parameter count and FLOPs per step agree: a compiled case's "
        "config_digest includes its compile mode, so it never equals the eager one's.",
    ]
    compared = compiled[compiled["speedup"].notna()]
    slower = compared[compared["speedup"] < 1]
    if slower.empty and not compared.empty:
        lines.append(f"Compilation paid in all {len(compared)} compared row(s).")
    elif not slower.empty:
        names = ", ".join(
            f"{r.model} {r.mode} {r.dtype} bs{r.batch_size} {r.compile} ({_speedup(r.speedup)})"
            for r in slower.itertuples()
        )
        lines.append(f"Compilation did not pay in {len(slower)} of {len(compared)} compared row(s): {names}.")
    return lines


def render(result: Gains, output_format: str = "text", tables: Sequence[str] = TABLES) -> str:
    """The tables named in `tables` as `text` (terminal), `md` (markdown) or `csv` (code units: seconds,
    bytes, ratios; one `# table` line before each table's rows)."""
    if output_format not in FORMATS:
        raise ValueError(f"unknown format {output_format!r}; valid: {', '.join(FORMATS)}")
    if output_format == "csv":
        return "\n".join(_csv_block(result, name) for name in tables)
    shown = display_tables(result)
    parts = []
    if result.ignored:
        ignored = ", ".join(result.ignored)
        parts += [terminal_text(f"ignored {len(result.ignored)} benchmark(s) without perfsuite facts: {ignored}"), ""]
    for name in tables:
        names = [name, "best-workers"] if name == "dataloader" and "best-workers" in shown else [name]
        for part in names:
            parts += _section(part, shown.get(part), output_format)
        if name in shown:
            lines = legend_lines(result, name)
            parts += [f"- {line}" for line in lines] if output_format == "md" else lines
            parts.append("")
    return "\n".join(parts)


def _section(name: str, table: pd.DataFrame | None, output_format: str) -> list[str]:
    """A table's title, then its table (or how to get one), then a blank line."""
    title = f"## {_TITLES[name]}" if output_format == "md" else _TITLES[name]
    if table is None:
        body = _HOW_TO_GET[name]
    elif output_format == "md":
        body = markdown_table(list(table.columns), table.itertuples(index=False))
    else:
        body = table.map(terminal_text).to_string(index=False)
    return [title, "", body, ""]


def _csv_block(result: Gains, name: str) -> str:
    frames = {"precision": result.precision, "checkpoint": result.checkpoint,
              "channels-last": result.channels_last, "compile": result.compiled, "dataloader": result.dataloader}
    blocks = [(name, frames[name])]
    if name == "dataloader":
        blocks.append(("best-workers", result.best_workers))
    return "\n".join(f"# {title}\n" + frame.to_csv(index=False, lineterminator="\n") for title, frame in blocks)


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.map(lambda v: str(v) if _known(v) else ABSENT).reset_index(drop=True)


def _known(value: Any) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and math.isnan(value))


def _figure(value: Any) -> str:
    """Three significant figures; whole numbers from 100 up without an exponent."""
    if not _known(value):
        return ABSENT
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:#.3g}"


def _speedup(ratio: Any) -> str:
    return f"{ratio:.2f}x" if _known(ratio) else ABSENT


def _percent(fraction: Any) -> str:
    return f"{fraction:+.0%}" if _known(fraction) else ABSENT


def _share(fraction: Any) -> str:
    return f"{fraction:.0%}" if _known(fraction) else ABSENT


def _bytes(size: Any) -> str:
    return format_bytes(int(size)) if _known(size) else ABSENT
