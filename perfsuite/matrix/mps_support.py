"""What each torch release needs of a Mac to run on MPS, and the MPS defects a case must steer around.

Declared once here and read by the case matrix (skip reasons), the device layer (why MPS is unavailable, which
memory figure MPS has), the coverage runtime check and the doctor (findings on recorded facts). Pure data and pure
functions, with no torch import, so the doctor can use them where torch does not import.

Releases are tuples of ints, (major, minor) or longer; they compare as releases (2.13 is later than 2.9).

Every figure below was read from the macOS arm64 wheels of torch on PyPI (2.1.2, 2.2.2, 2.3.1, 2.4.1, 2.5.1, 2.6.0,
2.7.0, 2.7.1, 2.8.0, 2.9.0, 2.10.0, 2.11.0, 2.12.0, 2.13.0), each unzipped and read, not installed:
- The macOS that MPS needs: the message `MPS_ERROR_RUNTIME_TOO_LOW` compiled into torch/lib/libtorch_cpu.dylib:
  "The MPS backend is supported on MacOS 12.3+." in 2.1.2 to 2.5.1, "13.0+" in 2.6.0 to 2.8.0, "14.0+" in 2.9.0
  to 2.11.0 ("macOS 14.0+" in 2.12.0 and 2.13.0). The wheel tags say less: macosx_11_0 up to 2.11 (Python installs,
  MPS is unavailable), macosx_14_0 from 2.12. `nox -s mps-wheel` checks the installed release's entry.
- Autocast on MPS (torch/amp/autocast_mode.py, `autocast.__init__`): 2.1.2 to 2.4.1 raise "User specified an
  unsupported autocast device_type 'mps'" (2.4.1's libc10.dylib has no AutocastMPS dispatch key; 2.5.1's has);
  2.5.1 takes float16 only (its mps branch lists `[torch.float16]`); bfloat16 from 2.6.0. bf16 also needs macOS 14:
  libtorch_cpu.dylib of 2.3.1 to 2.8.0 holds "MPS bfloat16 type is supported on MacOS 14.0 or newer." and "MPS
  BFloat16 is only supported on MacOS 14 or newer", and autocast 2.6.0 to 2.9.0 disables itself with a warning
  below macOS 14 (2.2.2 and older say "BFloat16 is not supported on MPS").
- GradScaler on MPS before 2.8: `GradScaler.unscale_` computes `self._scale.double().reciprocal().float()`
  (torch/amp/grad_scaler.py, line 334 in 2.3.1, 335 in 2.4.1 to 2.6.0, 339 in 2.7.0 and 2.7.1), and float64 on
  MPS raises "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please use
  float32 instead." (a string of every release's libtorch_cpu.dylib; pytorch/pytorch#142397). 2.8.0 skips the
  float64 step when the scale is on mps:0 (lines 339-343). torch.amp.GradScaler itself exists from 2.3.
- BatchNorm2d backward on channels_last input gives wrong gradients or raises on MPS (pytorch/pytorch#175189; fixed
  upstream by #181411 and #188371). Every release from 2.5.1 to 2.13.0 marks BatchNorm2d's test_memory_format in
  training as an expected failure on MPS (torch/testing/_internal/common_modules.py, pointing at #134580); 2.1.2 to
  2.4.1 skip BatchNorm2d's module tests on MPS altogether (pointing at #100914). No release with the fix could be
  read, so every release up to the newest checked counts as affected.
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
  pytorch/pytorch#119108): torch 2.13.0's common_mps.py still lists conv1d/2d/3d fp16 in SKIPLIST_GRAD.
"""

from __future__ import annotations

Release = tuple[int, ...]

# (first torch release, the macOS MPS needs from it on), oldest first.
MIN_MACOS_FOR_MPS_BY_TORCH: tuple[tuple[Release, Release], ...] = (
    ((2, 0), (12, 3)),
    ((2, 6), (13, 0)),
    ((2, 9), (14, 0)),
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
# The oldest and the newest torch release whose macOS wheel was read for the facts above.
OLDEST_TORCH_CHECKED: Release = (2, 1)
NEWEST_TORCH_CHECKED: Release = (2, 13)
LAST_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_BUG: Release = NEWEST_TORCH_CHECKED
LAST_TORCH_WITH_MPS_FP16_CONV_BACKWARD_ABORT: Release = NEWEST_TORCH_CHECKED


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
    """What a Mac needs for MPS under `torch_release`, for messages that say why MPS is unusable."""
    return f"macOS >= {dotted(min_macos_for_mps(torch_release))} on Apple silicon and a native arm64 Python"


def is_at_least(release: Release, minimum: Release) -> bool:
    """Whether `release` is `minimum` or later, missing parts counting as 0 (14 is 14.0)."""
    width = max(len(release), len(minimum))
    return _padded(release, width) >= _padded(minimum, width)


def is_at_most(release: Release, last: Release) -> bool:
    """Whether `release` is `last` or earlier, compared to the precision of `last` (2.13.1 is at most 2.13)."""
    width = len(last)
    return _padded(release[:width], width) <= last


def dotted(release: Release) -> str:
    """(14, 0) -> '14.0'."""
    return ".".join(str(part) for part in release)


def _padded(release: Release, width: int) -> Release:
    return tuple(release) + (0,) * (width - len(release))
