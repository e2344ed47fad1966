"""The user's choices, read once: command-line options over `[tool.perfsuite]` in pyproject.toml over defaults.

`load_settings` turns both sources into one validated `Settings` value that the pytest plugin, `perfsuite
list` and the other commands share. A bad value raises UsageError naming where it came from: the `--perf-*`
flag, or pyproject.toml and its key. Nothing here imports torch.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

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
# What a case changed against its history, an A/B verdict that could not judge, a model the base does not have do
# to the gate or the job: fail it or only warn (`fails`).
FAIL_OR_WARN = ("fail", "warn")
# Which verdicts get an op-level explanation (A/B verdicts, and verdicts against a history): every case, the
# regressed and improved ones (the default), none.
EXPLAIN = ("all", "changed", "none")

T = TypeVar("T")


@dataclass(frozen=True)
class Known:
    """What an option's parser and default may read besides the option's own value: the models this session knows,
    the devices available, the project root (relative paths are checked against it), and the Settings fields filled
    so far (a derived default sees every given value and every plain default)."""

    workload_names: Sequence[str]
    available_devices: Sequence[str]
    project_root: Path
    filled: Mapping[str, object] = field(default_factory=dict)

    @property
    def ab(self) -> bool:
        """Whether the options read so far make the session an A/B job."""
        return self.filled.get("ab_revision") is not None or self.filled.get("ab_python") is not None


@dataclass(frozen=True)
class Derived(Generic[T]):
    """A default that follows from what else is known (the devices, the other options), read after every plain
    value; `rule(known, where)` may raise UsageError naming `where`."""

    rule: Callable[[Known, str], T]


# parse(value as given, where it came from for errors, what else is known) -> the typed value; raises UsageError.
Parser = Callable[[object, str, Known], T]


@dataclass(frozen=True)
class Option(Generic[T]):
    """One of perfsuite's options, declared once as a field of Settings (`option(...)`): `--perf-<key>` on pytest's
    command line and `<key>` in [tool.perfsuite]; `parse` reads a given value into the Settings field it `fills`,
    `default` fills it when not given, and [tool.perfsuite] takes `example` for it.

    `help` is argparse help text (a literal percent sign is written %%); `switch` options take no value;
    `table` ones may be a table of per-model or per-benchmark values in [tool.perfsuite.<key>].
    """

    key: str
    help: str
    parse: Parser[T]
    default: T | Derived[T]
    example: object
    switch: bool = False
    table: bool = False
    fills: str = ""  # the Settings field, named where OPTIONS is read from Settings

    @property
    def flag(self) -> str:
        """The option on pytest's command line."""
        return f"--perf-{self.key}"

    @property
    def fills_matrix(self) -> bool:
        """Whether the option fills a field of the case matrix (a Settings field named as one of MatrixOptions): it
        chooses which cases run."""
        return self.fills in MATRIX_FIELDS

    @property
    def raw_name(self) -> str:
        """The option's name in RawSettings and in the origins of its value: its key with `_` for `-`."""
        return self.key.replace("-", "_")


# The Settings fields that choose the cases: Settings.matrix is made of them.
MATRIX_FIELDS = tuple(matrix_field.name for matrix_field in fields(MatrixOptions))
# The key under which a Settings field's metadata holds its Option.
OPTION = "option"


def option(
    key: str, help: str, parse: Parser[T], default: T | Derived[T], example: object, *, switch: bool = False,
    table: bool = False,
) -> T:
    """Declare a Settings field as an option (see Option); a field of type T to mypy, the dataclass field holding
    the Option in its metadata at run time (without a default where the default is Derived: validation fills it)."""
    declared = Option(key, help, parse, default, example, switch, table)
    if isinstance(default, Derived):
        return cast(T, field(metadata={OPTION: declared}))
    return field(default=default, metadata={OPTION: declared})


def _one_name(raw: object, valid: Sequence[str], where: str) -> str:
    chosen = parse_names(raw, valid, where)
    if len(chosen) != 1:
        raise UsageError(f"{where}: one value, please (got {', '.join(chosen)}); valid: {', '.join(valid)}")
    return chosen[0]


def _seconds(raw: object, where: str) -> float:
    """A positive, finite number of seconds from text or a TOML number."""
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{where} needs a number of seconds, e.g. 300, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{where} needs a positive number of seconds, e.g. 300, got {raw!r}")
    return value


def _count(raw: object, where: str, minimum: int, maximum: int | None = None) -> int:
    """A whole number in [`minimum`, `maximum`] from text or a TOML integer."""
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


def _ab_text(raw: object, where: str) -> str:
    """A revision or a path for the A/B options: non-empty text."""
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError(f"{where} needs a value (a git revision or merge-base; a python path), got {raw!r}")
    return raw.strip()


def _switch(raw: object, where: str) -> bool:
    """An on/off option: a flag on the command line, true or false in pyproject.toml."""
    if not isinstance(raw, bool):
        raise UsageError(f"{where}: {raw!r} is not true or false")
    return raw


def _machine_name(raw: object, where: str) -> str:
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


def _path_text(raw: object, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError(f"{where}: {raw!r} is not a path")
    return raw.strip()

def plain(check: Callable[[object, str], T]) -> Parser[T]:
    """A parser that needs nothing but the value and where it came from."""
    return lambda raw, where, known: check(raw, where)


def names(valid: Sequence[str]) -> Parser[list[str]]:
    """Comma-separated names (or a TOML list of them), each one of `valid`."""
    return lambda raw, where, known: parse_names(raw, valid, where)


def one_name(valid: Sequence[str]) -> Parser[str]:
    """Exactly one of `valid`."""
    return lambda raw, where, known: _one_name(raw, valid, where)


def fails(raw: object, where: str, known: Known) -> bool:
    """`fail` or `warn` (the on-* options): whether the thing fails the gate or the job."""
    return _one_name(raw, FAIL_OR_WARN, where) == "fail"


def whole_number(minimum: int, maximum: int | None = None) -> Parser[int]:
    """A whole number in [`minimum`, `maximum`], from text or a TOML integer."""
    return lambda raw, where, known: _count(raw, where, minimum, maximum)


def model_names(raw: object, where: str, known: Known) -> list[str]:
    """Model names this session knows, `dataloader`, or `all` (every model and the DataLoader cases)."""
    chosen = parse_names(raw, ["all", *known.workload_names, DATALOADER_MODEL], where)
    return [*known.workload_names, DATALOADER_MODEL] if "all" in chosen else chosen


def isolation_name(raw: object, where: str, known: Known) -> Isolation:
    return "pass" if _one_name(raw, ISOLATIONS, where) == "pass" else "case"


def summary_folder(raw: object, where: str, known: Known) -> str:
    """A folder perfsuite can write into (or make), relative to the project root unless absolute."""
    return _writable_folder(_path_text(raw, where), where, known.project_root, chosen=True)


@dataclass(frozen=True)
class Bands:
    """A tolerance option's value: one band for every case (`every_case`: a number, from the command line or
    pyproject.toml), or bands by model or benchmark id (`by_name`: a table in pyproject.toml)."""

    every_case: float | None = None
    by_name: Mapping[str, float] = field(default_factory=dict)


def bands(raw: object, where: str, known: Known) -> Bands:
    """A band for every case (a number, or text such as 10%), or a table of bands per model or benchmark id."""
    if isinstance(raw, Mapping):
        return Bands(by_name=parse_tolerance_table(raw, where, known.workload_names))
    return Bands(every_case=parse_tolerance(raw, where))


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every choice of a session, validated. Every field but `given` (the keys of the options given) is one of
    perfsuite's options, declared once here: `option(key, help, parser, default, example)` gives pytest's
    `--perf-<key>`, `perfsuite list`'s options (those of the matrix), the key of [tool.perfsuite], its parser with
    its error messages, its default and the field's type; OPTIONS lists them in this order. Adding an option is one
    field here and its use. Paths are as given (relative to the project root unless absolute).

    The matrix fields (`matrix`) choose the cases. `processes` is how many fresh processes measure each case (1: in
    the pytest process), with `isolation` (a fresh process per case, or per pass over all cases); `threads` torch's
    CPU threads in each (None: torch's default); `ddp_processes` the processes of a train-ddp step (None: one per CUDA
    GPU, 2 on the CPU); `machine` names this machine's baseline files instead of the hardware. Tolerances: one band
    for every case, else the per-id/per-model tables (Bands). `update_baseline` appends this session's runs to the
    histories, `rebaseline` starts them over, `record_degraded` lets either record under degraded conditions.
    `change_fails`: a case changed against its history fails the gate (else
    it is a warning). `ab_revision` and `ab_python` make the session an A/B job (head against a base revision and/or
    interpreter), with `processes` pairs of processes; `inconclusive_fails`: an A/B verdict that could not judge fails
    the job (else it is a warning); `no_base_fails`: a model the base does not have fails the job (else it reads 'no
    base' and the others are judged); `ab_explain` which A/B cases get an op-level explanation (all, changed or none);
    `history_explain` which cases judged against their history get one (all, changed or none; anything but none
    profiles every case's ops after its rounds, and a recording session stores them).
    """

    devices: Sequence[str] = option(
        "device", f"comma-separated {','.join(DEVICES)} (default: every available accelerator, else cpu)",
        names(DEVICES), Derived(lambda known, where: list(known.available_devices)), example="cpu")
    dtypes: Sequence[str] = option(
        "dtype", f"comma-separated {','.join(DTYPES)}; bf16/fp16 are autocast mixed precision (default: "
        f"{','.join(DEFAULT_DTYPES)})", names(DTYPES), DEFAULT_DTYPES, example="fp32")
    models: Sequence[str] | None = option(
        "model", "comma-separated model names, dataloader (the DataLoader cases), or all (default: your own "
        "models where your conftest registers any, else the built-in ones and the DataLoader cases)",
        model_names, None, example="all")
    batch_sizes: Sequence[int] | None = option(
        "batch-size", "comma-separated batch sizes (default: the profile's per model)", plain(parse_batch_sizes),
        None, example="2")
    modes: Sequence[str] = option(
        "mode", f"comma-separated {','.join(MODES)} or their variants (default: {','.join(MODES)} where the "
        "model has them)", names(ALL_MODES), MODES, example="infer")
    profile: str = option(
        "profile", f"{' | '.join(PROFILES)} (default: {ACCELERATOR_DEFAULT_PROFILE} where an accelerator runs, "
        f"{CPU_DEFAULT_PROFILE} on the CPU alone)", one_name(PROFILES),
        Derived(lambda known, where: default_profile(cast(Sequence[str], known.filled["devices"]))), example="smoke")
    compile_modes: Sequence[str] = option(
        "compile", f"comma-separated {','.join(COMPILE_MODES)}: the step as written, through torch.compile, "
        "through torch.compile's CUDA-graph mode, or replayed as a captured CUDA graph (default: "
        f"{','.join(DEFAULT_COMPILE_MODES)})", names(COMPILE_MODES), DEFAULT_COMPILE_MODES, example="eager")
    figure: str = option(
        "figure", "what the rounds time: step (steps back to back, the device drained once a round: the time a "
        "training or serving loop sees per step) or latency (one step and a drain a round: what one request "
        "waits); the gate and A/B judge it (default: step)", one_name(FIGURES), STEP_FIGURE, example="step")
    warmup_steps: int = option(
        "warmup", f"untimed warm-up steps per case (default: {DEFAULT_WARMUP_STEPS})",
        whole_number(0, MAX_WARMUP_STEPS), DEFAULT_WARMUP_STEPS, example=1)
    processes: int = option(
        "processes", "measure every case in K fresh processes, interleaved across cases (default: 1, in the "
        f"pytest process); the gate judges runs, so K >= 3 calibrates it; an A/B job starts K warm processes "
        f"(each holding both sides where it can, else K process pairs) and measures every case in at least K "
        f"blocks (default {AB_DEFAULT_PAIRS}, at least {MIN_AB_PAIRS})",
        whole_number(1, MAX_PROCESSES), Derived(lambda known, where: AB_DEFAULT_PAIRS if known.ab else 1), example=3)
    isolation: Isolation = option(
        "isolation", "with --perf-processes: case (a fresh process per case, the default) or pass (one process "
        "per shuffled pass over all cases, the default of an A/B job: one pair of processes per pass)",
        isolation_name, Derived(lambda known, where: "pass" if known.ab else "case"), example="pass")
    threads: int | None = option(
        "threads", "torch CPU threads in each measuring process (default: torch's)", whole_number(1), None,
        example=1)
    ddp_processes: int | None = option(
        "ddp-processes", "processes of a train-ddp case, one device each (default: one per CUDA GPU, 2 on cpu)",
        whole_number(1), None, example=2)
    update_baseline: bool = option(
        "update-baseline", "append this session's runs to each case's baseline history (others are kept)",
        plain(_switch), False, example=True, switch=True)
    rebaseline: bool = option(
        "rebaseline", "start the baseline history of each case run over (after a torch upgrade, say); an "
        "unreadable baseline file is moved aside first", plain(_switch), False, example=False, switch=True)
    record_degraded: bool = option(
        "record-degraded", "record baselines even where the machine runs degraded (on battery, in Low Power Mode, "
        "under thermal pressure, a GPU slowed for heat or a hardware fault), which a recording session refuses "
        "otherwise: such a history would hide a real slowdown later", plain(_switch), False, example=False,
        switch=True)
    change_fails: bool = option(
        "on-change", "fail | warn: what a case changed against its history (model, inputs, torch, threads, "
        "machine) does to the gate (default: fail, naming what changed)", fails, True, example="warn")
    inconclusive_fails: bool = option(
        "on-inconclusive", "fail | warn: what an A/B verdict that could not judge (its floor wider than the band) "
        "does to the job (default: fail, saying what would judge it: a verdict that cannot judge is not a pass)",
        fails, True, example="warn")
    no_base_fails: bool = option(
        "on-no-base", "fail | warn: what a model the A/B base does not have (a pull request that adds it) does to "
        "the job (default: warn: the other models are judged and it reads 'no base', never a pass)",
        fails, False, example="fail")
    machine: str | None = option(
        "machine", "name this machine's baseline files, e.g. ci-m2-max (default: from the hardware)",
        plain(_machine_name), None, example="ci-m2")
    baseline_dir: str = option(
        "baseline-dir", "where baselines live (default: baselines/ beside pyproject.toml)",
        plain(_path_text), DEFAULT_BASELINE_DIR, example="baselines")
    summary_dir: str = option(
        "summary-dir", "where the verdicts go as summary.json and summary.md (default: .perfsuite/)",
        summary_folder, Derived(lambda known, where: _writable_folder(
            DEFAULT_SUMMARY_DIR, where, known.project_root, chosen=False)), example=".perfsuite")
    ab_revision: str | None = option(
        "ab", "A/B in one job: measure every case on this working tree (head) and on BASE, a git revision "
        "(main, origin/main, a commit, HEAD~1, or merge-base: the merge base of HEAD with the default branch), "
        "side by side in alternating windows, and judge head against base (no baselines read or written)",
        plain(_ab_text), None, example="merge-base")
    ab_python: str | None = option(
        "ab-python", "A/B against another interpreter (PATH of its python, e.g. with another torch): the base "
        "side runs there, on BASE's code with --perf-ab, else on this working tree",
        plain(_ab_text), None, example="/usr/bin/python3")
    ab_budget_s: float = option(
        "ab-budget", "seconds an A/B job may spend measuring: each case gets blocks until it is decided, and "
        f"further rounds stop when the next would not fit (default {AB_DEFAULT_BUDGET_S:.0f}); a case still open "
        "then is inconclusive, saying how much more would decide it",
        plain(_seconds), AB_DEFAULT_BUDGET_S, example=120)
    ab_explain: str = option(
        "ab-explain", "all | changed | none: which A/B cases get an op-level explanation, profiled on both "
        "sides after the timed windows and diffed (ops whose calls changed, new or gone ops, the ops that account "
        "for the change; default: changed, the regressed and improved ones)",
        one_name(EXPLAIN), "changed", example="all")
    history_explain: str = option(
        "history-explain", "all | changed | none: which cases judged against their history get an op-level "
        "explanation against the history's last op summary (default: changed, the regressed and improved ones); "
        "all and changed profile a few steps of every case after its timed rounds, and a recording session "
        "stores that summary beside the runs; none profiles nothing",
        one_name(EXPLAIN), "changed", example="none")
    tolerance: Bands = option(
        "tolerance", "time band for every case, e.g. 0.15 or 15%% (default 0.10, or [tool.perfsuite.tolerance] "
        "per model or benchmark id)", bands, Bands(), example=0.1, table=True)
    memory_tolerance: Bands = option(
        "memory-tolerance", "memory band, e.g. 0.10 (default 0.10, or [tool.perfsuite.memory-tolerance] per "
        "model or benchmark id)", bands, Bands(), example=0.2, table=True)
    given: frozenset[str] = frozenset()

    @property
    def matrix(self) -> MatrixOptions:
        """The options that choose the cases."""
        return MatrixOptions(**{name: getattr(self, name) for name in MATRIX_FIELDS})

    @property
    def ab(self) -> bool:
        """Whether this session is an A/B job."""
        return self.ab_revision is not None or self.ab_python is not None

    @property
    def profile_chosen(self) -> bool:
        """Whether the profile was given (else it follows the devices: `default_profile`)."""
        return "profile" in self.given


# Every option in its declaration's order: pytest's --perf-* options, `perfsuite list`'s and the keys of
# [tool.perfsuite].
OPTIONS: tuple[Option[Any], ...] = tuple(
    replace(settings_field.metadata[OPTION], fills=settings_field.name)
    for settings_field in fields(Settings) if OPTION in settings_field.metadata
)
OPTION_NAMES = {declared.raw_name: declared for declared in OPTIONS}


class RawSettings:
    """Option values as given (text, TOML numbers, booleans, lists or tables), before validation, by the option's
    name with `_` for `-` (`--perf-batch-size` / `batch-size` is `batch_size`); an option not given reads None."""

    __slots__ = ("given",)
    given: Mapping[str, object]

    def __init__(self, **given: object) -> None:
        unknown = sorted(set(given) - set(OPTION_NAMES))
        if unknown:
            raise TypeError(f"RawSettings: no option is named {', '.join(unknown)}; options: {', '.join(OPTION_NAMES)}")
        object.__setattr__(self, "given", {name: value for name, value in given.items() if value is not None})

    def __getattr__(self, name: str) -> object:
        if name in OPTION_NAMES:
            return self.given.get(name)
        raise AttributeError(f"RawSettings has no option {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RawSettings is read-only")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawSettings) and self.given == other.given

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.given)))

    def __repr__(self) -> str:
        return f"RawSettings({', '.join(f'{name}={value!r}' for name, value in self.given.items())})"


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
    spellings = {spelling: option for option in OPTIONS for spelling in {option.key, option.raw_name}}
    unknown = sorted(k for k in table if k not in spellings)
    if unknown:
        raise UsageError(
            f"{source} [tool.perfsuite]: unknown key(s) {', '.join(unknown)}; valid: "
            f"{', '.join(option.key for option in OPTIONS)}"
        )
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    for option in OPTIONS:
        given = cli.given.get(option.raw_name)
        in_table = [spelling for spelling in dict.fromkeys((option.key, option.raw_name)) if spelling in table]
        if len(in_table) > 1:
            raise UsageError(f"{source} [tool.perfsuite]: {' and '.join(in_table)} are one key; keep {option.key}")
        if given is not None:
            values[option.raw_name], origins[option.raw_name] = given, f"{flag_prefix}{option.key}"
        elif in_table:
            key = in_table[0]
            values[option.raw_name], origins[option.raw_name] = table[key], f"{source} [tool.perfsuite] {key}"
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
    """Validate merged raw values, each by its option's parser (defaults where not given, derived ones last);
    `origins` names where each came from in errors. Relative paths are checked against `project_root` (where the
    session writes them), so nothing is measured before a bad one is found."""

    def where(option: Option[Any]) -> str:
        return origins.get(option.raw_name, option.flag)

    known = Known(workload_names, available_devices, project_root)
    filled: dict[str, Any] = {}  # typed by each option's parser, which mypy checks against its Settings field
    for option in OPTIONS:
        value = raw.given.get(option.raw_name)
        if value is not None:
            filled[option.fills] = option.parse(value, where(option), known)
        elif not isinstance(option.default, Derived):
            filled[option.fills] = option.default
    for option in OPTIONS:
        if option.raw_name not in raw.given and isinstance(option.default, Derived):
            filled[option.fills] = option.default.rule(replace(known, filled=filled), where(option))
    given = frozenset(option.key for option in OPTIONS if option.raw_name in raw.given)
    chosen = Settings(given=given, **filled)
    check_combination(chosen, lambda key: where(OPTION_NAMES[key]))
    return chosen


def check_combination(chosen: Settings, where: Callable[[str], str]) -> None:
    """The rules between options: an A/B job needs two processes or more and writes no baselines; raises
    UsageError naming the option (`where(name)` says where it came from)."""
    if chosen.ab and chosen.processes < MIN_AB_PAIRS:
        raise UsageError(f"{where('processes')} {chosen.processes}: an A/B job needs at least {MIN_AB_PAIRS} "
                         f"processes to see the spread between processes (default {AB_DEFAULT_PAIRS})")
    if chosen.ab and (chosen.update_baseline or chosen.rebaseline):
        raise UsageError(f"{where('ab')}: an A/B job judges head against base and writes no baselines; record "
                         "baselines in a session of their own (--perf-update-baseline without --perf-ab)")


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
