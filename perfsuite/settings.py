"""The user's choices, read once: command-line options over `[tool.perfsuite]` in pyproject.toml over defaults.

`load_settings` turns both sources into one validated `Settings` value that the pytest plugin, `perfsuite
list` and the other commands share. A bad value raises UsageError naming where it came from: the `--perf-*`
flag, or pyproject.toml and its key. Nothing here imports torch.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from perfsuite.errors import BadFileError, UsageError
from perfsuite.matrix.axes import (
    ACCELERATOR_DEFAULT_PROFILE,
    ALL_MODES,
    COMPILE_MODES,
    CPU_DEFAULT_PROFILE,
    DATALOADER_MODEL,
    DEFAULT_COMPILE_MODES,
    DEFAULT_DTYPES,
    DEVICES,
    DTYPES,
    MODES,
    PROFILES,
)
from perfsuite.matrix.cases import MatrixOptions, parse_batch_sizes, parse_benchmark_id, parse_names
from perfsuite.records import DEFAULT_MEMORY_TOLERANCE, DEFAULT_TOLERANCE, FIGURES, STEP_FIGURE, check_band
from perfsuite.run.devices import is_accelerator
from perfsuite.run.plan import ISOLATIONS, Isolation
from perfsuite.store.baselines import MAX_MACHINE_NAME_BYTES
from perfsuite.store.files import WORK_FOLDER, read_text_capped, special_file_kind

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DEFAULT_WARMUP_STEPS = 3
# Bounds that catch a typo (an extra zero or three) before hours of measuring: each process is a fresh Python
# that imports torch, and each warm-up step is a full training step.
MAX_PROCESSES = 1000
# An A/B job measures each case with K pairs of processes (one per side): the replicates its interval is built on.
# An A/B job's processes: warm workers holding both sides (or process pairs), each case measured in at least
# this many blocks.
AB_DEFAULT_PAIRS = 2
# Seconds an A/B job may spend measuring: blocks beyond each case's first K stop when the next round would not fit.
AB_DEFAULT_BUDGET_S = 300.0
MIN_AB_PAIRS = 2
MAX_WARMUP_STEPS = 100_000
MAX_PYPROJECT_BYTES = 16 * 2**20  # a pyproject.toml is a few kB; more is a wrong file
DEFAULT_BASELINE_DIR = "baselines"
DEFAULT_SUMMARY_DIR = WORK_FOLDER
# What a case changed against its history does to the gate: fail it (the default) or only warn.
ON_CHANGE = ("fail", "warn")
ON_INCONCLUSIVE = ("fail", "warn")
ON_NO_BASE = ("fail", "warn")
# Which verdicts get an op-level explanation (A/B verdicts, and verdicts against a history): every case, the
# regressed and improved ones (the default), none.
EXPLAIN = ("all", "changed", "none")

_Default = TypeVar("_Default", int, None)


@dataclass(frozen=True)
class Option:
    """One of perfsuite's options: `--perf-<key>` on pytest's command line and `<key>` in [tool.perfsuite].

    `help` is argparse help text (a literal percent sign is written %%); `switch` options take no value;
    `table` ones may be a table of per-model or per-benchmark values in [tool.perfsuite.<key>].
    """

    key: str
    help: str
    switch: bool = False
    table: bool = False

    @property
    def flag(self) -> str:
        """The option on pytest's command line."""
        return f"--perf-{self.key}"

    @property
    def field_name(self) -> str:
        """The field of RawSettings that holds its value."""
        return self.key.replace("-", "_")


# Every option, declared once: pytest's --perf-* options, `perfsuite list`'s and the keys of [tool.perfsuite].
OPTIONS = (
    Option("device", "comma-separated cpu,cuda,mps (default: every available accelerator, else cpu)"),
    Option("dtype", "comma-separated fp32,bf16,fp16; bf16/fp16 are autocast mixed precision (default: fp32,bf16)"),
    Option("model", "comma-separated model names, dataloader (the DataLoader cases), or all (default: your own "
           "models where your conftest registers any, else the built-in ones and the DataLoader cases)"),
    Option("batch-size", "comma-separated batch sizes (default: the profile's per model)"),
    Option("mode", "comma-separated train,infer or their variants (default: train,infer where the model has them)"),
    Option("profile", "smoke | standard | full (default: standard where an accelerator runs, smoke on the CPU alone)"),
    Option("compile", "comma-separated eager,inductor,reduce-overhead,cuda-graph: the step as written, through "
           "torch.compile, through torch.compile's CUDA-graph mode, or replayed as a captured CUDA graph "
           "(default: eager)"),
    Option("figure", "what the rounds time: step (steps back to back, the device drained once a round: the time a "
           "training or serving loop sees per step) or latency (one step and a drain a round: what one request "
           "waits); the gate and A/B judge it (default: step)"),
    Option("warmup", f"untimed warm-up steps per case (default: {DEFAULT_WARMUP_STEPS})"),
    Option("processes", "measure every case in K fresh processes, interleaved across cases (default: 1, in the "
           f"pytest process); the gate judges runs, so K >= 3 calibrates it; an A/B job starts K warm processes "
           f"(each holding both sides where it can, else K process pairs) and measures every case in at least K "
           f"blocks (default {AB_DEFAULT_PAIRS}, at least {MIN_AB_PAIRS})"),
    Option("isolation", "with --perf-processes: case (a fresh process per case, the default) or pass (one process "
           "per shuffled pass over all cases, the default of an A/B job: one pair of processes per pass)"),
    Option("threads", "torch CPU threads in each measuring process (default: torch's)"),
    Option("ddp-processes", "processes of a train-ddp case, one device each (default: one per CUDA GPU, 2 on cpu)"),
    Option("update-baseline", "append this session's runs to each case's baseline history (others are kept)",
           switch=True),
    Option("rebaseline", "start the baseline history of each case run over (after a torch upgrade, say); an "
           "unreadable baseline file is moved aside first", switch=True),
    Option("on-change", "fail | warn: what a case changed against its history (model, inputs, torch, threads, "
           "machine) does to the gate (default: fail, naming what changed)"),
    Option("on-inconclusive", "fail | warn: what an A/B verdict that could not judge (its floor wider than the band) "
           "does to the job (default: fail, saying what would judge it: a verdict that cannot judge is not a pass)"),
    Option("on-no-base", "fail | warn: what a model the A/B base does not have (a pull request that adds it) does to "
           "the job (default: warn: the other models are judged and it reads 'no base', never a pass)"),
    Option("machine", "name this machine's baseline files, e.g. ci-m2-max (default: from the hardware)"),
    Option("baseline-dir", "where baselines live (default: baselines/ beside pyproject.toml)"),
    Option("summary-dir", "where the verdicts go as summary.json and summary.md (default: .perfsuite/)"),
    Option("ab", "A/B in one job: measure every case on this working tree (head) and on BASE, a git revision "
           "(main, origin/main, a commit, HEAD~1, or merge-base: the merge base of HEAD with the default branch), "
           "side by side in alternating windows, and judge head against base (no baselines read or written)"),
    Option("ab-python", "A/B against another interpreter (PATH of its python, e.g. with another torch): the base "
           "side runs there, on BASE's code with --perf-ab, else on this working tree"),
    Option("ab-budget", "seconds an A/B job may spend measuring: each case gets blocks until it is decided, and "
           f"further rounds stop when the next would not fit (default {AB_DEFAULT_BUDGET_S:.0f}); a case still open "
           "then is inconclusive, saying how much more would decide it"),
    Option("ab-explain", "all | changed | none: which A/B cases get an op-level explanation, profiled on both "
           "sides after the timed windows and diffed (ops whose calls changed, new or gone ops, the ops that account "
           "for the change; default: changed, the regressed and improved ones)"),
    Option("history-explain", "all | changed | none: which cases judged against their history get an op-level "
           "explanation against the history's last op summary (default: changed, the regressed and improved ones); "
           "all and changed profile a few steps of every case after its timed rounds, and a recording session "
           "stores that summary beside the runs; none profiles nothing"),
    Option("tolerance", "time band for every case, e.g. 0.15 or 15%% (default 0.10, or [tool.perfsuite.tolerance] "
           "per model or benchmark id)", table=True),
    Option("memory-tolerance", "memory band, e.g. 0.10 (default 0.10, or [tool.perfsuite.memory-tolerance] per "
           "model or benchmark id)", table=True),
)


@dataclass(frozen=True)
class RawSettings:
    """Option values as given (text, TOML numbers, booleans or lists), before validation; None means not given.

    One field per option of OPTIONS, named as its key with `_` for `-`: `--perf-batch-size` / `batch-size` is
    `batch_size`.
    """

    device: Any = None
    dtype: Any = None
    model: Any = None
    batch_size: Any = None
    mode: Any = None
    profile: Any = None
    compile: Any = None
    figure: Any = None
    warmup: Any = None
    processes: Any = None
    isolation: Any = None
    threads: Any = None
    ddp_processes: Any = None
    update_baseline: Any = None
    rebaseline: Any = None
    on_change: Any = None
    on_inconclusive: Any = None
    on_no_base: Any = None
    machine: Any = None
    baseline_dir: Any = None
    summary_dir: Any = None
    ab: Any = None
    ab_python: Any = None
    ab_budget: Any = None
    ab_explain: Any = None
    history_explain: Any = None
    tolerance: Any = None
    memory_tolerance: Any = None


@dataclass(frozen=True)
class Settings:
    """Every choice of a session, validated. Paths are as given (relative to the project root unless absolute).

    `processes` is how many fresh processes measure each case (1: in the pytest process), with `isolation`
    (a fresh process per case, or per pass over all cases); `threads` torch's
    CPU threads in each (None: torch's default); `ddp_processes` the processes of a train-ddp step (None:
    one per CUDA GPU, 2 on the CPU); `machine` names this machine's baseline files instead of the hardware.
    Tolerances: the command-line band for every case, else the per-id/per-model tables. `profile_chosen` says
    whether the profile was given (else it follows the devices: `default_profile`). `update_baseline` appends
    this session's runs to the histories, `rebaseline` starts them over. `changes_fail`: a case changed against its
    history fails the gate (else it is a warning). `ab_revision` and `ab_python` make the session an A/B job (head
    against a base revision and/or interpreter), with `processes` pairs of processes; `inconclusive_fails`: an A/B
    verdict that could not judge fails the job (else it is a warning); `no_base_fails`: a model the base does not
    have fails the job (else it reads 'no base' and the others are judged); `ab_explain` which A/B cases get an
    op-level explanation (all, changed or none); `history_explain` which cases judged against their history get
    one (all, changed or none; anything but none profiles every case's ops after its rounds, and a recording session
    stores them).
    """

    matrix: MatrixOptions
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    processes: int = 1
    threads: int | None = None
    ddp_processes: int | None = None
    machine: str | None = None
    baseline_dir: str = DEFAULT_BASELINE_DIR
    summary_dir: str = DEFAULT_SUMMARY_DIR
    cli_tolerance: float | None = None
    cli_memory_tolerance: float | None = None
    tolerances: Mapping[str, float] = field(default_factory=dict)
    memory_tolerances: Mapping[str, float] = field(default_factory=dict)
    profile_chosen: bool = False
    isolation: Isolation = "case"
    figure: str = STEP_FIGURE
    update_baseline: bool = False
    rebaseline: bool = False
    changes_fail: bool = True
    inconclusive_fails: bool = True
    no_base_fails: bool = False
    ab_revision: str | None = None
    ab_python: str | None = None
    ab_budget_s: float = AB_DEFAULT_BUDGET_S
    ab_explain: str = "changed"
    history_explain: str = "changed"

    @property
    def ab(self) -> bool:
        """Whether this session is an A/B job."""
        return self.ab_revision is not None or self.ab_python is not None

    @property
    def records(self) -> bool:
        """Whether this session writes baselines."""
        return self.update_baseline or self.rebaseline


def read_pyproject(pyproject: Path) -> dict[str, Any]:
    """The TOML document of `pyproject`, or {} when it does not exist. A file that cannot be used (not a regular
    file, over MAX_PYPROJECT_BYTES, not UTF-8, not TOML) is a UsageError naming it."""
    remedy = "Fix the file, or run from a folder without it"
    try:
        text = read_text_capped(pyproject, MAX_PYPROJECT_BYTES, remedy, missing_ok=True)
    except BadFileError as error:
        raise UsageError(str(error)) from None
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{pyproject}: not valid TOML ({error}); fix the file") from None


def read_pyproject_table(pyproject: Path) -> dict[str, Any]:
    """The `[tool.perfsuite]` table of `pyproject`, or {} when the file or table is absent."""
    table = read_pyproject(pyproject).get("tool", {}).get("perfsuite", {})
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.perfsuite] must be a table")
    return table


def merge_settings(
    cli: RawSettings, table: Mapping[str, Any], source: str, flag_prefix: str = "--perf-"
) -> tuple[RawSettings, dict[str, str]]:
    """Command-line values where given, else the pyproject values; returns them and, per field, where each
    value came from (`<flag_prefix><key>` or `<source> [tool.perfsuite] <key>`) for error messages.

    A key is an option's name without `--perf-` (`batch-size`); the underscore spelling (`batch_size`) is read
    too, but not both at once. Unknown keys are an error: a misspelt key would otherwise change nothing, silently.
    """
    spellings = {spelling: option for option in OPTIONS for spelling in {option.key, option.field_name}}
    unknown = sorted(k for k in table if k not in spellings)
    if unknown:
        raise UsageError(
            f"{source} [tool.perfsuite]: unknown key(s) {', '.join(unknown)}; valid: "
            f"{', '.join(option.key for option in OPTIONS)}"
        )
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for option in OPTIONS:
        given = getattr(cli, option.field_name)
        in_table = [spelling for spelling in dict.fromkeys((option.key, option.field_name)) if spelling in table]
        if len(in_table) > 1:
            raise UsageError(f"{source} [tool.perfsuite]: {' and '.join(in_table)} are one key; keep {option.key}")
        if given is not None:
            values[option.field_name], origins[option.field_name] = given, f"{flag_prefix}{option.key}"
        elif in_table:
            key = in_table[0]
            values[option.field_name], origins[option.field_name] = table[key], f"{source} [tool.perfsuite] {key}"
    return RawSettings(**values), origins


def load_settings(
    cli: RawSettings,
    pyproject: Path,
    workload_names: Sequence[str],
    available_devices: Sequence[str],
    flag_prefix: str = "--perf-",
) -> Settings:
    """The session's validated settings from the command line and `pyproject`'s [tool.perfsuite];
    `flag_prefix` is how the command line spells the options (`--perf-` in pytest, `--` in `perfsuite list`)."""
    raw, origins = merge_settings(cli, read_pyproject_table(pyproject), str(pyproject), flag_prefix)
    return validate_settings(raw, origins, workload_names, available_devices, project_root=pyproject.parent)


def validate_settings(
    raw: RawSettings,
    origins: Mapping[str, str],
    workload_names: Sequence[str],
    available_devices: Sequence[str],
    project_root: Path = Path("."),
) -> Settings:
    """Validate merged raw values; `origins` names where each came from in errors. Relative paths are checked
    against `project_root` (where the session writes them), so nothing is measured before a bad one is found."""

    def where(name: str) -> str:
        return origins.get(name, f"--perf-{name.replace('_', '-')}")

    devices = parse_names(raw.device, DEVICES, where("device")) if raw.device is not None else list(available_devices)
    valid_models = ["all", *workload_names, DATALOADER_MODEL]
    models = parse_names(raw.model, valid_models, where("model")) if raw.model is not None else None
    matrix = MatrixOptions(
        devices=devices,
        dtypes=parse_names(raw.dtype, DTYPES, where("dtype")) if raw.dtype is not None else DEFAULT_DTYPES,
        models=None if models is None else [*workload_names, DATALOADER_MODEL] if "all" in models else models,
        batch_sizes=parse_batch_sizes(raw.batch_size, where("batch_size")) if raw.batch_size is not None else None,
        modes=parse_names(raw.mode, ALL_MODES, where("mode")) if raw.mode is not None else MODES,
        profile=(
            _one_name(raw.profile, PROFILES, where("profile")) if raw.profile is not None else default_profile(devices)
        ),
        compile_modes=(
            parse_names(raw.compile, COMPILE_MODES, where("compile")) if raw.compile is not None
            else DEFAULT_COMPILE_MODES
        ),
    )
    ab_revision = _ab_text(raw.ab, where("ab"))
    ab_python = _ab_text(raw.ab_python, where("ab_python"))
    ab = ab_revision is not None or ab_python is not None
    processes = _count(raw.processes, where("processes"), minimum=1, default=AB_DEFAULT_PAIRS if ab else 1,
                       maximum=MAX_PROCESSES)
    if ab and processes < MIN_AB_PAIRS:
        raise UsageError(f"{where('processes')} {processes}: an A/B job needs at least {MIN_AB_PAIRS} processes "
                         f"to see the spread between processes (default {AB_DEFAULT_PAIRS})")
    if ab and (raw.update_baseline or raw.rebaseline):
        raise UsageError(f"{where('ab')}: an A/B job judges head against base and writes no baselines; record "
                         "baselines in a session of their own (--perf-update-baseline without --perf-ab)")
    return Settings(
        matrix=matrix,
        ab_revision=ab_revision,
        ab_python=ab_python,
        ab_budget_s=_seconds(raw.ab_budget, where("ab_budget"), AB_DEFAULT_BUDGET_S),
        ab_explain=_one_name(raw.ab_explain, EXPLAIN, where("ab_explain")) if raw.ab_explain is not None
        else "changed",
        history_explain=_one_name(raw.history_explain, EXPLAIN, where("history_explain"))
        if raw.history_explain is not None else "changed",
        warmup_steps=_count(
            raw.warmup, where("warmup"), minimum=0, default=DEFAULT_WARMUP_STEPS, maximum=MAX_WARMUP_STEPS
        ),
        processes=processes,
        threads=_count(raw.threads, where("threads"), minimum=1, default=None),
        ddp_processes=_count(raw.ddp_processes, where("ddp_processes"), minimum=1, default=None),
        machine=_machine_name(raw.machine, where("machine")),
        baseline_dir=_path_text(raw.baseline_dir, where("baseline_dir"), DEFAULT_BASELINE_DIR),
        summary_dir=_writable_folder(
            _path_text(raw.summary_dir, where("summary_dir"), DEFAULT_SUMMARY_DIR), where("summary_dir"), project_root,
            chosen=raw.summary_dir is not None,
        ),
        cli_tolerance=_cli_tolerance(raw.tolerance, where("tolerance")),
        cli_memory_tolerance=_cli_tolerance(raw.memory_tolerance, where("memory_tolerance")),
        tolerances=_tolerance_table(raw.tolerance, where("tolerance"), workload_names),
        memory_tolerances=_tolerance_table(raw.memory_tolerance, where("memory_tolerance"), workload_names),
        profile_chosen=raw.profile is not None,
        isolation=_isolation(raw.isolation, where("isolation")) if raw.isolation is not None or not ab else "pass",
        figure=_one_name(raw.figure, FIGURES, where("figure")) if raw.figure is not None else STEP_FIGURE,
        update_baseline=_switch(raw.update_baseline, where("update_baseline")),
        rebaseline=_switch(raw.rebaseline, where("rebaseline")),
        changes_fail=raw.on_change is None or _one_name(raw.on_change, ON_CHANGE, where("on_change")) == "fail",
        inconclusive_fails=raw.on_inconclusive is None
        or _one_name(raw.on_inconclusive, ON_INCONCLUSIVE, where("on_inconclusive")) == "fail",
        no_base_fails=raw.on_no_base is not None
        and _one_name(raw.on_no_base, ON_NO_BASE, where("on_no_base")) == "fail",
    )


def parse_tolerance(raw: Any, where: str) -> float:
    """A band from text or a number: `0.15`, or `15%` for the same; raises UsageError naming `where`."""
    text = str(raw).strip() if isinstance(raw, str) else None
    try:
        if text is not None and text.endswith("%"):
            value = float(text[:-1]) / 100
        elif text is not None:
            value = float(text)
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            value = float(raw)
        else:
            raise ValueError
        check_band(value, where)
    except ValueError:
        raise UsageError(f"{where}: {raw!r} is not a band; write a fraction in [0, 1) such as 0.10 (or 10%)") from None
    return value


def parse_tolerance_table(table: Mapping[str, Any], where: str, model_names: Sequence[str]) -> dict[str, float]:
    """Validate a tolerance table such as `[tool.perfsuite.tolerance]`: keys are "default", a model name or a
    benchmark id of any case the matrix could produce (on any device: one pyproject serves a Mac and a CUDA box);
    values bands as `parse_tolerance` reads them. A key that names none of these is a UsageError: a misspelt key
    would otherwise change nothing, silently."""
    if not isinstance(table, Mapping):
        raise UsageError(f"{where} must be a table of name = fraction, e.g. resnet18 = 0.15; got {table!r}")
    unknown = [
        str(key) for key in table
        if key != "default" and key not in model_names and parse_benchmark_id(str(key), model_names) is None
    ]
    if unknown:
        raise UsageError(
            f"{where}: {', '.join(repr(key) for key in unknown)} names no model and no benchmark id; keys are "
            f"\"default\", a model ({', '.join(model_names)}) or a benchmark id such as "
            f"cuda-bf16-{model_names[0] if model_names else 'resnet18'}-bs32-train"
        )
    return {str(key): parse_tolerance(value, f"{where} {key!r}") for key, value in table.items()}


def tolerance_for(
    benchmark_id: str,
    model: str,
    overrides: Mapping[str, float],
    cli_override: float | None = None,
    memory: bool = False,
    default: float | None = None,
) -> float:
    """The band that applies to one benchmark's time (or, with `memory`, its memory figure): the command-line value,
    else the benchmark id's entry in `overrides`, else the model's entry, else `overrides["default"]`, else
    `default` (an A/B job's narrower band), else perfsuite's default (10%)."""
    if default is None:
        default = DEFAULT_MEMORY_TOLERANCE if memory else DEFAULT_TOLERANCE
    if cli_override is not None:
        chosen = cli_override
    elif benchmark_id in overrides:
        chosen = overrides[benchmark_id]
    elif model in overrides:
        chosen = overrides[model]
    else:
        chosen = overrides.get("default", default)
    check_band(chosen, f"{benchmark_id}: tolerance")
    return chosen


def default_profile(devices: Sequence[str]) -> str:
    """The profile when none is chosen: standard where an accelerator is among `devices`, smoke on the CPU alone."""
    return ACCELERATOR_DEFAULT_PROFILE if any(map(is_accelerator, devices)) else CPU_DEFAULT_PROFILE


def _one_name(raw: Any, valid: Sequence[str], where: str) -> str:
    names = parse_names(raw, valid, where)
    if len(names) != 1:
        raise UsageError(f"{where}: one value, please (got {', '.join(names)}); valid: {', '.join(valid)}")
    return names[0]


def _seconds(raw: Any, where: str, default: float) -> float:
    """A positive, finite number of seconds from text or a TOML number; `default` when not given."""
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise UsageError(f"{where} needs a number of seconds, e.g. 300, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{where} needs a positive number of seconds, e.g. 300, got {raw!r}")
    return value


def _count(raw: Any, where: str, minimum: int, default: _Default, maximum: int | None = None) -> int | _Default:
    """A whole number in [`minimum`, `maximum`] from text or a TOML integer; `default` when not given."""
    if raw is None:
        return default
    if isinstance(raw, bool) or isinstance(raw, float) or not isinstance(raw, (int, str)):
        raise UsageError(f"{where}: {raw!r} is not a whole number; write e.g. {max(minimum, 3)}")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise UsageError(f"{where}: {raw!r} is not a whole number; write e.g. {max(minimum, 3)}") from None
    if value < minimum:
        raise UsageError(f"{where}: {value} is too small; it must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{where}: {value} is too large; it must be at most {maximum}")
    return value


def _isolation(raw: Any, where: str) -> Isolation:
    if raw is None:
        return "case"
    chosen = _one_name(raw, ISOLATIONS, where)
    return "pass" if chosen == "pass" else "case"


def _ab_text(raw: Any, where: str) -> str | None:
    """A revision or a path for the A/B options: non-empty text."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError(f"{where} needs a value (a git revision or merge-base; a python path), got {raw!r}")
    return raw.strip()


def _switch(raw: Any, where: str) -> bool:
    """An on/off option: a flag on the command line, true or false in pyproject.toml."""
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise UsageError(f"{where}: {raw!r} is not true or false")
    return raw


def _machine_name(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    text = str(raw).strip() if isinstance(raw, str) else ""
    if not text or not all(c.isalnum() or c in "-_." for c in text) or text.startswith("."):
        raise UsageError(
            f"{where}: {raw!r} is not a machine name; use letters, digits, '-', '_' and '.', e.g. ci-m2-max"
        )
    size_bytes = len(text.encode("utf-8"))
    if size_bytes > MAX_MACHINE_NAME_BYTES:
        raise UsageError(
            f"{where}: a name of {size_bytes} bytes is too long for a file name; use at most {MAX_MACHINE_NAME_BYTES} "
            "bytes (the baseline file and the files perfsuite makes beside it must fit in 255)"
        )
    return text


def _path_text(raw: Any, where: str, default: str) -> str:
    if raw is None:
        return default
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError(f"{where}: {raw!r} is not a path")
    return raw.strip()


def _writable_folder(text: str, where: str, project_root: Path, chosen: bool) -> str:
    """`text` when it names a folder perfsuite can write files into, or one it can make (not made here). Where the
    folder was not `chosen` (the default), only a file in its place is an error: a session that measures nothing
    writes no summary, and a read-only checkout must still run its tests."""
    folder = project_root / text
    if not chosen:
        problem = _folder_problem(folder) if os.path.lexists(folder) and not folder.is_dir() else None
    elif os.path.lexists(folder):
        problem = _folder_problem(folder)
    else:
        ancestor = folder.parent
        while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        problem = _folder_problem(ancestor)
        problem = None if problem is None else f"cannot be made: {ancestor} {problem}"
    if problem is not None:
        raise UsageError(f"{where}: {text!r} {problem}; name a folder perfsuite can write into, or clear the way")
    return text


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be written into the existing path `folder`, or None."""
    try:
        mode = os.stat(folder).st_mode
    except OSError as error:  # a symlink to nowhere, or one in a loop
        return f"cannot be used ({error.strerror})"
    kind = special_file_kind(mode)
    if kind != "a folder":
        return f"is {kind or 'a file'}, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "is a folder that is not writable"
    return None


def _cli_tolerance(raw: Any, where: str) -> float | None:
    """A band given as one number (the command line's form); a table is read by `_tolerance_table`."""
    if raw is None or isinstance(raw, Mapping):
        return None
    return parse_tolerance(raw, where)


def _tolerance_table(raw: Any, where: str, model_names: Sequence[str]) -> dict[str, float]:
    if raw is None or not isinstance(raw, Mapping):
        return {}
    return parse_tolerance_table(raw, where, model_names)
