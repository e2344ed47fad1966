"""What each torch release needs of a Mac to run on MPS, and the MPS defects a case must steer around.

Declared once here and read by the case matrix (skip reasons), the device layer (why MPS is unavailable, which
memory figure MPS has, how MPS events are timed), the coverage runtime check, the doctor (findings on recorded facts)
and the session header. Pure data and pure functions, with no torch import, so the doctor can use them where torch
does not import.

Releases are tuples of ints, (major, minor) or longer; they compare as releases (2.13 is later than 2.9).

Every figure below was read from the macOS arm64 wheels of torch on PyPI (`CHECKED_TORCH_RELEASES`: 2.1.2 to
2.15.0), each unzipped and read, not installed; line numbers are those of the wheel's files. A release newer than
the newest one read (`NEWEST_TORCH_CHECKED`) is never silently taken for it: `unchecked_note` says which facts are
assumed and from which release, and every message built on such a fact carries that note.
- The macOS that MPS needs: the message `MPS_ERROR_RUNTIME_TOO_LOW` compiled into torch/lib/libtorch_cpu.dylib:
  "The MPS backend is supported on MacOS 12.3+." in 2.1.2 to 2.5.1, "13.0+" in 2.6.0 to 2.8.0, "14.0+" in 2.9.0
  to 2.11.0 ("macOS 14.0+" in 2.12.0 to 2.14.1), "macOS 15.0+" in 2.15.0, whose include/ATen/mps/MPSDevice.h
  starts its `MacOSVersion` enum at `MACOS_15_0` (line 25; 2.14.1's at `MACOS_14_4`). The wheel tags say less:
  macosx_11_0 up to 2.11 (Python installs, MPS is unavailable), macosx_14_0 from 2.12, 2.15.0 included: 2.15.0
  installs on macOS 14, where its MPS is unavailable. `python -m perfsuite.coverage.wheelcheck` checks a release's
  entry against its wheel.
- Why MPS is unavailable, as torch says it when an MPS tensor is asked for: up to 2.14.1 the message above alone;
  2.15.0's aten/src/ATen/mps/EmptyTensor.cpp (`mps_unavailable_error`, lines 23 and 27 of the strings its
  TORCH_CHECKs cite) says "MPS backend is unavailable: no supported Metal GPU was found. This can happen when
  running inside a virtual machine, sandbox or container without GPU access" on macOS 15 or later, and the macOS
  message below it.
- Autocast on MPS (torch/amp/autocast_mode.py, `autocast.__init__`): 2.1.2 to 2.4.1 raise "User specified an
  unsupported autocast device_type 'mps'" (2.4.1's libc10.dylib has no AutocastMPS dispatch key; 2.5.1's has);
  2.5.1 takes float16 only (its mps branch lists `[torch.float16]`); bfloat16 from 2.6.0 (2.13.0 to 2.15.0 list
  `[torch.bfloat16, torch.float16]`, line 248). bf16 also needs macOS 14: libtorch_cpu.dylib of 2.3.1 to 2.8.0
  holds "MPS bfloat16 type is supported on MacOS 14.0 or newer." and "MPS BFloat16 is only supported on MacOS 14 or
  newer", and autocast 2.6.0 to 2.9.0 disables itself with a warning below macOS 14 (2.2.2 and older say "BFloat16
  is not supported on MPS").
- GradScaler on MPS before 2.8: `GradScaler.unscale_` computes `self._scale.double().reciprocal().float()`
  (torch/amp/grad_scaler.py, line 334 in 2.3.1, 335 in 2.4.1 to 2.6.0, 339 in 2.7.0 and 2.7.1), and float64 on
  MPS raises "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please use
  float32 instead." (a string of every release's libtorch_cpu.dylib; pytorch/pytorch#142397). 2.8.0 skips the
  float64 step when the scale is on mps:0 (lines 339-343; line 353 in 2.13.0 to 2.15.0). torch.amp.GradScaler
  itself exists from 2.3.
- BatchNorm2d backward on channels_last input gives wrong gradients or raises on MPS (pytorch/pytorch#175189; fixed
  upstream by #181411 and #188371). Every release from 2.5.1 to 2.13.0 marks BatchNorm2d's test_memory_format in
  training as an expected failure on MPS (torch/testing/_internal/common_modules.py, pointing at #134580; line 4162
  in 2.13.0); 2.1.2 to 2.4.1 skip BatchNorm2d's module tests on MPS altogether (pointing at #100914). 2.14.0 drops
  that expected failure (its BatchNorm2d ModuleInfo, lines 4217-4233, keeps only the aot_autograd ones; 2.15.0 the
  same at lines 4234-4251): the fix is in 2.14.0, so 2.13 is the last release affected.
- torch.compile's inductor on MPS: 2.6.0 registers no inductor backend for "mps" (create_backend raises
  "Unsupported device type: mps", torch/_inductor/scheduler.py). 2.7.0 registers `MetalScheduling` for "mps"
  (torch/_inductor/codegen/common.py, lines 434-440; Dynamo's `MpsInterface` arrives with it in
  torch/_dynamo/device_interface.py), which warns at its first use "torch.compile for Metal is an
  early protoype and might not work as expected. For details see https://github.com/pytorch/pytorch/issues/150121"
  (torch/_inductor/codegen/mps.py, `_warn_prototype`). 2.8.0 drops that warning and adds a C++ wrapper for MPS
  (codegen/cpp_wrapper_mps.py).
- A peak-memory figure for MPS: torch.accelerator's memory API (torch/accelerator/memory.py: memory_stats,
  max_memory_allocated, reset_peak_memory_stats) arrives in 2.9.0, but in 2.9.0 to 2.12.0 the MPS allocator is a
  plain `c10::Allocator` (torch/include/ATen/mps/MPSAllocatorInterface.h: `class IMPSAllocator : public
  c10::Allocator`), so `c10::getDeviceAllocator` asserts "Allocator for mps is not a DeviceAllocator."
  (torch/include/c10/core/CachingDeviceAllocator.h). 2.13.0 makes it a `c10::DeviceAllocator` and implements
  `MPSAllocator::getDeviceStats` and `resetPeakStats` (symbols of its libtorch_cpu.dylib). torch.mps has no peak in
  any release (torch/mps/__init__.py: current_allocated_memory and driver_allocated_memory only).
- Convolution backward in fp16 can abort the process on MPS ("destination datatype must be fp32",
  pytorch/pytorch#119108): torch's own MPS tests still skip conv1d/2d/3d and conv_transpose1d/2d/3d in fp16
  (`SKIPLIST_GRAD` of torch/testing/_internal/common_mps.py: lines 945-951 in 2.13.0, 933-939 in 2.14.0 and
  2.14.1, 538-544 in 2.15.0).
- MPS events (include/ATen/mps/MPSEvent.h, and libtorch_cpu.dylib's `at::mps::MPSEvent` and `MPSEventPool`
  functions, disassembled). 2.13.0 to 2.14.1 (the header is the same in all three): a timing event is stamped by a
  host callback (`notifyListener:atValue:block:` with `clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW)`, header lines
  62-66), so its times include that callback's latency, `elapsedTime` raises "End event ... was not recorded after
  start event" when the two stamps are equal or reversed (`b.ls` after subtracting them), and
  `MPSEvent::synchronize()` consumes the completion flag (`m_cpu_sync_completed`, line 56) that `elapsedTime` then
  waits for: `elapsed_time()` after `Event.synchronize()` on an event the GPU had not reached blocks forever
  (pytorch/pytorch#162872). In both, `MPSHooks::recordEvent` (what `Event.record()` calls) records with
  `syncEvent = true`, which commits the command buffer. 2.15.0 rewrites the rest: `MPSEvent::recordLocked` adds a
  completed handler to the command buffer that keeps `[commandBuffer GPUEndTime]` under a generation counter
  (header lines 68-75) before that commit; a timing event recorded without a commit trips "Timing-enabled MPS
  events must commit when recorded" (MPSEvent.mm:18). `synchronize()` waits on the shared event's signalled value
  and consumes nothing; `elapsedTime` commits and waits on the stream, waits for both stamps, and raises only when
  the end stamp is earlier (`b.lt`). So 2.15.0's event times are GPU stamps, and an event pair may be read after
  `end.synchronize()`.
- PYTORCH_MPS_METAL_VERSION, new in 2.15.0 (absent from the strings of 2.14.1's libtorch_cpu.dylib): the Metal
  language its shaders are compiled with. `at::mps::metal_language_version()` reads it once with
  `c10::utils::get_env`; exactly "3.1", "3.2" or "4.0" is taken, anything else warns "Ignoring
  PYTORCH_MPS_METAL_VERSION=<value>, expected 3.1, 3.2 or 4.0" (MPSDevice.mm:138) and falls back to the default:
  4.0 from macOS 26.0, 3.2 from macOS 15.0, else 3.1. A version the host cannot provide "fails rather than silently
  falling back" (MPSDevice.h, lines 103-105).
"""

from __future__ import annotations

import re

Release = tuple[int, ...]

# Every torch release whose macOS arm64 wheel was read for the facts here, oldest first.
CHECKED_TORCH_RELEASES: tuple[Release, ...] = (
    (2, 1, 2), (2, 2, 2), (2, 3, 1), (2, 4, 1), (2, 5, 1), (2, 6, 0), (2, 7, 0), (2, 7, 1), (2, 8, 0), (2, 9, 0),
    (2, 10, 0), (2, 11, 0), (2, 12, 0), (2, 13, 0), (2, 14, 0), (2, 14, 1), (2, 15, 0),
)
OLDEST_TORCH_CHECKED: Release = CHECKED_TORCH_RELEASES[0][:2]
NEWEST_TORCH_CHECKED: Release = CHECKED_TORCH_RELEASES[-1]
# What a release newer than NEWEST_TORCH_CHECKED takes from it on trust: the facts that changed most often between
# the releases read.
ASSUMED_WHEN_UNCHECKED = ("the macOS MPS needs", "the ops that fall back to the CPU", "how MPS events are timed")

# (first torch release, the macOS MPS needs from it on), oldest first.
MIN_MACOS_FOR_MPS_BY_TORCH: tuple[tuple[Release, Release], ...] = (
    ((2, 0), (12, 3)),
    ((2, 6), (13, 0)),
    ((2, 9), (14, 0)),
    ((2, 15), (15, 0)),
)
MIN_TORCH_FOR_MPS_FP16_AUTOCAST: Release = (2, 5)
MIN_TORCH_FOR_MPS_BF16_AUTOCAST: Release = (2, 6)
MIN_MACOS_FOR_MPS_BF16: Release = (14, 0)
MIN_TORCH_FOR_MPS_GRAD_SCALER: Release = (2, 8)
# The first release whose inductor has an MPS backend, and the first whose MPS backend no longer warns that it is a
# prototype: perfsuite compiles for MPS from the latter.
MIN_TORCH_FOR_MPS_INDUCTOR_PROTOTYPE: Release = (2, 7)
MIN_TORCH_FOR_MPS_INDUCTOR: Release = (2, 8)
MPS_INDUCTOR_PROTOTYPE_ISSUE = "pytorch/pytorch#150121"
# The first release whose torch.accelerator memory statistics answer for MPS with a peak.
MIN_TORCH_FOR_MPS_PEAK_MEMORY: Release = (2, 13)
# The first release with BatchNorm2d's channels_last backward fixed on MPS (its tests no longer expect a failure).
MIN_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_FIX: Release = (2, 14)
# Still skipped by torch's own tests in the newest release read; a later release keeps the guard until one is read.
LAST_TORCH_WITH_MPS_FP16_CONV_BACKWARD_ABORT: Release = NEWEST_TORCH_CHECKED
# The first release whose MPS events are GPU stamps (GPUEndTime) that Event.synchronize() does not consume.
MIN_TORCH_FOR_MPS_GPU_EVENT_TIMES: Release = (2, 15)
# The first release that says MPS is unavailable for want of a Metal GPU (a virtual machine, sandbox or container).
MIN_TORCH_FOR_MPS_NO_METAL_GPU_MESSAGE: Release = (2, 15)
MIN_TORCH_FOR_MPS_METAL_VERSION_VARIABLE: Release = (2, 15)
# The first release that reads PYTORCH_ENABLE_MPS_FALLBACK with c10::utils::get_env (off only when unset or exactly
# "0") rather than std::stoi (tests/mps_double/releases.py cites the disassembly of each).
MIN_TORCH_FOR_GET_ENV_FALLBACK_SWITCH: Release = (2, 8)
METAL_VERSIONS = ("3.1", "3.2", "4.0")
# (first macOS, the Metal language version 2.15.0 compiles its shaders with from it on when not told), oldest first.
DEFAULT_METAL_VERSION_BY_MACOS: tuple[tuple[Release, str], ...] = (((0,), "3.1"), ((15, 0), "3.2"), ((26, 0), "4.0"))


def is_checked(torch_release: Release) -> bool:
    """Whether the facts here were read for `torch_release` or a later release: False only for a release newer than
    the newest one read, compared to the precision given ((2, 15) is checked, (2, 15, 1) and (2, 16) are not)."""
    width = len(torch_release)
    return _padded(torch_release, width) <= _padded(NEWEST_TORCH_CHECKED, width)[:width]


def unchecked_note(torch_release: Release) -> str | None:
    """'unchecked for torch X: ...' naming what is assumed and from which release, for a release newer than the
    newest one read; None for a checked one."""
    if is_checked(torch_release):
        return None
    return (
        f"unchecked for torch {dotted(torch_release)}: assumed as in torch {dotted(NEWEST_TORCH_CHECKED)}, the newest "
        "release whose macOS wheel was read"
    )


def assumed_facts_note(torch_release: Release | None) -> str | None:
    """One line for a session header, the doctor or a report: which MPS facts are assumed for an unchecked
    `torch_release`, from which release, and how to check them; None for a checked or unknown release."""
    if torch_release is None or is_checked(torch_release):
        return None
    version = dotted(torch_release)
    facts = ", ".join(ASSUMED_WHEN_UNCHECKED[:-1]) + " and " + ASSUMED_WHEN_UNCHECKED[-1]
    return (
        f"MPS facts unchecked for torch {version}: {facts} are assumed as in torch {dotted(NEWEST_TORCH_CHECKED)}, "
        f"the newest release whose macOS wheel was read (macOS >= {dotted(min_macos_for_mps(torch_release))}); check "
        f"this release with `python -m perfsuite.coverage.wheelcheck --torch {version}`"
    )


def min_macos_for_mps(torch_release: Release | None) -> Release:
    """The macOS release MPS needs under `torch_release`; the oldest requirement when the release is unknown or
    older than the table."""
    needed = MIN_MACOS_FOR_MPS_BY_TORCH[0][1]
    if torch_release is None:
        return needed
    for first_torch, macos in MIN_MACOS_FOR_MPS_BY_TORCH:
        if is_at_least(torch_release, first_torch):
            needed = macos
    return needed


def mps_gpu_event_times(torch_release: Release) -> bool:
    """Whether MPS events under `torch_release` are GPU stamps that `Event.synchronize()` leaves readable (2.15): then
    a pair is read after `end.synchronize()`, as on CUDA. False before 2.15 (host-callback stamps, read only after
    `torch.mps.synchronize()`), and for a release newer than the newest one read, which is timed the way that is
    safe under both implementations read."""
    return is_at_least(torch_release, MIN_TORCH_FOR_MPS_GPU_EVENT_TIMES) and is_checked(torch_release)


def fp16_convolution_backward_may_abort(torch_release: Release) -> bool:
    """Whether fp16 convolution backward may abort the process on MPS under `torch_release`: every release read up to
    LAST_TORCH_WITH_MPS_FP16_CONV_BACKWARD_ABORT, and a release newer than the newest one read until one is read."""
    return is_at_most(torch_release, LAST_TORCH_WITH_MPS_FP16_CONV_BACKWARD_ABORT) or not is_checked(torch_release)


def mps_inductor_skip_reason(torch_release: Release) -> str | None:
    """Why torch.compile's inductor cannot be benchmarked on MPS under `torch_release`, or None from the release on
    which torch ships its MPS backend without calling it a prototype."""
    installed = dotted(torch_release)
    if not is_at_least(torch_release, MIN_TORCH_FOR_MPS_INDUCTOR_PROTOTYPE):
        return (
            f"torch.compile's inductor has no MPS backend before torch "
            f"{dotted(MIN_TORCH_FOR_MPS_INDUCTOR_PROTOTYPE)} (installed {installed})"
        )
    if not is_at_least(torch_release, MIN_TORCH_FOR_MPS_INDUCTOR):
        return (
            f"torch {installed}'s inductor backend for MPS is an early prototype that torch warns \"might not work as "
            f"expected\" ({MPS_INDUCTOR_PROTOTYPE_ISSUE}); perfsuite compiles for MPS from torch "
            f"{dotted(MIN_TORCH_FOR_MPS_INDUCTOR)}"
        )
    return None


def mps_unusable_hint(torch_release: Release | None) -> str:
    """What a Mac needs for MPS under `torch_release`, for messages that say why MPS is unusable; for a release newer
    than the newest one read, the requirement carried over says so."""
    needs = f"macOS >= {dotted(min_macos_for_mps(torch_release))} on Apple silicon and a native arm64 Python"
    if torch_release is not None and is_at_least(torch_release, MIN_TORCH_FOR_MPS_NO_METAL_GPU_MESSAGE):
        needs = (
            f"macOS >= {dotted(min_macos_for_mps(torch_release))} on Apple silicon, a native arm64 Python and a Metal "
            "GPU the process can reach (not a virtual machine, sandbox or container without GPU access)"
        )
    note = unchecked_note(torch_release) if torch_release is not None else None
    return f"{needs} ({note})" if note else needs


def newest_torch_for_macos(macos_release: Release) -> Release | None:
    """The newest torch minor release read whose MPS runs on `macos_release`, when a later one needs a newer macOS
    ((2, 14) on macOS 14.5); None when every release read runs there, or none does."""
    for first_torch, macos in MIN_MACOS_FOR_MPS_BY_TORCH:
        if not is_at_least(macos_release, macos):
            older = [release[:2] for release in CHECKED_TORCH_RELEASES if not is_at_least(release, first_torch)]
            return older[-1] if older else None
    return None


def default_metal_version(macos_release: Release) -> str:
    """The Metal language version torch 2.15 compiles its MPS shaders with on `macos_release` when
    PYTORCH_MPS_METAL_VERSION does not say."""
    chosen = DEFAULT_METAL_VERSION_BY_MACOS[0][1]
    for first_macos, version in DEFAULT_METAL_VERSION_BY_MACOS:
        if is_at_least(macos_release, first_macos):
            chosen = version
    return chosen


def is_at_least(release: Release, minimum: Release) -> bool:
    """Whether `release` is `minimum` or later, missing parts counting as 0 (14 is 14.0)."""
    width = max(len(release), len(minimum))
    return _padded(release, width) >= _padded(minimum, width)


def is_at_most(release: Release, last: Release) -> bool:
    """Whether `release` is `last` or earlier, compared to the precision of `last` (2.13.1 is at most 2.13)."""
    width = len(last)
    return _padded(release[:width], width) <= last


def parse_release(version: str) -> Release:
    """The numeric release of a version string: '2.15.0+cpu' -> (2, 15, 0), '2.16.0.dev20260101' -> (2, 16, 0),
    '14.5' -> (14, 5); ValueError naming the text when it starts with no number."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    if match is None:
        raise ValueError(f"cannot read a release from version {version!r}: expected digits such as '2.15.0'")
    return tuple(int(part) for part in match.group(0).split("."))


def dotted(release: Release) -> str:
    """(14, 0) -> '14.0'."""
    return ".".join(str(part) for part in release)


def _padded(release: Release, width: int) -> Release:
    return tuple(release) + (0,) * (width - len(release))
