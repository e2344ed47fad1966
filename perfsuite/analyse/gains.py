"""What the source article's advice gains, measured: one run's results set side by side with their partners.

Five tables from one pytest-benchmark JSON (`--benchmark-json`):

1. precision: bf16 / fp16 (autocast) samples/s over fp32, per device, model, mode, batch size and profile,
   beside the article's claim (section 2.2) that bf16 makes training 30% faster on an M2 Pro;
2. checkpoint: `train-checkpoint` against `train`: memory saved and time paid, where both record the
   same memory figure;
3. channels-last: `train-channels-last` / `infer-channels-last` samples/s over `train` / `infer`;
4. compile: samples/s of each compile mode (inductor, reduce-overhead, cuda-graph) over eager, with the
   compiled case's first-call seconds and graph breaks and both sides' GPU busy share;
5. dataloader: samples/s per storage, pin_memory and num_workers, and the best num_workers, beside the
   article's advice of 2-4 workers on a Mac (section 4.2).

Every table pairs rows of one compile mode only. A variant whose partner did not run (or ran with another
model config: `config_digest` differs; for the compile table, whose digests differ by design, the parameter
count or FLOPs per step differ) is listed with a note, and so is a partner without its variant where the
variant ran at another batch size; the legend counts the partner rows with no variant at all, which are not
shown.

Everything here is pure: a parsed JSON document in, frames out, in the code's units (times in seconds,
memory in bytes, gains as ratios); perfsuite.render.gains shows them to people.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from perfsuite.analyse.compare import (
    CASE_COLUMNS,
    REQUIRED_FACTS,
    CompareError,
    json_object,
    result_set_from_document,
)
from perfsuite.matrix.axes import EAGER, compile_mode_rank

TABLES = ("precision", "checkpoint", "channels-last", "compile", "dataloader")

ARTICLE_BF16_TRAINING_SPEEDUP = 1.30
ARTICLE_BF16_CLAIM = (
    "article, section 2.2: bf16 makes training 30% faster on an M2 Pro (it names no model, batch size or torch "
    "version; like for like only on mps)"
)
ARTICLE_WORKERS_ADVICE = "article, section 4.2: num_workers 2-4 on a Mac (more fragments memory); mmap for large data"
ARTICLE_WORKERS_RANGE = (2, 4)

# Every table pairs rows of one compile mode: a compiled bf16 row meets the compiled fp32 row, never the eager one.
PRECISION_KEY = ["device", "model", "mode", "batch_size", "profile", "compile"]
CHECKPOINT_KEY = ["device", "dtype", "model", "batch_size", "profile", "compile"]
CHANNELS_LAST_KEY = ["device", "dtype", "model", "plain_mode", "batch_size", "profile", "compile"]
COMPILE_KEY = ["device", "dtype", "model", "mode", "batch_size", "profile"]
LOADER_GROUP = ["device", "profile", "storage", "pin_memory"]

PRECISION_COLUMNS = (
    *PRECISION_KEY, "dtype", "fp32_samples_per_s", "samples_per_s", "speedup", "article_speedup", "note",
)
CHECKPOINT_COLUMNS = (
    *CHECKPOINT_KEY, "memory_figure", "train_memory_bytes", "checkpoint_memory_bytes", "memory_saved_bytes",
    "memory_saved_fraction", "train_samples_per_s", "checkpoint_samples_per_s", "time_paid_fraction", "note",
)
CHANNELS_LAST_COLUMNS = (
    "device", "dtype", "model", "mode", "batch_size", "profile", "compile", "plain_samples_per_s",
    "channels_last_samples_per_s", "speedup", "note",
)
COMPILE_COLUMNS = (
    *COMPILE_KEY, "compile", "eager_samples_per_s", "samples_per_s", "speedup", "compile_first_call_s",
    "compile_graphs", "compile_graph_breaks", "eager_gpu_busy_fraction", "gpu_busy_fraction",
    "compile_graph_break_reasons", "note",
)
LOADER_COLUMNS = (
    *LOADER_GROUP, "num_workers", "batch_size", "sample_shape", "samples_per_s", "startup_s",
    "speedup_over_0_workers", "benchmark_id",
)
BEST_WORKERS_COLUMNS = (*LOADER_GROUP, "best_num_workers", "samples_per_s", "speedup_over_0_workers",
                        "worker_counts", "within_article_advice")

_WHAT_TO_PASS = (
    "pass the JSON a perfsuite benchmark run writes with --benchmark-json (or a file pytest-benchmark saved "
    "under .benchmarks/ with --benchmark-save / --benchmark-autosave)"
)


class GainsError(Exception):
    """Results that cannot be read; the message says what was wrong, where, and what to do."""


@dataclass(frozen=True, eq=False)
class Results:
    """One run's rows: `models` has compare's case columns (`perfsuite.analyse.compare.CASE_COLUMNS`) and the
    facts `MODEL_FACTS` (null where a run did not record one), `loaders` one row per DataLoader case; `ignored`
    names benchmarks without perfsuite facts."""

    models: pd.DataFrame
    loaders: pd.DataFrame
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class Gains:
    """The five tables (columns `*_COLUMNS`, code units) and what they leave out, by table name."""

    precision: pd.DataFrame
    checkpoint: pd.DataFrame
    channels_last: pd.DataFrame
    compiled: pd.DataFrame
    dataloader: pd.DataFrame
    best_workers: pd.DataFrame
    left_out: Mapping[str, str]
    ignored: tuple[str, ...] = ()


# --- reading ------------------------------------------------------------------------------------------


def results_from_document(document: object, source: str) -> Results:
    """The model and DataLoader rows of a parsed pytest-benchmark JSON document; `source` names it in messages.

    Raises GainsError when the document is not pytest-benchmark's, holds no benchmarks, or none of them
    carries perfsuite's facts in extra_info.
    """
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        found = f"a JSON object with keys {', '.join(sorted(document)[:6])}" if isinstance(document, dict) else (
            f"a JSON {type(document).__name__}"
        )
        raise GainsError(f"{source}: not a pytest-benchmark file: found {found}, no 'benchmarks' list; {_WHAT_TO_PASS}")
    benchmarks = document["benchmarks"]
    if not benchmarks:
        raise GainsError(f"{source}: the run holds no benchmarks (all skipped or deselected?); re-run the benchmarks")
    model_benchmarks, loader_records, ignored = [], [], []
    for benchmark in benchmarks:
        if not isinstance(benchmark, dict):
            raise GainsError(f"{source}: 'benchmarks' must be a list of objects; {_WHAT_TO_PASS}")
        benchmark_id = str(benchmark.get("param") or benchmark.get("name") or "?")
        facts = json_object(benchmark.get("extra_info"))
        if facts.get("kind") == "dataloader":
            loader_records.append(_loader_record(facts, benchmark_id, f"{source}, benchmark {benchmark_id}"))
        elif all(f in facts for f in REQUIRED_FACTS):
            model_benchmarks.append(benchmark)
        else:
            ignored.append(benchmark_id)
    if not model_benchmarks and not loader_records:
        raise GainsError(
            f"{source}: none of its {len(benchmarks)} benchmark(s) carries perfsuite's facts in extra_info "
            f"(e.g. {ignored[0]}), so it was not written by a perfsuite run; run perfsuite's benchmarks with "
            "--benchmark-json and pass that file"
        )
    try:
        cases = (
            result_set_from_document({"benchmarks": model_benchmarks}, source).cases
            if model_benchmarks else pd.DataFrame(columns=list(CASE_COLUMNS))
        )
    except CompareError as error:
        raise GainsError(str(error)) from None
    # compare reads the benchmarks in order, one case each: the facts line up with its rows.
    facts = _model_facts([json_object(b.get("extra_info")) for b in model_benchmarks])
    models = pd.concat([cases.reset_index(drop=True), facts], axis=1)
    loaders = pd.DataFrame(loader_records, columns=list(_LOADER_FIELDS))
    return Results(models, loaders, tuple(ignored))


# What gains reads from a model case's extra_info beyond compare's case columns; compile facts only compiled
# cases record, gpu_busy_fraction only CUDA ones.
MODEL_FACTS = ("parameter_count", "flops_per_step", "compile_first_call_s", "compile_graphs", "compile_graph_breaks",
               "compile_graph_break_reasons", "gpu_busy_fraction")
_WHOLE_NUMBER_FACTS = ("parameter_count", "flops_per_step", "compile_graphs", "compile_graph_breaks")


def _model_facts(extra_infos: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The `MODEL_FACTS` of each case: whole numbers as nullable integers, seconds and fractions as floats,
    the graph-break reasons as text; null where absent or not a number."""
    columns: dict[str, Any] = {}
    for name in MODEL_FACTS:
        values = [facts.get(name) for facts in extra_infos]
        if name == "compile_graph_break_reasons":
            columns[name] = pd.Series([v if isinstance(v, str) and v else None for v in values], dtype=object)
        elif name in _WHOLE_NUMBER_FACTS:
            counts = [v if isinstance(v, int) and not isinstance(v, bool) else None for v in values]
            columns[name] = pd.Series(counts, dtype="Int64")
        else:
            measures = [float(v) if isinstance(v, (int, float)) and _is_finite_number(v) else None for v in values]
            columns[name] = pd.Series(measures, dtype=float)
    return pd.DataFrame(columns, columns=list(MODEL_FACTS))


def _is_finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_LOADER_FIELDS = ("benchmark_id", "device", "profile", "storage", "pin_memory", "num_workers", "batch_size",
                  "sample_shape", "samples_per_s", "startup_s")


def _loader_record(facts: Mapping[str, Any], benchmark_id: str, where: str) -> dict[str, Any]:
    record: dict[str, Any] = {"benchmark_id": benchmark_id}
    for field in ("device", "profile", "storage"):
        if not isinstance(facts.get(field), str) or not facts[field]:
            raise GainsError(f"{where}: extra_info {field!r} must be a non-empty string, got {facts.get(field)!r}")
        record[field] = facts[field]
    if not isinstance(facts.get("pin_memory"), bool):
        raise GainsError(f"{where}: extra_info 'pin_memory' must be true or false, got {facts.get('pin_memory')!r}")
    record["pin_memory"] = facts["pin_memory"]
    for field, least in (("num_workers", 0), ("batch_size", 1)):
        value = facts.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise GainsError(f"{where}: extra_info {field!r} must be an integer >= {least}, got {value!r}")
        record[field] = value
    shape = facts.get("sample_shape")
    record["sample_shape"] = "x".join(map(str, shape)) if isinstance(shape, list) else None
    record["samples_per_s"] = _positive_number(facts.get("samples_per_s"))
    record["startup_s"] = _positive_number(facts.get("startup_s"))
    return record


def _positive_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


# --- the tables ---------------------------------------------------------------------------------------


def precision_gains(models: pd.DataFrame) -> pd.DataFrame:
    """bf16 and fp16 rows against the fp32 row of the same device, model, mode, batch size, profile and compile
    mode.

    `speedup` = samples/s at the dtype / samples/s at fp32; `article_speedup` is the article's 1.30 on bf16
    training rows. Columns `PRECISION_COLUMNS`; empty when no bf16 or fp16 row exists.
    """
    pairs = _pair(*_precision_sides(models), PRECISION_KEY, "bf16 or fp16", "fp32", told_apart_by=["dtype"])
    if pairs.empty:
        return _empty(PRECISION_COLUMNS)
    trains_bf16 = (pairs["dtype"] == "bf16") & pairs["mode"].str.startswith("train")
    table = pairs[PRECISION_KEY].copy()
    table["dtype"] = pairs["dtype"]
    table["fp32_samples_per_s"] = pairs["samples_per_s_base"]
    table["samples_per_s"] = pairs["samples_per_s"]
    table["speedup"] = _ratio(pairs["samples_per_s"], pairs["samples_per_s_base"], pairs["comparable"])
    table["article_speedup"] = trains_bf16.map({True: ARTICLE_BF16_TRAINING_SPEEDUP, False: None})
    table["note"] = pairs["note"]
    return _sorted(table, [*PRECISION_KEY, "dtype"])


def checkpoint_gains(models: pd.DataFrame) -> pd.DataFrame:
    """`train-checkpoint` rows against the `train` row of the same device, dtype, model, batch size, profile and
    compile mode.

    `memory_saved_bytes` = train's memory figure - train-checkpoint's, `memory_saved_fraction` that over
    train's, both only where the two record the same memory figure; `time_paid_fraction` = extra time per
    sample with checkpointing (train samples/s / train-checkpoint samples/s - 1). Columns
    `CHECKPOINT_COLUMNS`; empty when no train-checkpoint row exists.
    """
    pairs = _pair(*_checkpoint_sides(models), CHECKPOINT_KEY, "train-checkpoint", "train")
    if pairs.empty:
        return _empty(CHECKPOINT_COLUMNS)
    same_figure = pairs["memory_figure"].eq(pairs["memory_figure_base"])
    both_bytes = pairs["memory_bytes"].notna() & pairs["memory_bytes_base"].notna()
    memory_known = pairs["comparable"] & same_figure & both_bytes
    differs = pairs["comparable"] & pairs["memory_figure"].notna() & pairs["memory_figure_base"].notna() & ~same_figure
    pairs.loc[differs, "note"] = (
        "memory figures differ (" + pairs["memory_figure_base"] + " vs " + pairs["memory_figure"]
        + "): memory not compared"
    )
    saved = (pairs["memory_bytes_base"] - pairs["memory_bytes"]).where(memory_known)
    table = pairs[CHECKPOINT_KEY].copy()
    table["memory_figure"] = pairs["memory_figure"].where(pairs["memory_figure"].notna(), pairs["memory_figure_base"])
    table["train_memory_bytes"] = pairs["memory_bytes_base"]
    table["checkpoint_memory_bytes"] = pairs["memory_bytes"]
    table["memory_saved_bytes"] = saved.astype("Int64")
    table["memory_saved_fraction"] = (saved / pairs["memory_bytes_base"]).where(memory_known).astype(float)
    table["train_samples_per_s"] = pairs["samples_per_s_base"]
    table["checkpoint_samples_per_s"] = pairs["samples_per_s"]
    table["time_paid_fraction"] = _ratio(pairs["samples_per_s_base"], pairs["samples_per_s"], pairs["comparable"]) - 1
    table["note"] = pairs["note"]
    return _sorted(table, CHECKPOINT_KEY)


def channels_last_gains(models: pd.DataFrame) -> pd.DataFrame:
    """`*-channels-last` rows against their plain mode (`train`, `infer`) of the same device, dtype, model,
    batch size, profile and compile mode; `speedup` = channels_last samples/s / plain samples/s. Columns
    `CHANNELS_LAST_COLUMNS`; empty when no channels-last row exists."""
    pairs = _pair(*_channels_last_sides(models), CHANNELS_LAST_KEY, "channels-last", "plain")
    if pairs.empty:
        return _empty(CHANNELS_LAST_COLUMNS)
    table = pairs[CHANNELS_LAST_KEY].rename(columns={"plain_mode": "mode"})
    table["plain_samples_per_s"] = pairs["samples_per_s_base"]
    table["channels_last_samples_per_s"] = pairs["samples_per_s"]
    table["speedup"] = _ratio(pairs["samples_per_s"], pairs["samples_per_s_base"], pairs["comparable"])
    table["note"] = pairs["note"]
    return _sorted(table, ["device", "dtype", "model", "mode", "batch_size", "profile", "compile"])[
        list(CHANNELS_LAST_COLUMNS)
    ]


def compile_gains(models: pd.DataFrame) -> pd.DataFrame:
    """Each compiled row (inductor, reduce-overhead, cuda-graph) against the eager row of the same device, dtype,
    model, mode, batch size and profile: `speedup` = compiled samples/s / eager samples/s, beside the compiled
    case's first call in seconds (compilation or capture included), graphs and graph breaks, and both sides' GPU
    busy fraction where recorded. A row slower than eager says that compilation did not pay. Columns
    `COMPILE_COLUMNS`; empty when no compiled row exists."""
    pairs = _pair(*_compile_sides(models), COMPILE_KEY, "compiled", "eager", told_apart_by=["compile"],
                  configs_differ=_model_sizes_differ)
    if pairs.empty:
        return _empty(COMPILE_COLUMNS)
    table = pairs[COMPILE_KEY].copy()
    table["compile"] = pairs["compile"]
    table["eager_samples_per_s"] = pairs["samples_per_s_base"]
    table["samples_per_s"] = pairs["samples_per_s"]
    table["speedup"] = _ratio(pairs["samples_per_s"], pairs["samples_per_s_base"], pairs["comparable"])
    for name in ("compile_first_call_s", "compile_graphs", "compile_graph_breaks", "gpu_busy_fraction",
                 "compile_graph_break_reasons"):
        table[name] = pairs[name]
    table["eager_gpu_busy_fraction"] = pairs["gpu_busy_fraction_base"]
    table["note"] = pairs["note"]
    table.loc[table["speedup"] < 1, "note"] = NOT_PAID
    return _sorted(table, [*COMPILE_KEY, "compile"])[list(COMPILE_COLUMNS)]


NOT_PAID = "slower than eager: compilation did not pay"


def loader_throughput(loaders: pd.DataFrame) -> pd.DataFrame:
    """Every DataLoader row with `speedup_over_0_workers`: its samples/s over the num_workers=0 row of the
    same device, profile, storage and pin_memory (None where that row is absent). Columns `LOADER_COLUMNS`."""
    if loaders.empty:
        return _empty(LOADER_COLUMNS)
    _check_unique(loaders, [*LOADER_GROUP, "num_workers"], "DataLoader case")
    in_process = loaders[loaders["num_workers"] == 0][[*LOADER_GROUP, "samples_per_s"]]
    table = loaders.merge(in_process, on=LOADER_GROUP, how="left", suffixes=("", "_0_workers"))
    table["speedup_over_0_workers"] = table["samples_per_s"] / table["samples_per_s_0_workers"]
    return _sorted(table[list(LOADER_COLUMNS)], [*LOADER_GROUP, "num_workers"])


def best_worker_counts(throughput: pd.DataFrame) -> pd.DataFrame:
    """Per device, profile, storage and pin_memory: the num_workers with the most samples/s, the worker
    counts tried, and whether the best lies in the article's 2-4. Columns `BEST_WORKERS_COLUMNS`."""
    timed = throughput[throughput["samples_per_s"].notna()]
    if timed.empty:
        return _empty(BEST_WORKERS_COLUMNS)
    best = timed.loc[timed.groupby(LOADER_GROUP, sort=True)["samples_per_s"].idxmax()]
    tried = timed.groupby(LOADER_GROUP)["num_workers"].agg(lambda w: ",".join(map(str, sorted(w)))).rename(
        "worker_counts"
    )
    table = best.merge(tried.reset_index(), on=LOADER_GROUP).rename(columns={"num_workers": "best_num_workers"})
    low, high = ARTICLE_WORKERS_RANGE
    table["within_article_advice"] = table["best_num_workers"].between(low, high)
    return table[list(BEST_WORKERS_COLUMNS)].reset_index(drop=True)


def gains(results: Results) -> Gains:
    """All five tables of `results`, and a line per table on the rows it leaves out."""
    models = results.models
    throughput = loader_throughput(results.loaders)
    left_out = {
        "precision": _left_out(*_precision_sides(models), PRECISION_KEY, "fp32", "bf16 or fp16"),
        "checkpoint": _left_out(*_checkpoint_sides(models), CHECKPOINT_KEY, "train", "train-checkpoint"),
        "channels-last": _left_out(*_channels_last_sides(models), CHANNELS_LAST_KEY, "train/infer", "channels-last"),
        "compile": _left_out(*_compile_sides(models), COMPILE_KEY, "eager", "compiled"),
    }
    return Gains(precision_gains(models), checkpoint_gains(models), channels_last_gains(models), compile_gains(models),
                 throughput, best_worker_counts(throughput), {k: v for k, v in left_out.items() if v}, results.ignored)


# Each table's two sides: the variant rows, and the rows they are measured against.


def _precision_sides(models: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return models[models["dtype"].isin(["bf16", "fp16"])], models[models["dtype"] == "fp32"]


def _checkpoint_sides(models: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return models[models["mode"] == "train-checkpoint"], models[models["mode"] == "train"]


def _channels_last_sides(models: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    suffix = "-channels-last"
    variants = models[models["mode"].str.endswith(suffix)]
    bases = models[models["mode"].isin(["train", "infer"])]
    return variants.assign(plain_mode=variants["mode"].str[: -len(suffix)]), bases.assign(plain_mode=bases["mode"])


def _compile_sides(models: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return models[models["compile"] != EAGER], models[models["compile"] == EAGER]


def _in_play(variants: pd.DataFrame, bases: pd.DataFrame, key: list[str]) -> pd.Series:
    """Which base rows have a variant at some batch size: those are listed even when unpaired, since a
    variant that ran at other batch sizes (e.g. past an out-of-memory limit) says the pairing was meant."""
    group = [k for k in key if k != "batch_size"]
    wanted = set(variants[group].itertuples(index=False, name=None))
    return pd.Series([row in wanted for row in bases[group].itertuples(index=False, name=None)],
                     index=bases.index, dtype=bool)


def _pair(
    variants: pd.DataFrame, bases: pd.DataFrame, key: list[str], variant: str, base: str,
    told_apart_by: Sequence[str] = (), configs_differ: ConfigsDiffer | None = None,
) -> pd.DataFrame:
    """Variant rows joined to their base row on `key`, unpaired rows of either side kept; the base's columns
    end in `_base`. Several variants may share one base row when the columns `told_apart_by` tell them apart
    (bf16 and fp16 against one fp32 row). Adds `comparable` (both sides, one config, samples/s known) and `note`
    (why not); `configs_differ` says which pairs measured different models (default: `config_digest` differs)."""
    if variants.empty:
        return pd.DataFrame()
    bases = bases[_in_play(variants, bases, key)]
    _check_unique(variants, [*key, *told_apart_by], f"{variant} case")
    _check_unique(bases, key, f"{base} case")
    pairs = variants.merge(bases, on=key, how="outer", suffixes=("", "_base"), indicator=True).reset_index(drop=True)
    both = pairs["_merge"] == "both"
    differ, why = (configs_differ or _digests_differ)(pairs)
    differ = both & differ
    untimed = both & (pairs["samples_per_s"].isna() | pairs["samples_per_s_base"].isna())
    pairs["comparable"] = both & ~differ & ~untimed
    pairs["note"] = ""
    pairs.loc[pairs["_merge"] == "left_only", "note"] = f"no {base} run to compare with"
    pairs.loc[pairs["_merge"] == "right_only", "note"] = f"no {variant} run to compare with"
    pairs.loc[untimed, "note"] = "no samples/s recorded (run without --benchmark-disable)"
    pairs.loc[differ, "note"] = why[differ]
    return pairs


# Which pairs of a merged frame measured different models, and the note that says so.
ConfigsDiffer = Callable[[pd.DataFrame], tuple[pd.Series, pd.Series]]


def _digests_differ(pairs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    differ = _known_and_different(pairs["config_digest"], pairs["config_digest_base"])
    why = (
        "model configs differ (config_digest " + pairs["config_digest_base"].astype(str) + " vs "
        + pairs["config_digest"].astype(str) + "): not compared"
    )
    return differ, why


def _model_sizes_differ(pairs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    # A compiled case's config_digest hashes its compile mode too (perfsuite.run.steps.config_digest), so it never
    # equals the eager one's; the parameter count and FLOPs per step say whether both measured one model and input.
    names = ("parameter_count", "flops_per_step")
    differs = {name: _known_and_different(pairs[name], pairs[f"{name}_base"]) for name in names}
    why = [
        "model differs (" + ", ".join(
            f"{name} {pairs.at[i, f'{name}_base']} vs {pairs.at[i, name]}" for name in names if differs[name][i]
        ) + "): not compared"
        for i in pairs.index
    ]
    return differs["parameter_count"] | differs["flops_per_step"], pd.Series(why, index=pairs.index, dtype=object)


def _known_and_different(values: pd.Series, base_values: pd.Series) -> pd.Series:
    """True where both values are known and differ."""
    known = values.notna() & base_values.notna()
    return pd.Series([bool(k and a != b) for k, a, b in zip(known, values, base_values, strict=True)],
                     index=values.index, dtype=bool)


def _check_unique(rows: pd.DataFrame, key: list[str], what: str) -> None:
    repeated = rows[rows.duplicated(key, keep=False)]
    if not repeated.empty:
        first = repeated.iloc[0]
        same = repeated[(repeated[key] == first[key]).all(axis=1)]["benchmark_id"]
        raise GainsError(
            f"one {what} appears more than once ({', '.join(same)}), so its partner is ambiguous; "
            "pass the JSON of a single run, or of runs that measured each case once"
        )


def _left_out(variants: pd.DataFrame, bases: pd.DataFrame, key: list[str], base: str, variant: str) -> str:
    """The line that counts the base rows not shown: those with no variant at any batch size."""
    if variants.empty:
        return ""
    alone = bases[~_in_play(variants, bases, key)]
    if alone.empty:
        return ""
    names = ", ".join(sorted(set(alone["model"])))
    return f"{len(alone)} {base} row(s) with no {variant} run at any batch size are not shown ({names})"


def _ratio(numerator: pd.Series, denominator: pd.Series, comparable: pd.Series) -> pd.Series:
    return (numerator.astype(float) / denominator.astype(float)).where(comparable)


def _sorted(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    # Compile modes sort in their declared order (eager first), other columns by value.
    return table.sort_values(by, kind="stable", na_position="last", key=_sort_key).reset_index(drop=True)


def _sort_key(column: pd.Series) -> pd.Series:
    if column.name != "compile":
        return column
    return column.map(compile_mode_rank)


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=list(columns))
