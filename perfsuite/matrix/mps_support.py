"""What each torch release needs of a Mac to run on MPS, and the MPS defects a case must steer around.

Declared once here and read by the case matrix (skip reasons), the device layer (why MPS is unavailable) and the
doctor (findings on recorded facts). Pure data and pure functions, with no torch import, so the doctor can use
them where torch does not import.

Releases are tuples of ints, (major, minor) or longer; they compare as releases (2.13 is later than 2.9).

Where the figures come from:
- The macOS that MPS needs: the message `MPS_ERROR_RUNTIME_TOO_LOW` compiled into libtorch_cpu.dylib of each
  macOS arm64 wheel ("The MPS backend is supported on MacOS 12.3+" in 2.5.1, "13.0+" in 2.6.0 and 2.8.0, "14.0+"
  in 2.9.0, 2.10.0, 2.11.0, 2.12.0 and 2.13.0). The wheel tags say less: macosx_11_0 up to 2.11 (Python installs,
  MPS is unavailable), macosx_14_0 from 2.12. `nox -s mps-wheel` checks the installed release's entry.
- fp16 autocast on MPS from torch 2.5 (before: "unsupported autocast device_type 'mps'", pytorch/pytorch#99272);
  bf16 autocast from 2.6 (pytorch/pytorch#139386) and bf16 tensors from macOS 14 (pytorch/pytorch#119641).
- GradScaler on MPS fails before 2.8 casting the scale to float64 (pytorch/pytorch#142397).
- BatchNorm2d backward on channels_last input gives wrong gradients or raises on MPS (pytorch/pytorch#175189;
  fixes #181411, #188371). torch 2.13.0, the newest release checked, still marks BatchNorm2d's channels_last
  training test as an expected failure on MPS (common_modules.py, pointing at #134580), so it is unfixed there;
  no release with the fix could be verified, so every release up to 2.13 counts as affected.
- torch.compile's inductor backend for MPS (MPSInductor) shipped in torch 2.8.0 (its release notes, "MPS:
  `MPSInductor`: `torch.compile` for Apple GPUs", pytorch/pytorch#150121); 2.7 had it as a prototype.
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
MIN_TORCH_FOR_MPS_INDUCTOR: Release = (2, 8)
# The newest torch release whose macOS wheel was read for the facts above.
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
