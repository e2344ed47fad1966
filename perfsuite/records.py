"""Records: what was measured and what came of it, as plain immutable data.

- `Case` says *what* is measured (device, dtype, model, batch size, mode, profile, compile mode): the identity
  of a benchmark, declared here once and held by every other record.
- `Run` is one process's timed run of a case: every round in seconds and the figures measured beside them.
- `Measurement` is a case measured in one or more processes: its runs.
- `StoredRun` is what a baseline keeps of a run, and `BaselineEntry` a case's history of stored runs with
  the facts that must match before two measurements may be compared.

Statistics (medians, IQR, samples/s, TFLOP/s) are derived from the rounds, never stored beside them, so they
cannot disagree. Nothing here imports torch or any other perfsuite module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypedDict

import numpy as np

# The shortest round a timer can honestly report: a shorter (or subnormal) time is a timing failure, and it would
# make samples/s overflow to infinity.
MIN_ROUND_TIME_S = 1e-9
# A figure recorded beside the times (extra_info in pytest-benchmark's JSON): JSON scalars only.
Fact = str | int | float | bool | None
# The band of a case when none is configured: the smallest change in time, or in memory, that matters (10%).
DEFAULT_TOLERANCE = 0.10
DEFAULT_MEMORY_TOLERANCE = 0.10
# What the timed rounds measure: `step`, steps run back to back as a training or serving loop runs them, the device
# drained once at each round's end (its time per step is what the loop sees: throughput); or `latency`, one step and
# a drain per round (what one request waits at batch 1).
STEP_FIGURE = "step"
LATENCY_FIGURE = "latency"
FIGURES = (STEP_FIGURE, LATENCY_FIGURE)
# The compile mode of a step run as written; the matrix's other modes are declared in perfsuite.matrix.axes.
EAGER = "eager"


@dataclass(frozen=True)
class Case:
    """One benchmark: a model run in one mode, at one batch size and dtype, on one device, at one profile, eager
    or compiled (`compile`: eager, inductor, reduce-overhead or cuda-graph)."""

    device: str
    dtype: str
    model: str
    batch_size: int
    mode: str
    profile: str
    compile: str = EAGER

    @property
    def benchmark_id(self) -> str:
        """The readable id, e.g. `mps-bf16-resnet18-bs64-train`; a compile mode other than eager and a
        non-standard profile add suffixes (`cuda-bf16-resnet18-bs32-infer-inductor-smoke`)."""
        compiled = "" if self.compile == EAGER else f"-{self.compile}"
        profile = "" if self.profile == "standard" else f"-{self.profile}"
        return f"{self.device}-{self.dtype}-{self.model}-bs{self.batch_size}-{self.mode}{compiled}{profile}"


# Memory figures that belong to the case wherever it ran: an allocator's peak over the timed rounds after a reset
# (CUDA's; MPS's from torch 2.13). The others (a process's peak resident set, the MPS driver's allocation) belong to
# the case only in a process of its own.
CASE_OWN_MEMORY_FIGURES = ("cuda_max_allocated_bytes", "mps_max_allocated_bytes")


def memory_belongs_to_case(figure: str, fresh_process: bool) -> bool:
    """Whether the memory figure `figure` measures the case alone: a peak after a reset always does; the others only
    when the case had a fresh process to itself."""
    return figure in CASE_OWN_MEMORY_FIGURES or fresh_process


def check_band(fraction: float, what: str) -> None:
    """Raise ValueError unless `fraction` is a band, a fraction in [0, 1): 0.10 means a 10% band; `what` names it."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
        raise ValueError(f"{what} must be a fraction in [0, 1), e.g. 0.10 for a 10% band; got {fraction!r}")


def check_round_times(round_times_s: Sequence[float] | np.ndarray, where: str) -> None:
    """Raise ValueError unless `round_times_s` is non-empty and every time is finite and >= MIN_ROUND_TIME_S seconds.

    `where` names the benchmark (and the side: current, baseline) for the message.
    """
    try:
        values = np.asarray(round_times_s, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: round times must be numbers of seconds, got {round_times_s!r:.80}") from None
    if values.size == 0:
        raise ValueError(f"{where}: no timed rounds; a benchmark needs at least one round to be judged")
    bad = values[~(np.isfinite(values) & (values >= MIN_ROUND_TIME_S))]
    if bad.size:
        raise ValueError(
            f"{where}: round times must be finite and at least 1 ns ({MIN_ROUND_TIME_S:g} s), got "
            f"{bad[:3].tolist()!r}{' and more' if bad.size > 3 else ''}; a zero, NaN or sub-nanosecond time means the "
            "timer or the device synchronisation failed, so this result cannot be judged: re-run the benchmark"
        )


def median_s(times_s: Sequence[float]) -> float:
    """The median of `times_s` in seconds."""
    return float(np.median(times_s))


@dataclass(frozen=True)
class Run:
    """One process's timed run of `case`.

    `round_times_s` holds every timed round in seconds (device work finished inside each round).
    `samples_per_step` is what one step processes (the batch size, times the processes of a train-ddp step);
    `flops_per_step` is one process's FLOPs per step (FlopCounterMode), None where not counted.
    `memory_figure` names the one memory figure that belongs to this case and `memory_bytes` is its value.
    `config_digest` hashes the model's parameter and input shapes; `threads` is torch's CPU thread count.
    `gpu_busy_fraction` is GPU kernel time / step time from one profiled pass (CUDA only), `event_median_s`
    the median of device-event times of a few steps; `facts` are further figures (e.g. denoising steps).
    `figure` says what the rounds measure (STEP_FIGURE: `steps_per_round` steps back to back, then a drain, each
    round time divided by the steps; LATENCY_FIGURE: one step and a drain); `latency_median_s` is the median of
    single steps each followed by a drain (None where not measured); `op_profile` the ops of a few steps profiled
    after the rounds, where the settings asked for it (`OpProfile`); `conditions_before` and `conditions_after` the
    machine's conditions read just before the first timed round and just after the last (None: not read, as in
    runs recorded before perfsuite read them).
    """

    case: Case
    round_times_s: tuple[float, ...]
    samples_per_step: int
    flops_per_step: int | None
    memory_figure: str
    memory_bytes: int | None
    config_digest: str
    torch_version: str
    threads: int
    parameter_count: int | None = None
    gpu_busy_fraction: float | None = None
    event_median_s: float | None = None
    facts: Mapping[str, Fact] = field(default_factory=dict)
    figure: str = STEP_FIGURE
    steps_per_round: int = 1
    latency_median_s: float | None = None
    op_profile: OpProfile | None = None
    conditions_before: Conditions | None = None
    conditions_after: Conditions | None = None

    def __post_init__(self) -> None:
        # A tuple keeps the record immutable even when a list was passed in.
        object.__setattr__(self, "round_times_s", tuple(float(t) for t in self.round_times_s))
        check_round_times(self.round_times_s, self.case.benchmark_id)

    @property
    def rounds(self) -> int:
        """How many rounds were timed."""
        return len(self.round_times_s)

    @property
    def conditions(self) -> tuple[Conditions, ...]:
        """The conditions read around the rounds, before then after (none where they were not read)."""
        return tuple(c for c in (self.conditions_before, self.conditions_after) if c is not None)

    @property
    def own_memory_bytes(self) -> int | None:
        """The memory figure when it measures the case alone (see `memory_belongs_to_case`), else None."""
        fresh_process = self.facts.get("fresh_process") is True
        if self.memory_bytes is None or not memory_belongs_to_case(self.memory_figure, fresh_process):
            return None
        return self.memory_bytes

    @property
    def median_s(self) -> float:
        """Median round time in seconds."""
        return median_s(self.round_times_s)

    @property
    def iqr_s(self) -> float:
        """Interquartile range of the round times in seconds (numpy's linear interpolation)."""
        q1, q3 = np.percentile(self.round_times_s, [25, 75])
        return float(q3 - q1)

    @property
    def samples_per_s(self) -> float:
        """Samples per second at the median round time."""
        return self.samples_per_step / self.median_s

    @property
    def tflops_per_s(self) -> float | None:
        """TFLOP/s at the median round time, over every process of a step; None where FLOPs were not counted."""
        if not self.flops_per_step:
            return None
        processes = max(1, self.samples_per_step // self.case.batch_size)
        return self.flops_per_step * processes / self.median_s / 1e12


# What the machine was doing when a case ran (`Conditions`): where power came from, the energy mode, the thermal
# pressure and the limits the OS or the GPU put on its clocks. Each value is as its source printed it, never guessed.
PowerSource = Literal["AC", "battery", "UPS"]
POWER_SOURCES: tuple[PowerSource, ...] = ("AC", "battery", "UPS")
EnergyMode = Literal["automatic", "low power", "high power"]
ENERGY_MODES: tuple[EnergyMode, ...] = ("automatic", "low power", "high power")
# macOS's thermal pressure levels, lowest first (libkern/OSThermalNotification.h: 0 nominal to 4 sleeping on macOS).
ThermalPressure = Literal["nominal", "moderate", "heavy", "trapping", "sleeping"]
THERMAL_PRESSURES: tuple[ThermalPressure, ...] = ("nominal", "moderate", "heavy", "trapping", "sleeping")
# The sources a reading comes from: the keys of `Conditions.unread`, which says why one that applies here was not read.
POWER_SOURCE = "power source"
ENERGY_MODE = "energy mode"
THERMAL_PRESSURE = "thermal pressure"
CPU_SPEED_LIMIT = "CPU speed limit"
CPU_FREQUENCY = "CPU frequency scaling"
CPU_TURBO = "CPU turbo"
GPU_CLOCKS = "GPU clocks"
CONDITION_SOURCES = (
    POWER_SOURCE, ENERGY_MODE, THERMAL_PRESSURE, CPU_SPEED_LIMIT, CPU_FREQUENCY, CPU_TURBO, GPU_CLOCKS,
)
# The GPU clocks-event reasons (named as nvidia-smi -q -d PERFORMANCE names them) that hold a GPU below its usual
# clock for heat or a hardware fault: a degraded state. Not the SW power cap, which a busy datacenter GPU runs at
# every day (its history shares it), nor idle, sync boost or a clock setting.
GPU_SLOWDOWN_EVENTS = ("HW slowdown", "SW thermal slowdown", "HW thermal slowdown", "HW power brake slowdown")


@dataclass(frozen=True)
class Conditions:
    """The machine's conditions at one moment, as far as its sources tell them; None where a source does not apply
    here or could not be read, and `unread` names each source that applies here but gave nothing, with why (`not
    exposed: ...`, `nvidia-ml-py not installed`).

    macOS: `power_source` and `battery_percent` (pmset -g batt), `energy_mode` and whether High Power is offered on
    the power source in use (`high_power_offered`, pmset -g), `thermal_pressure` (the notify key
    com.apple.system.thermalpressurelevel) and `cpu_speed_limit_percent` (pmset -g therm, Intel Macs). Linux:
    `cpu_governor` (the governors of every CPU, joined with '/' where they differ), `cpu_turbo`, the mean current and
    the highest maximum frequency (cpufreq). CUDA (NVML): the SM clock and its maximum, the temperature, the power
    drawn and its enforced limit, and `gpu_clock_events`, the names of the clocks-event (throttle) reasons set."""

    power_source: PowerSource | None = None
    battery_percent: int | None = None
    energy_mode: EnergyMode | None = None
    high_power_offered: bool | None = None
    thermal_pressure: ThermalPressure | None = None
    cpu_speed_limit_percent: int | None = None
    cpu_governor: str | None = None
    cpu_turbo: bool | None = None
    cpu_frequency_mhz: float | None = None
    cpu_max_frequency_mhz: float | None = None
    gpu_sm_clock_mhz: int | None = None
    gpu_max_sm_clock_mhz: int | None = None
    gpu_temperature_c: int | None = None
    gpu_power_w: float | None = None
    gpu_power_limit_w: float | None = None
    gpu_clock_events: tuple[str, ...] | None = None
    unread: Mapping[str, str] = field(default_factory=dict)


_CONDITION_KINDS: dict[str, tuple[type, ...]] = {
    "power_source": (str,), "battery_percent": (int,), "energy_mode": (str,), "high_power_offered": (bool,),
    "thermal_pressure": (str,), "cpu_speed_limit_percent": (int,), "cpu_governor": (str,), "cpu_turbo": (bool,),
    "cpu_frequency_mhz": (int, float), "cpu_max_frequency_mhz": (int, float), "gpu_sm_clock_mhz": (int,),
    "gpu_max_sm_clock_mhz": (int,), "gpu_temperature_c": (int,), "gpu_power_w": (int, float),
    "gpu_power_limit_w": (int, float),
}
_CONDITION_CHOICES: dict[str, tuple[str, ...]] = {
    "power_source": POWER_SOURCES, "energy_mode": ENERGY_MODES, "thermal_pressure": THERMAL_PRESSURES,
}


def conditions_to_json(conditions: Conditions) -> dict[str, object]:
    """`conditions` as JSON-ready data: the values read (a field that is None is left out) and `unread`."""
    document: dict[str, object] = {
        name: value for name in _CONDITION_KINDS if (value := getattr(conditions, name)) is not None
    }
    if conditions.gpu_clock_events is not None:
        document["gpu_clock_events"] = list(conditions.gpu_clock_events)
    document["unread"] = dict(conditions.unread)
    return document


def conditions_from_json(document: object, where: str) -> Conditions:
    """The `Conditions` that `conditions_to_json` wrote; ValueError naming `where` and the field for any other
    shape (an unknown field, a value of the wrong kind, a state no source prints)."""
    if not isinstance(document, dict):
        raise ValueError(f"{where}: conditions must be an object, got {document!r:.60}")
    unknown = sorted(set(document) - {*_CONDITION_KINDS, "gpu_clock_events", "unread"})
    if unknown:
        raise ValueError(f"{where}: conditions have no field {', '.join(map(repr, unknown))}")
    values: dict[str, object] = {}
    for name, kinds in _CONDITION_KINDS.items():
        value = document.get(name)
        if value is None:
            continue
        if isinstance(value, bool) != (kinds == (bool,)) or not isinstance(value, kinds):
            expected = " or ".join(kind.__name__ for kind in kinds)
            raise ValueError(f"{where}: conditions {name!r} is {value!r:.60}, not {expected}")
        if name in _CONDITION_CHOICES and value not in _CONDITION_CHOICES[name]:
            valid = ", ".join(_CONDITION_CHOICES[name])
            raise ValueError(f"{where}: conditions {name!r} is {value!r:.60}; valid: {valid}")
        values[name] = value
    events = document.get("gpu_clock_events")
    if events is not None:
        if not isinstance(events, list) or not all(isinstance(event, str) for event in events):
            raise ValueError(f"{where}: conditions 'gpu_clock_events' must be a list of text")
        values["gpu_clock_events"] = tuple(events)
    unread = document.get("unread", {})
    if not isinstance(unread, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in unread.items()):
        raise ValueError(f"{where}: conditions 'unread' must map each source to why it was not read, as text")
    return Conditions(**values, unread=dict(unread))  # type: ignore[arg-type]


# Why a case has no run: the device ran out of memory; it cannot run here (a step a CUDA graph cannot capture);
# its training loss was NaN or infinite; it computes a wrong result (a compiled step against eager, channels_last
# gradients against the contiguous layout); torch.compile compiled during the timed rounds; its step raised an
# error; or the process measuring it died.
FailureKind = Literal[
    "out-of-memory", "cannot-run", "non-finite-loss", "wrong-result", "compiled-during-rounds", "error", "crashed",
]
# Kinds that skip a case rather than fail it: a limit of this machine, not a defect of the case.
SKIPPING_FAILURES: tuple[FailureKind, ...] = ("out-of-memory", "cannot-run")


@dataclass(frozen=True)
class Failure:
    """A case measured in one process without a run: what kind of failure, the message for people (it names the
    case), and details (the end of a traceback or of a dead process's output; "" when the message says all)."""

    case: Case
    kind: FailureKind
    message: str
    details: str = ""

    @property
    def skips(self) -> bool:
        """Whether the case is skipped (a limit of this machine) rather than failed."""
        return self.kind in SKIPPING_FAILURES


# What one process made of one case: a run, a failure, or None when no round was timed (timing disabled).
Outcome = Run | Failure | None


class _TimedRun(Protocol):
    @property
    def median_s(self) -> float: ...


class _HasRuns(Protocol):
    @property
    def runs(self) -> Sequence[_TimedRun]: ...


class RunMedians:
    """What a record holding runs (a measurement, a baseline's history) says of their times."""

    @property
    def run_medians_s(self: _HasRuns) -> tuple[float, ...]:
        """Each run's median round time in seconds, in the order the runs ran."""
        return _run_medians_s(self.runs)

    @property
    def median_s(self: _HasRuns) -> float:
        """The median of the runs' medians, in seconds: the record's time per step."""
        return median_s(_run_medians_s(self.runs))


def _run_medians_s(runs: Sequence[_TimedRun]) -> tuple[float, ...]:
    return tuple(r.median_s for r in runs)


@dataclass(frozen=True)
class Measurement(RunMedians):
    """A case measured in one or more fresh processes: `runs`, one per process, in the order they ran."""

    case: Case
    runs: tuple[Run, ...]

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError(f"{self.case.benchmark_id}: a measurement needs at least one run")
        strangers = [r.case.benchmark_id for r in self.runs if r.case != self.case]
        if strangers:
            raise ValueError(f"{self.case.benchmark_id}: runs of other cases mixed in: {', '.join(strangers)}")

    @property
    def round_times_s(self) -> tuple[float, ...]:
        """Every round of every run, run after run (what pytest-benchmark's statistics are computed on)."""
        return tuple(t for r in self.runs for t in r.round_times_s)

    @property
    def last(self) -> Run:
        """The last run: its figures stand for the measurement where one value is shown."""
        return self.runs[-1]

    @property
    def samples_per_s(self) -> float:
        """Samples per second at the measurement's median time."""
        return self.last.samples_per_step / self.median_s

    @property
    def own_memory_bytes(self) -> int | None:
        """The median of the runs' memory figures (as a baseline's is), when every run's figure belongs to the case
        alone; None otherwise."""
        own = [run.own_memory_bytes for run in self.runs]
        figures = [m for m in own if m is not None]
        return int(np.median(figures)) if figures and len(figures) == len(own) else None

    @property
    def tflops_per_s(self) -> float | None:
        """TFLOP/s at the measurement's median time, where the step's FLOPs were counted."""
        flops = self.last.flops_per_step
        return None if not flops else flops / self.median_s / 1e12


def measurement_of(case: Case, outcomes: Sequence[Outcome]) -> Measurement | Failure | None:
    """What the outcomes of `case` in one or more processes make: the failure to report when any process failed (one
    that fails the case before one that only skips it), else the measurement of its runs; None when no process timed
    a round."""
    failures = [outcome for outcome in outcomes if isinstance(outcome, Failure)]
    if failures:
        return next((f for f in failures if not f.skips), failures[0])
    runs = tuple(outcome for outcome in outcomes if isinstance(outcome, Run))
    return Measurement(case, runs) if runs else None


class WorkloadSource(TypedDict):
    """A module that defines one of a workload's functions: its import name and its file (None if it has none); a
    process that did not import it finds the workload there."""

    module: str
    file: str | None


@dataclass(frozen=True)
class ProcessProgress:
    """One case measured by one process of a session: which pass of how many, the case, and the session's count of
    cases measured so far, of all, and its seconds so far."""

    pass_index: int
    passes: int
    benchmark_id: str
    done: int
    total: int
    elapsed_s: float


@dataclass(frozen=True)
class AbBlockProgress:
    """One block of an A/B case done: the case, the block's number, and either its median head/base ratio over its
    `window_pairs` and whether the case is decided, or the `failure` that ended it; the job's seconds so far of its
    budget."""

    benchmark_id: str
    block: int
    elapsed_s: float
    budget_s: float
    head_over_base: float | None = None
    window_pairs: int = 0
    decided: bool = False
    failure: str | None = None


@dataclass(frozen=True)
class AbProfileFailed:
    """The ops of an A/B case could not be profiled (its verdict stands): why."""

    benchmark_id: str
    message: str


AbProgress = AbBlockProgress | AbProfileFailed


@dataclass(frozen=True)
class StoredRun:
    """What a baseline keeps of one run: its median over every round, its round count, at most
    `MAX_STORED_ROUNDS` of its rounds (evenly spaced), its memory figure, when and at which commit, and the machine's
    conditions before and after its rounds (None: not recorded)."""

    median_s: float
    rounds: int
    round_times_s: tuple[float, ...]
    memory_bytes: int | None
    recorded_at: str
    commit: str | None
    conditions_before: Conditions | None = None
    conditions_after: Conditions | None = None

    @property
    def conditions(self) -> tuple[Conditions, ...]:
        """The conditions read around the run's rounds (none for a run recorded before perfsuite read them)."""
        return tuple(c for c in (self.conditions_before, self.conditions_after) if c is not None)


@dataclass(frozen=True)
class BaselineEntry(RunMedians):
    """A case's baseline: its history of runs, oldest first, and the facts a new measurement must share.

    `machine` holds the facts that identify the machine the runs came from (`store.baselines.machine_identity`);
    `tolerance` and `memory_tolerance` are the bands in force when it was recorded, as fractions; `figure` what its
    rounds measured (an entry recorded before the figure was stored timed one step and a drain a round: latency);
    `parameter_count` the model's parameters when recorded (None in entries recorded before it was stored);
    `op_profile` the op summary of the last session that stored one (`OpProfile`, with its `recorded_at` and
    `commit`; None in entries recorded before summaries were stored, or without one).
    """

    case: Case
    config_digest: str
    torch_version: str
    threads: int | None
    machine: Mapping[str, str]
    memory_figure: str
    samples_per_step: int
    flops_per_step: int | None
    gpu_busy_fraction: float | None
    tolerance: float
    memory_tolerance: float
    runs: tuple[StoredRun, ...]
    figure: str = STEP_FIGURE
    parameter_count: int | None = None
    op_profile: OpProfile | None = None

    @property
    def memory_bytes(self) -> int | None:
        """The median of the runs' memory figures in bytes (None when no run measured one)."""
        values = [r.memory_bytes for r in self.runs if r.memory_bytes is not None]
        return int(np.median(values)) if values else None

    @property
    def samples_per_s(self) -> float:
        """Samples per second at the baseline's median time."""
        return self.samples_per_step / self.median_s


def is_finite_positive(value: object) -> bool:
    """Whether `value` is a real number (not a bool), finite and > 0."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class AbSide:
    """One side of an A/B job: `label` as the user named it (a revision such as main, or "head" for the working tree),
    the commit it ran (`+dirty` when the working tree had changes; None outside git), its interpreter and torch."""

    label: str
    revision: str | None
    python: str
    torch_version: str | None = None


@dataclass(frozen=True)
class AbPair:
    """One block of an A/B case: the case built and warmed once on each side, then timed in alternating windows.
    `windows_s` holds (base, head) time per step of each window pair in the order they ran; `base` and `head` are
    each side's run (its rounds, figures and memory). `in_one_process`: both sides ran in one process (`process`
    numbers it), else each in a process of its own (a process pair). `one_side_at_a_time`: the case did not fit in
    device memory twice, so the sides took turns in blocks, each building the case alone (a window pair is then a
    pair of blocks)."""

    windows_s: tuple[tuple[float, float], ...]
    base: Run
    head: Run
    base_warmup_s: float
    head_warmup_s: float
    one_side_at_a_time: bool = False
    process: int = 0
    in_one_process: bool = False

    @property
    def conditions(self) -> tuple[Conditions, ...]:
        """The conditions read around the block's windows, on both sides (none where they were not read)."""
        return (*self.base.conditions, *self.head.conditions)


@dataclass(frozen=True)
class AbMeasurement:
    """A case measured on both sides of an A/B job: its blocks (`pairs`), the largest difference between the two
    sides' first outputs (same seed, weights and inputs; None when not compared), where each side's model was
    defined (`sources`: base file, head file), and the `seconds` its blocks took (builds, warm-ups and windows)."""

    case: Case
    pairs: tuple[AbPair, ...]
    largest_output_difference: float | None = None
    sources: tuple[str | None, str | None] = (None, None)
    seconds: float = 0.0

    def measurement(self, side: str) -> Measurement:
        """The runs of one side ("base" or "head") as a Measurement."""
        return Measurement(self.case, tuple(getattr(pair, side) for pair in self.pairs))


# What a profile keeps (`OpProfile`): the largest ops and CUDA kernels by time, so a profile stays small enough to
# keep beside a case's runs in its history.
MAX_PROFILE_OPS = 40
MAX_PROFILE_KERNELS = 20


@dataclass(frozen=True)
class OpTime:
    """One op (or CUDA kernel, or compiled region) over the steps of a profile: its `calls`, its self time on the
    host (time inside it, less the ops it called), and its time on the device (CUDA: the kernels it launched itself;
    None where the device's time per op is not available, as on MPS and the CPU)."""

    name: str
    calls: int
    host_self_s: float
    device_s: float | None = None


# How an op profile's host times were taken: each its fastest profiled step's times the steps (this perfsuite), or
# summed over every step (perfsuite before it: a summary recorded then and stored in a history reads so).
HostTimes = Literal["fastest step", "summed"]
HOST_TIMES_FASTEST_STEP: HostTimes = "fastest step"
HOST_TIMES_SUMMED: HostTimes = "summed"


@dataclass(frozen=True)
class OpProfile:
    """A few steps of a warm case profiled with torch.profiler after its timed rounds (never inside them). Totals
    over `steps` steps, each host time its fastest step's times the steps (other work only adds to a step, so it
    stays out unless it hit every step): `ops` by name (the `MAX_PROFILE_OPS` largest kept, the rest summed in
    `other_ops`), `host_s` the host time of the steps, `host_outside_ops_s` the part of it outside every op (Python,
    hooks, waits), `device_wait_s` the drain after the last step; on CUDA `kernels` by name; `regions` the compiled or
    captured-graph regions, whose inside torch.profiler cannot give per op; where the device falls back to the CPU
    (`watches_fallbacks`, MPS) `fallback_warnings` each CPU-fallback message seen with its count; `limits` what the
    device's profile cannot give. `op_calls` holds the calls of every op of the steps, the ones beyond the largest
    included, so that calls compare exactly between two profiles (empty in a summary an older perfsuite stored).
    `device` is the case's device, `recorded_at` when it was profiled (a UTC time) and `commit` the project's commit
    then, both set where a history keeps it. `host_times` says how its host times were taken
    (`HOST_TIMES_FASTEST_STEP`, or `HOST_TIMES_SUMMED` for a summary an older perfsuite stored)."""

    device: str
    steps: int
    host_s: float
    host_outside_ops_s: float
    ops: tuple[OpTime, ...]
    other_ops: OpTime | None = None
    device_wait_s: float = 0.0
    kernels: tuple[OpTime, ...] = ()
    regions: tuple[OpTime, ...] = ()
    fallback_warnings: tuple[tuple[str, int], ...] = ()
    watches_fallbacks: bool = False
    limits: tuple[str, ...] = ()
    recorded_at: str | None = None
    commit: str | None = None
    host_times: HostTimes = HOST_TIMES_FASTEST_STEP
    op_calls: tuple[tuple[str, int], ...] = ()

    def calls_of_every_op(self) -> dict[str, int] | None:
        """Each op's calls over the steps, every op included; None where the profile kept only its largest ops'
        (a summary an older perfsuite stored whose ops beyond the largest were summed)."""
        if self.op_calls:
            return dict(self.op_calls)
        return {op.name: op.calls for op in self.ops} if self.other_ops is None else None
