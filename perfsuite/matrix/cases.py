"""The matrix of cases: device x dtype x model x batch size x mode, with ids and skip reasons.

Everything here is pure: the facts about this machine come in as a `DeviceFacts` value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfsuite.errors import UsageError
from perfsuite.matrix.axes import (
    COMPILABLE_MODES,
    DATALOADER_MODEL,
    DEFAULT_COMPILE_MODES,
    DEFAULT_DTYPES,
    EAGER,
    MODES,
    PROFILES,
    base_mode,
)
from perfsuite.records import Case

if TYPE_CHECKING:
    from perfsuite.workloads import Workload


@dataclass(frozen=True)
class DeviceFacts:
    """What decides whether a case can run here."""

    unavailable_reasons: Mapping[str, str]
    torch_version: tuple[int, int]
    macos_version: tuple[int, int] | None = None
    # Why torch.compile cannot run here at all (e.g. this Python is not supported by Dynamo), and the C++
    # compiler inductor would use on the CPU (None: none found).
    compile_unsupported_reason: str | None = None
    cpp_compiler: str | None = "c++"


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


def build_matrix(options: MatrixOptions, workloads: Mapping[str, Workload]) -> list[Case]:
    """Every case the options select, in a stable order (model, mode, dtype, batch size, compile mode, device).
    Without a model choice, a user's own models when any is registered, else the built-in ones. Compile modes
    other than eager apply to the plain modes and the channels_last variants only."""
    if options.profile not in PROFILES:
        raise UsageError(f"--perf-profile: unknown value {options.profile}; valid: {', '.join(PROFILES)}")
    from perfsuite.workloads import default_model_names

    chosen = [m for m in options.models if m != DATALOADER_MODEL] if options.models else None
    model_names = chosen if chosen is not None else default_model_names(workloads)
    cases = []
    for model in model_names:
        workload = workloads[model]
        batch_sizes = options.batch_sizes or workload.batch_sizes_for(options.profile)
        for mode in (m for m in options.modes if m in workload.modes):
            for dtype in options.dtypes:
                for batch_size in batch_sizes:
                    for compile_mode in options.compile_modes:
                        if compile_mode != EAGER and mode not in COMPILABLE_MODES:
                            continue
                        for device in options.devices:
                            cases.append(Case(device, dtype, model, batch_size, mode, options.profile, compile_mode))
    return cases


def runs_dataloader(options: MatrixOptions) -> bool:
    """Whether the DataLoader cases run: with no model chosen, or when `dataloader` is among the models."""
    return options.models is None or DATALOADER_MODEL in options.models


def skip_reason(case: Case, facts: DeviceFacts) -> str | None:
    """Why `case` cannot run on this machine, or None when it can."""
    from perfsuite.matrix import mps_support as mps  # the MPS release facts, declared once for the doctor too

    if case.device in facts.unavailable_reasons:
        return f"{case.device} unavailable: {facts.unavailable_reasons[case.device]}"
    if case.compile != EAGER:
        reason = compile_skip_reason(case, facts)
        if reason:
            return reason
    if case.device != "mps":
        return None
    torch_version = facts.torch_version
    training = base_mode(case.mode) == "train"
    if case.dtype == "fp16" and not mps.is_at_least(torch_version, mps.MIN_TORCH_FOR_MPS_FP16_AUTOCAST):
        return (
            f"fp16 autocast on MPS needs torch >= {mps.dotted(mps.MIN_TORCH_FOR_MPS_FP16_AUTOCAST)} "
            f"(installed {_version(torch_version)})"
        )
    if case.dtype == "bf16":
        if not mps.is_at_least(torch_version, mps.MIN_TORCH_FOR_MPS_BF16_AUTOCAST):
            return (
                f"bf16 autocast on MPS needs torch >= {mps.dotted(mps.MIN_TORCH_FOR_MPS_BF16_AUTOCAST)} "
                f"(installed {_version(torch_version)})"
            )
        if facts.macos_version is not None and not mps.is_at_least(facts.macos_version, mps.MIN_MACOS_FOR_MPS_BF16):
            return (
                f"bf16 on MPS needs macOS >= {mps.MIN_MACOS_FOR_MPS_BF16[0]} "
                f"(this is macOS {_version(facts.macos_version)})"
            )
    if case.dtype == "fp16" and training:
        if not mps.is_at_least(torch_version, mps.MIN_TORCH_FOR_MPS_GRAD_SCALER):
            return (
                f"GradScaler on MPS (fp16 training) needs torch >= {mps.dotted(mps.MIN_TORCH_FOR_MPS_GRAD_SCALER)} "
                f"(installed {_version(torch_version)})"
            )
        if case.model in CONVOLUTIONAL_MODELS and mps.is_at_most(
            torch_version, mps.LAST_TORCH_WITH_MPS_FP16_CONV_BACKWARD_ABORT
        ):
            return (
                f"fp16 convolution backward can abort the process on MPS (pytorch/pytorch#119108; torch "
                f"{_version(torch_version)}'s own MPS tests skip it); {case.model} trains convolutions"
            )
    if (
        case.mode == "train-channels-last"
        and case.model in BATCHNORM_MODELS
        and mps.is_at_most(torch_version, mps.LAST_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_BUG)
    ):
        return (
            "BatchNorm2d backward on channels_last input gives wrong gradients or a RuntimeError on MPS "
            f"(pytorch/pytorch#175189, fixed after torch {mps.dotted(mps.NEWEST_TORCH_CHECKED)} by #181411/#188371; "
            f"installed {_version(torch_version)}): timing it would time a wrong result"
        )
    return None


def compile_skip_reason(case: Case, facts: DeviceFacts) -> str | None:
    """Why `case`'s compiled or graph-replayed step cannot run here, or None."""
    from perfsuite.matrix import mps_support as mps

    if facts.compile_unsupported_reason:
        return f"torch.compile is unavailable here: {facts.compile_unsupported_reason}"
    if case.model in HOST_LOOP_MODELS:
        return (
            f"{case.model} runs a host-side loop (scheduler steps, three models in turn); only its parts are "
            "compiled or captured, so the whole pipeline is measured eager"
        )
    if case.compile in CUDA_GRAPH_COMPILE_MODES and case.device != "cuda":
        return f"{case.compile} replays CUDA graphs, which exist only on CUDA"
    if case.compile == "cuda-graph" and base_mode(case.mode) == "train" and case.dtype == "fp16":
        return (
            "GradScaler checks its scaled gradients for inf/NaN on the host every step (a host sync), which a "
            "CUDA graph cannot capture"
        )
    if case.device == "cpu" and facts.cpp_compiler is None:
        return (
            "torch.compile's inductor backend needs a C++ compiler on the CPU: none found (install g++ or clang, "
            "or set CXX)"
        )
    if case.device == "mps" and not mps.is_at_least(facts.torch_version, mps.MIN_TORCH_FOR_MPS_INDUCTOR):
        return (
            f"torch.compile's inductor backend for MPS arrived in torch {mps.dotted(mps.MIN_TORCH_FOR_MPS_INDUCTOR)} "
            f"(installed {_version(facts.torch_version)})"
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


def _version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# Trainable models whose step runs nn.Conv2d (checked against the modules in tests/unit/test_cases.py).
CONVOLUTIONAL_MODELS = ("resnet18", "sd15-unet")
# Workloads whose step is a pipeline with a host-side loop rather than one module call.
HOST_LOOP_MODELS = ("sd15-text2img",)
# Compile modes that replay CUDA graphs.
CUDA_GRAPH_COMPILE_MODES = ("reduce-overhead", "cuda-graph")
# Models with nn.BatchNorm2d layers (sd15-unet normalises with GroupNorm, which MPS handles in channels_last).
BATCHNORM_MODELS = ("resnet18",)
