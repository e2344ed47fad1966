"""How each torch release behaves on MPS, in the respects the MPS double models: the one table it follows.

Every row was read from the macOS arm64 wheel of the releases it names (torch-<version>-cp311-*-macosx_*_arm64.whl
from PyPI, unzipped and read, not installed): Python files by path and line, and torch/lib/libtorch_cpu.dylib by
its strings and, where a string does not settle it, by disassembling the function named. The releases read are
`mps_support.CHECKED_TORCH_RELEASES`, 2.1.2 to 2.15.0 (2.14.0, 2.14.1 and 2.15.0 the latest); a row's range
between two of them is inferred from its ends. The double refuses to pretend to be a release newer than the newest
one read (`UnknownRelease`), unless a test names the release whose behaviour it borrows (`behaves_as`). Facts that
perfsuite itself acts on (the macOS MPS needs, the first releases with fp16/bf16 autocast and a working GradScaler,
the BatchNorm2d defect, the MPS peak figure, how MPS events are stamped) are declared once in
`perfsuite.matrix.mps_support` and only referred to here.

Each fact: what the releases do, then where it was read.

- `torch.autocast("mps", ...)`. 2.1-2.4 raise RuntimeError `AUTOCAST_UNSUPPORTED_DEVICE`; 2.5 casts to float16
  only; from 2.6 to bfloat16 and float16. Source: torch/amp/autocast_mode.py, `autocast.__init__`: 2.1.2-2.3.1 list
  their devices without "mps"; 2.4.1 asks `is_autocast_available`, and its libc10.dylib has no AutocastMPS
  dispatch key (2.5.1's has); 2.5.1 lines 325-333 (`supported_dtype = [torch.float16]`); 2.6.0 lines 325-341.
- dtype None on mps is float16. Source: libtorch_cpu.dylib, the initial values of the thread-local
  `at::autocast::autocast_dtype`: entry 13 (DeviceType::MPS) is 5 (kHalf) in 2.5.1, 2.8.0, 2.12.0, 2.13.0 and
  2.15.0.
- Another dtype (float32) warns and disables autocast: 2.5 `AUTOCAST_UNSUPPORTED_DTYPE_2_5`, 2.6-2.9
  `AUTOCAST_UNSUPPORTED_DTYPE_2_6`, from 2.10 `AUTOCAST_UNSUPPORTED_DTYPE_2_10`; up to 2.9 the check runs with
  enabled=False too, from 2.10 only when enabled. Source: autocast_mode.py 2.5.1 lines 325-333, 2.9.0 lines
  343-351, 2.10.0 lines 278-302, 2.13.0 to 2.15.0 lines 281-305 (2.15.0's file differs from 2.13.0's in one
  message for custom backends, line 256).
- bf16 below macOS 14: 2.6-2.9 warn `AUTOCAST_BF16_BELOW_MACOS_14` and disable autocast; in 2.10-2.12 the same
  check sits inside the unsupported-dtype branch, which bfloat16 never enters (dead code); 2.13 has none. From 2.9
  MPS needs macOS 14 anyway. Source: autocast_mode.py 2.6.0 lines 334-341, 2.9.0 lines 352-359, 2.10.0 lines
  303-314.
- PYTORCH_ENABLE_MPS_FALLBACK is read once, as libtorch_cpu loads (`TORCH_LIBRARY_IMPL(_, MPS, m)` in
  MPSFallback.mm keeps it in a function-local static). 2.1-2.7: `getenv`, and `std::stoi(value) == 0` means off,
  so "1abc" is on, "0x1" is off, and "abc" or "" throw std::invalid_argument while torch loads. From 2.8:
  `c10::utils::get_env`, off when unset or exactly "0", on for any other text ("abc", "", "00"). Source: the
  disassembly of `at::TORCH_LIBRARY_IMPL_init___MPS_2` (`_1` in 2.13.0): calls to `_getenv` and
  `std::__1::stoi` in 2.1.2-2.7.1; `c10::utils::get_env` and a compare with the one character '0' in 2.8.0-2.15.0
  (`cmp w8, #48` in 2.14.1 and 2.15.0).
- PYTORCH_MPS_LOG_PROFILE_INFO is read once, when torch builds its MPS profiler: `strtol(value, nullptr, 0)`
  (base 0: "0x4" is 4, "010" is 8, "abc" is 0, "4abc" is 4), kept as uint32; 1024 (LOG_COUNT) or more raises
  `PROFILER_BAD_LOG_OPTIONS`; bit 2 (CPU_FALLBACK_INFO) logs each fallback call. Source: the disassembly of
  `at::mps::Profiler::MPSProfiler::MPSProfiler()` in every release: `_strtol` with base 0, `cmp w8, #0x400`, the
  strings "invalid log options " and " passed to ".
- The fallback warning `FALLBACK_WARNING` comes once per process (TORCH_WARN_ONCE, one call site for every op),
  at every call while `torch.set_warn_always(True)` holds; it names the op's OperatorName, overload included
  (`aten::linalg_svd.U`; `aten::convolution` for a default overload). Source: `make_boxed_function<&mps_fallback>`
  in 2.1.2, 2.5.1, 2.8.0, 2.13.0 and 2.15.0 calls `c10::WarningUtils::get_warnAlways`, then
  `_str_wrapper<const char*, const c10::OperatorName&, ...>`.
- The profiler line `PROFILER_FALLBACK_LINE` names the op without its overload. Source: the format string
  "CPU Fallback::{} (id={}, run={}, CopyOverhead={}{})" in every release, filled from
  `beginProfileCPUFallback(op.schema().name(), ...)`.
- An op without an MPS kernel, with the fallback off, raises NotImplementedError: up to 2.5
  `NOT_IMPLEMENTED_BEFORE_2_6` (issue 77764), from 2.6 `NOT_IMPLEMENTED_FROM_2_6` (issue 141287 and the commit
  hash). Source: the strings of `make_boxed_function<&mps_error_fallback>` in 2.5.1 and 2.13.0; "issues/77764" is
  in 2.1.2-2.5.1, "issues/141287" in 2.6.0-2.15.0.
- GradScaler on MPS: in 2.3-2.7 `scaler.step()` (through `unscale_`) raises TypeError `FLOAT64_ON_MPS`; from 2.8
  it works (`mps_support.MIN_TORCH_FOR_MPS_GRAD_SCALER`); `torch.amp.GradScaler` exists from 2.3. Source:
  torch/amp/grad_scaler.py, cited in mps_support.
- BatchNorm2d's backward on channels_last input, before the fix in
  `mps_support.MIN_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_FIX` (2.14): wrong input and weight gradients (the MPS graph
  reads the NCHW-contiguous copy of the input as NHWC) and a right bias gradient, or the RuntimeError
  `VIEW_NOT_COMPATIBLE` on macOS 26. Source: the releases' common_modules.py (cited in mps_support); the mechanism
  and the macOS split are the upstream fix's own account (pytorch/pytorch#181411: "silently corrupted ... macOS 14"
  and "crashed (macOS 26 ...)"; #188371 quotes the error).
- A peak-memory figure: none in 2.1-2.8 (no torch.accelerator memory API); in 2.9-2.12 that API raises
  RuntimeError `NOT_A_DEVICE_ALLOCATOR` on MPS; a peak from 2.13 (`mps_support.MIN_TORCH_FOR_MPS_PEAK_MEMORY`).
  Source: cited in mps_support.
- The Python API perfsuite reads (`ADDED_IN`): `torch.mps.device_count` from 2.4, `torch.mps.recommended_max_memory`
  from 2.5, `torch.backends.mps.is_macos_or_newer` from 2.3, the torch.accelerator memory functions from 2.9, and
  `torch.mps` streams (`Stream`, `stream`, `current_stream`, `set_stream`, `default_stream`) from 2.15. Source:
  torch/mps/__init__.py, torch/backends/mps/__init__.py and torch/accelerator/__init__.py of 2.1.2-2.9.0;
  torch/mps/streams.py and torch/mps/__init__.py line 241 of 2.15.0 (2.14.1 has neither).
- `torch.mps.event.Event.record()` and `.wait()` raise NotImplementedError `NON_DEFAULT_STREAM` when the current
  stream is not the default one, from 2.15 (torch/mps/event.py, lines 25-26 and 31-32 of 2.15.0).
- MPS events (`mps_support.mps_gpu_event_times`, which cites the disassembly): up to 2.14 a host callback stamps a
  reached event, `Event.synchronize()` on an event the GPU has not reached consumes the completion flag that
  `elapsed_time()` waits for, and equal or reversed stamps raise `UNORDERED_EVENTS`; from 2.15 the GPU stamps it
  (GPUEndTime), `synchronize()` consumes nothing, and only a reversed pair raises.
- The macOS MPS needs (`mps_support.min_macos_for_mps`: 15.0 from 2.15), and what torch says when an MPS tensor is
  asked for where MPS is unavailable (`unavailable_message`): "The MPS backend is supported on MacOS 12.3+."
  (`MPS_ERROR_RUNTIME_TOO_LOW`, spelled and numbered as `mps_support` cites) then "Current OS version can be
  queried using `sw_vers`"; 2.15 says `NO_METAL_GPU` instead on macOS 15 or later (EmptyTensor.cpp,
  `mps_unavailable_error`).
- PYTORCH_MPS_METAL_VERSION (from 2.15, read once at the first MPS work here): a value other than 3.1, 3.2 or 4.0
  warns `METAL_VERSION_IGNORED` (MPSDevice.mm:138; `mps_support` cites the disassembly).

What only a Mac can tell, and the double therefore does not claim: which macOS releases between 14 and 26 give
wrong BatchNorm2d gradients and which raise; where exactly torch first builds its MPS profiler and reads
PYTORCH_MPS_METAL_VERSION (the double reads both at its first MPS work); the GPU's own times, which the double's
stamps stand in for with host times; and anything Metal computes.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfsuite.matrix.mps_support import (
    METAL_VERSIONS,
    MIN_TORCH_FOR_GET_ENV_FALLBACK_SWITCH,
    MIN_TORCH_FOR_MPS_BF16_AUTOCAST,
    MIN_TORCH_FOR_MPS_FP16_AUTOCAST,
    MIN_TORCH_FOR_MPS_GRAD_SCALER,
    MIN_TORCH_FOR_MPS_METAL_VERSION_VARIABLE,
    MIN_TORCH_FOR_MPS_NO_METAL_GPU_MESSAGE,
    MIN_TORCH_FOR_MPS_PEAK_MEMORY,
    MIN_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_FIX,
    NEWEST_TORCH_CHECKED,
    OLDEST_TORCH_CHECKED,
    Release,
    dotted,
    is_at_least,
    is_checked,
    min_macos_for_mps,
    mps_gpu_event_times,
)

AUTOCAST_UNSUPPORTED_DEVICE = "User specified an unsupported autocast device_type 'mps'"
_DISABLING = "In MPS autocast, but the target dtype is not supported. Disabling autocast.\n"
AUTOCAST_UNSUPPORTED_DTYPE_2_5 = _DISABLING + "MPS Autocast only supports dtype of torch.bfloat16 currently."
AUTOCAST_UNSUPPORTED_DTYPE_2_6 = (
    _DISABLING + "MPS Autocast only supports dtype of torch.bfloat16 and torch.float16 currently."
)
AUTOCAST_UNSUPPORTED_DTYPE_2_10 = (
    _DISABLING + "MPS Autocast only supports dtypes of torch.bfloat16, torch.float16 currently."
)
AUTOCAST_BF16_BELOW_MACOS_14 = (
    "In MPS autocast, but the target dtype torch.bfloat16 is not supported on macOS versions below 14. "
    "Disabling autocast."
)
FALLBACK_WARNING = (
    "The operator '{op}' is not currently supported on the MPS backend and will fall back to run on the CPU. "
    "This may have performance implications."
)
PROFILER_FALLBACK_LINE = "CPU Fallback::{op}:{tensors} (id={id}, run={run}, CopyOverhead={overhead})"
PROFILER_BAD_LOG_OPTIONS = "invalid log options {value} passed to PYTORCH_MPS_LOG_PROFILE_INFO"
_TEMPORARY_FIX = (
    "As a temporary fix, you can set the environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a "
    "fallback for this op. WARNING: this will be slower than running natively on MPS."
)
NOT_IMPLEMENTED_BEFORE_2_6 = (
    "The operator '{op}' is not currently implemented for the MPS device. If you want this op to be added in "
    "priority during the prototype phase of this feature, please comment on "
    "https://github.com/pytorch/pytorch/issues/77764. " + _TEMPORARY_FIX
)
NOT_IMPLEMENTED_FROM_2_6 = (
    "The operator '{op}' is not currently implemented for the MPS device. If you want this op to be considered for "
    "addition please comment on https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that resulted "
    "in missing op as well as commit hash {commit}. " + _TEMPORARY_FIX
)
FLOAT64_ON_MPS = (
    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
    "Please use float32 instead."
)
VIEW_NOT_COMPATIBLE = (
    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
    "contiguous subspaces). Use .reshape(...) instead."
)
NOT_A_DEVICE_ALLOCATOR = "Allocator for mps is not a DeviceAllocator."
NON_DEFAULT_STREAM = "Non-default streams are not yet supported."
UNORDERED_EVENTS = "End event {end} was not recorded after start event {start}"
MPS_ERROR_RUNTIME_TOO_LOW = (
    "The MPS backend is supported on {spelling} {macos}+. Current OS version can be queried using `sw_vers`"
)
NO_METAL_GPU = (
    "MPS backend is unavailable: no supported Metal GPU was found. This can happen when running inside a virtual "
    "machine, sandbox or container without GPU access"
)
METAL_VERSION_IGNORED = "Ignoring PYTORCH_MPS_METAL_VERSION={value}, expected 3.1, 3.2 or 4.0"
# What libc++ says when std::stoi throws during libtorch_cpu's static initialisation, which ends the process.
STOI_ABORT = "libc++abi: terminating due to uncaught exception of type std::{kind}: stoi: {what}"

# MPSProfiler.h LogOptions: CPU_FALLBACK_INFO = 1 << 2; the constructor rejects values from LOG_COUNT (1 << 10) up.
CPU_FALLBACK_INFO = 1 << 2
LOG_OPTIONS_LIMIT = 1 << 10
# The first release whose MPS fallback switch is read with c10::utils::get_env instead of std::stoi.
FIRST_GET_ENV_FALLBACK_SWITCH: Release = MIN_TORCH_FOR_GET_ENV_FALLBACK_SWITCH
FIRST_NOT_IMPLEMENTED_141287: Release = (2, 6)
FIRST_AUTOCAST_CHECK_ONLY_WHEN_ENABLED: Release = (2, 10)
FIRST_TORCH_AMP_GRAD_SCALER: Release = (2, 3)
FIRST_MPS_STREAMS: Release = (2, 15)
# The first release that spells the macOS "macOS" rather than "MacOS" in MPS_ERROR_RUNTIME_TOO_LOW.
FIRST_MACOS_SPELLING: Release = (2, 12)
STREAMS_API = ("Stream", "stream", "current_stream", "set_stream", "default_stream")
# (module, attribute) -> the first release that has it, for the attributes perfsuite reads.
ADDED_IN: dict[tuple[str, str], Release] = {
    ("torch.mps", "device_count"): (2, 4),
    ("torch.mps", "recommended_max_memory"): (2, 5),
    ("torch.backends.mps", "is_macos_or_newer"): (2, 3),
    ("torch.amp", "GradScaler"): FIRST_TORCH_AMP_GRAD_SCALER,
    **{("torch.mps", name): FIRST_MPS_STREAMS for name in STREAMS_API},
    **{
        ("torch.accelerator", name): (2, 9)
        for name in (
            "empty_cache", "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
            "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
        )
    },
}


class UnknownRelease(ValueError):
    """The double has no facts for this torch release."""


@dataclass(frozen=True)
class AutocastRule:
    """What `torch.autocast("mps", dtype)` does under one release: whether the device is accepted, the dtypes it
    casts to, the warning for another dtype, whether that check runs with enabled=False too, and whether bfloat16
    is disabled below macOS 14."""

    device_accepted: bool
    dtypes: tuple[str, ...] = ()
    unsupported_dtype_warning: str = ""
    checked_when_disabled: bool = False
    bf16_needs_macos_14: bool = False


@dataclass(frozen=True)
class ReleaseBehaviour:
    """How torch `release` behaves on MPS in every respect the double models (see the table above)."""

    release: Release
    autocast: AutocastRule
    not_implemented_message: str
    grad_scaler_fails_on_float64: bool
    peak_memory: str  # "absent", "not a device allocator" or "peak"
    batchnorm_channels_last_backward_wrong: bool
    gpu_event_times: bool  # GPU stamps that Event.synchronize() does not consume (2.15), else host-callback stamps

    def has(self, module: str, attribute: str) -> bool:
        """Whether `module.attribute` exists in this release (for the attributes in ADDED_IN; others always)."""
        added = ADDED_IN.get((module, attribute))
        return added is None or is_at_least(self.release, added)


def autocast_rule(release: Release) -> AutocastRule:
    """The autocast row of the table for `release`."""
    if not is_at_least(release, MIN_TORCH_FOR_MPS_FP16_AUTOCAST):
        return AutocastRule(device_accepted=False)
    if not is_at_least(release, MIN_TORCH_FOR_MPS_BF16_AUTOCAST):
        return AutocastRule(True, ("float16",), AUTOCAST_UNSUPPORTED_DTYPE_2_5, checked_when_disabled=True)
    if not is_at_least(release, FIRST_AUTOCAST_CHECK_ONLY_WHEN_ENABLED):
        return AutocastRule(
            True, ("bfloat16", "float16"), AUTOCAST_UNSUPPORTED_DTYPE_2_6, checked_when_disabled=True,
            bf16_needs_macos_14=True,
        )
    return AutocastRule(True, ("bfloat16", "float16"), AUTOCAST_UNSUPPORTED_DTYPE_2_10)


def behaviour_of(release: Release) -> ReleaseBehaviour:
    """Every row of the table for `release`; UnknownRelease before the oldest release read and after the newest one:
    the double does not pretend to know what a release nobody read does."""
    if not is_at_least(release, OLDEST_TORCH_CHECKED):
        raise UnknownRelease(
            f"the MPS double has no facts for torch {dotted(release)}: its table starts at "
            f"{dotted(OLDEST_TORCH_CHECKED)} (read the {dotted(release)} macOS wheel and extend "
            "tests/mps_double/releases.py)"
        )
    if not is_checked(release):
        raise UnknownRelease(
            f"the MPS double has no facts for torch {dotted(release)}: the newest release read is "
            f"{dotted(NEWEST_TORCH_CHECKED)}. Read the {dotted(release)} macOS wheel (python -m "
            f"perfsuite.coverage.wheelcheck --torch {dotted(release)}) and extend perfsuite/matrix/mps_support.py and "
            "tests/mps_double/releases.py, or name the release whose behaviour to borrow with behaves_as="
        )
    if is_at_least(release, MIN_TORCH_FOR_MPS_PEAK_MEMORY):
        peak_memory = "peak"
    elif is_at_least(release, ADDED_IN[("torch.accelerator", "memory_stats")]):
        peak_memory = "not a device allocator"
    else:
        peak_memory = "absent"
    return ReleaseBehaviour(
        release=release,
        autocast=autocast_rule(release),
        not_implemented_message=(
            NOT_IMPLEMENTED_FROM_2_6 if is_at_least(release, FIRST_NOT_IMPLEMENTED_141287)
            else NOT_IMPLEMENTED_BEFORE_2_6
        ),
        grad_scaler_fails_on_float64=not is_at_least(release, MIN_TORCH_FOR_MPS_GRAD_SCALER),
        peak_memory=peak_memory,
        batchnorm_channels_last_backward_wrong=not is_at_least(release, MIN_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_FIX),
        gpu_event_times=mps_gpu_event_times(release),
    )


def unavailable_message(release: Release, macos: Release) -> str:
    """What torch `release` raises when an MPS tensor is asked for where MPS is unavailable on macOS `macos`."""
    needed = min_macos_for_mps(release)
    if is_at_least(release, MIN_TORCH_FOR_MPS_NO_METAL_GPU_MESSAGE) and is_at_least(macos, needed):
        return NO_METAL_GPU
    spelling = "macOS" if is_at_least(release, FIRST_MACOS_SPELLING) else "MacOS"
    return MPS_ERROR_RUNTIME_TOO_LOW.format(spelling=spelling, macos=dotted(needed))


def metal_version_warning(value: str | None, release: Release) -> str | None:
    """The warning torch `release` gives for PYTORCH_MPS_METAL_VERSION=`value` (None: unset), or None."""
    if value is None or not is_at_least(release, MIN_TORCH_FOR_MPS_METAL_VERSION_VARIABLE) or value in METAL_VERSIONS:
        return None
    return METAL_VERSION_IGNORED.format(value=value)


def fallback_enabled(value: str | None, release: Release) -> bool:
    """Whether MPSFallback.mm turns the CPU fallback on for PYTORCH_ENABLE_MPS_FALLBACK=`value` (None: unset).

    Raises TorchWouldAbort where torch's std::stoi throws while libtorch_cpu loads (2.1-2.7)."""
    if value is None:
        return False
    if is_at_least(release, FIRST_GET_ENV_FALLBACK_SWITCH):
        return value != "0"
    return stoi(value) != 0


class TorchWouldAbort(Exception):
    """torch would end the process here (an uncaught C++ exception while libtorch_cpu loads)."""


def stoi(text: str) -> int:
    """std::stoi(text) as libc++ parses it: leading whitespace, an optional sign, base-10 digits up to the first
    other character; TorchWouldAbort where it throws (no digits, or outside a 32-bit int)."""
    position = len(text) - len(text.lstrip(" \t\n\v\f\r"))
    sign = 1
    if position < len(text) and text[position] in "+-":
        sign = -1 if text[position] == "-" else 1
        position += 1
    digits = ""
    while position < len(text) and text[position] in "0123456789":
        digits += text[position]
        position += 1
    if not digits:
        raise TorchWouldAbort(STOI_ABORT.format(kind="invalid_argument", what="no conversion"))
    value = sign * int(digits)
    if not -(2**31) <= value < 2**31:
        raise TorchWouldAbort(STOI_ABORT.format(kind="out_of_range", what="out of range"))
    return value


def strtol_base_0(text: str) -> int:
    """strtol(text, nullptr, 0): leading whitespace, an optional sign, then hexadecimal after "0x", octal after a
    leading "0", decimal otherwise, up to the first other character; 0 when no digit is read; clamped to a 64-bit
    long."""
    body = text.lstrip(" \t\n\v\f\r")
    sign = 1
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body[:2].lower() == "0x" and body[2:3] and body[2:3].lower() in "0123456789abcdef":
        base, body, alphabet = 16, body[2:], "0123456789abcdef"
    elif body[:1] == "0":
        base, alphabet = 8, "01234567"
    else:
        base, alphabet = 10, "0123456789"
    digits = ""
    for character in body:
        if character.lower() not in alphabet:
            break
        digits += character
    value = sign * int(digits, base) if digits else 0
    return max(-(2**63), min(2**63 - 1, value))


def profiler_log_options(value: str | None) -> int:
    """MPSProfiler's log options for PYTORCH_MPS_LOG_PROFILE_INFO=`value` (None: unset): strtol, kept as uint32;
    RuntimeError from 1024 up, as the profiler's constructor raises."""
    options = strtol_base_0(value) & 0xFFFFFFFF if value is not None else 0
    if options >= LOG_OPTIONS_LIMIT:
        raise RuntimeError(PROFILER_BAD_LOG_OPTIONS.format(value=options))
    return options
