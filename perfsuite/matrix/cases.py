"""The matrix of cases: device x dtype x model x batch size x mode, with ids and skip reasons.

Everything here is pure: the facts about this machine come in as a `DeviceFacts` value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from perfsuite.errors import UsageError
from perfsuite.matrix.axes import (
    ALL_MODES,
    COMPILABLE_MODES,
    COMPILE_MODES,
    DATALOADER_MODEL,
    DEFAULT_COMPILE_MODES,
    DEFAULT_DTYPES,
    DEVICES,
    DTYPES,
    EAGER,
    MODES,
    PROFILES,
    base_mode,
)
from perfsuite.records import Case


@dataclass(frozen=True)
class ModelFacts:
    """What the matrix knows of a model, declared by its workload (`Workload.facts`).

    `modes` the modes it runs; `batch_sizes` its default batch sizes per profile (`full` adds to `standard`);
    `builtin` whether perfsuite ships it; `trains_convolutions` whether its training step runs nn.Conv2d;
    `has_batchnorm` whether it has nn.BatchNorm2d layers; `host_loop` whether its step is a pipeline with a
    host-side loop rather than one module call.
    """

    name: str
    modes: tuple[str, ...]
    batch_sizes: Mapping[str, tuple[int, ...]]
    builtin: bool = False
    trains_convolutions: bool = False
    has_batchnorm: bool = False
    host_loop: bool = False

    def batch_sizes_for(self, profile: str) -> tuple[int, ...]:
        """Default batch sizes of `profile`; `full` includes the `standard` ones."""
        if profile == "full":
            standard = tuple(self.batch_sizes.get("standard", ()))
            extra = tuple(b for b in self.batch_sizes.get("full", ()) if b not in standard)
            return standard + extra
        return tuple(self.batch_sizes.get(profile, ()))


# A device's own reasons why a case cannot run on it (declared by its backend in perfsuite.run.devices).
DeviceRule = Callable[[Case, ModelFacts, "DeviceFacts"], "str | None"]


@dataclass(frozen=True)
class DeviceFacts:
    """What decides whether a case can run here.

    `unavailable_reasons` names each device that cannot run and why; `device_rules` holds each device's own rules
    (bf16 on MPS needs torch 2.6, ...); `cuda_graph_devices` the devices that can replay CUDA graphs;
    `device_counts` how many of each device this process sees and `ddp_processes` the train-ddp processes chosen
    (None: the device's default). `compile_unsupported_reason` says why torch.compile cannot run here at all
    (e.g. this Python is not supported by Dynamo) and `cpp_compiler` is the C++ compiler inductor would use on the
    CPU (None: none found).
    """

    unavailable_reasons: Mapping[str, str]
    torch_version: tuple[int, int]
    macos_version: tuple[int, int] | None = None
    compile_unsupported_reason: str | None = None
    cpp_compiler: str | None = "c++"
    device_rules: Mapping[str, DeviceRule] = field(default_factory=dict)
    cuda_graph_devices: frozenset[str] = frozenset()
    device_counts: Mapping[str, int] = field(default_factory=dict)
    ddp_processes: int | None = None


@dataclass(frozen=True)
class MatrixOptions:
    """The user's choices; None means the default for that axis."""

    devices: Sequence[str]
    dtypes: Sequence[str] = DEFAULT_DTYPES
    models: Sequence[str] | None = None
    batch_sizes: Sequence[int] | None = None
    modes: Sequence[str] = MODES
    profile: str = "standard"
    compile_modes: Sequence[str] = DEFAULT_COMPILE_MODES


def parse_names(raw: object, valid: Sequence[str], option: str) -> list[str]:
    """The names in a comma-separated text or a list of texts (a TOML list), each checked against `valid`."""
    if isinstance(raw, str):
        names = [n.strip() for n in raw.split(",")]
    elif isinstance(raw, (list, tuple)) and all(isinstance(n, str) for n in raw):
        names = [n.strip() for n in raw]
    else:
        raise UsageError(f"{option}: should be a comma-separated text or a list of texts, got {raw!r:.60}")
    names = [n for n in names if n]
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        shown = ", ".join(unknown) if unknown else "(empty)"
        raise UsageError(f"{option}: unknown value {shown}; valid: {', '.join(valid)}")
    return list(dict.fromkeys(names))


def parse_batch_sizes(raw: object, option: str = "--perf-batch-size") -> list[int]:
    """The positive batch sizes in a comma-separated text, one whole number or a list of them (TOML)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        parts: list[object] = [raw]
    elif isinstance(raw, str):
        parts = [p.strip() for p in raw.split(",") if p.strip()]
    elif isinstance(raw, (list, tuple)):
        parts = list(raw)
    else:
        parts = [None]
    sizes = []
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            sizes.append(part)
        elif isinstance(part, str) and part.lstrip("-").isdigit():
            sizes.append(int(part))
        else:
            raise UsageError(f"{option}: {raw!r:.60} is not a comma-separated list of whole numbers, e.g. 8,32")
    if not sizes or any(s < 1 for s in sizes):
        raise UsageError(f"{option}: batch sizes must be positive whole numbers, got {raw!r:.60}")
    return list(dict.fromkeys(sizes))


def default_models(models: Mapping[str, ModelFacts]) -> list[str]:
    """The models a session measures when none are named: the user's own (any not built in) when there are some,
    else every one of `models`. The built-in ones join a user's matrix only when named, or with `all`."""
    users = [name for name, facts in models.items() if not facts.builtin]
    return users or list(models)


def build_matrix(options: MatrixOptions, models: Mapping[str, ModelFacts]) -> list[Case]:
    """Every case the options select, in a stable order (model, mode, dtype, batch size, compile mode, device).
    Without a model choice, a user's own models when any is registered, else the built-in ones. Compile modes
    other than eager apply to the plain modes and the channels_last variants only."""
    if options.profile not in PROFILES:
        raise UsageError(f"--perf-profile: unknown value {options.profile}; valid: {', '.join(PROFILES)}")
    chosen = [m for m in options.models if m != DATALOADER_MODEL] if options.models else None
    model_names = chosen if chosen is not None else default_models(models)
    cases = []
    for model in model_names:
        facts = models[model]
        batch_sizes = options.batch_sizes or facts.batch_sizes_for(options.profile)
        for mode in (m for m in options.modes if m in facts.modes):
            for dtype in options.dtypes:
                for batch_size in batch_sizes:
                    for compile_mode in options.compile_modes:
                        if compile_mode != EAGER and mode not in COMPILABLE_MODES:
                            continue
                        for device in options.devices:
                            cases.append(Case(device, dtype, model, batch_size, mode, options.profile, compile_mode))
    return cases


def parse_benchmark_id(benchmark_id: str, model_names: Sequence[str]) -> Case | None:
    """The case a benchmark id names, whatever this session selects (`cuda-bf16-resnet18-bs32-infer-inductor`), or
    None when no value of the axes and `model_names` spells it."""
    for device in DEVICES:
        for dtype in DTYPES:
            prefix = f"{device}-{dtype}-"
            if not benchmark_id.startswith(prefix):
                continue
            for model in sorted(model_names, key=len, reverse=True):
                start = f"{prefix}{model}-bs"
                if not benchmark_id.startswith(start):
                    continue
                size, _, rest = benchmark_id[len(start):].partition("-")
                if not size.isdigit() or int(size) < 1:
                    continue
                for mode in ALL_MODES:
                    for compile_mode in COMPILE_MODES:
                        for profile in PROFILES:
                            case = Case(device, dtype, model, int(size), mode, profile, compile_mode)
                            if case.benchmark_id == benchmark_id:
                                return case
    return None


def runs_dataloader(options: MatrixOptions) -> bool:
    """Whether the DataLoader cases run: with no model chosen, or when `dataloader` is among the models."""
    return options.models is None or DATALOADER_MODEL in options.models


def skip_reason(case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
    """Why `case` of `model` cannot run on this machine, or None when it can: the device is unavailable, the compile
    mode cannot run the step, or a rule of the device itself (`facts.device_rules`)."""
    if case.device in facts.unavailable_reasons:
        return f"{case.device} unavailable: {facts.unavailable_reasons[case.device]}"
    if case.compile != EAGER:
        reason = compile_skip_reason(case, model, facts)
        if reason:
            return reason
    rule = facts.device_rules.get(case.device)
    return None if rule is None else rule(case, model, facts)


def compile_skip_reason(case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
    """Why `case`'s compiled or graph-replayed step cannot run here, whatever the device, or None."""
    if facts.compile_unsupported_reason:
        return f"torch.compile is unavailable here: {facts.compile_unsupported_reason}"
    if model.host_loop:
        return (
            f"{case.model} runs a host-side loop (scheduler steps, three models in turn); only its parts are "
            "compiled or captured, so the whole pipeline is measured eager"
        )
    if case.compile in CUDA_GRAPH_COMPILE_MODES and case.device not in facts.cuda_graph_devices:
        return f"{case.compile} replays CUDA graphs, which exist only on CUDA"
    if case.compile == "cuda-graph" and base_mode(case.mode) == "train" and case.dtype == "fp16":
        return (
            "GradScaler checks its scaled gradients for inf/NaN on the host every step (a host sync), which a "
            "CUDA graph cannot capture"
        )
    return None


def sweep_key(case: Case) -> tuple[str, str, str, str, str, str]:
    """The cases that differ only in batch size share a sweep: a batch size that ran out of memory
    ends the sweep for the larger ones."""
    return case.device, case.dtype, case.model, case.mode, case.profile, case.compile


def sweep_skip_reason(case: Case, out_of_memory_batch_sizes: Mapping[tuple, int]) -> str | None:
    """Why `case` is not tried: a smaller batch size of its sweep already ran out of memory."""
    failed = out_of_memory_batch_sizes.get(sweep_key(case))
    if failed is not None and case.batch_size >= failed:
        return f"batch size {case.batch_size} not tried: batch size {failed} ran out of memory on {case.device}"
    return None


def parse_version(text: str) -> tuple[int, int]:
    """Major and minor of a version string such as '2.13.0+cpu' or '14.5'."""
    numbers = [int(p) for p in text.split("+")[0].split(".")[:2] if p.isdigit()]
    return (numbers + [0, 0])[0], (numbers + [0, 0])[1]


def version_text(version: tuple[int, ...]) -> str:
    """(2, 13) -> '2.13'."""
    return ".".join(str(part) for part in version)


# Compile modes that replay CUDA graphs.
CUDA_GRAPH_COMPILE_MODES = ("reduce-overhead", "cuda-graph")
