"""cpu, cuda and mps behind one small interface: availability, synchronisation, events, memory, fingerprint.

Every function takes the device as its name ("cpu", "cuda", "mps"), so callers never branch on devices.
"""

from __future__ import annotations

import gc
import os
import platform
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from perfsuite.matrix.cases import DeviceFacts, parse_version

DEVICES = ("cpu", "cuda", "mps")


@dataclass(frozen=True)
class Availability:
    """Whether a device can run cases here, and if not, why, in words a user can act on."""

    available: bool
    reason: str = ""


def availability(device: str) -> Availability:
    """Whether `device` is usable by this process."""
    if device == "cpu":
        return Availability(True)
    if device == "cuda":
        if torch.version.cuda is None:
            return Availability(False, f"torch {torch.__version__} was built without CUDA")
        if not torch.cuda.is_available():
            return Availability(False, "torch has CUDA but sees no GPU (driver missing or CUDA_VISIBLE_DEVICES empty)")
        return Availability(True)
    if device == "mps":
        if not torch.backends.mps.is_built():
            return Availability(
                False, f"torch {torch.__version__} was built without MPS (only macOS builds for Apple silicon have it)"
            )
        if not torch.backends.mps.is_available():
            return Availability(
                False, "torch has MPS but the device is unusable: it needs macOS >= 12.3 on Apple silicon "
                "and a native arm64 Python (not Rosetta); run `perfsuite doctor --device mps`"
            )
        return Availability(True)
    raise ValueError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")


def device_count(device: str) -> int:
    """How many devices of this kind this process can use: the visible CUDA GPUs (CUDA_VISIBLE_DEVICES
    applies), else one."""
    if device == "cuda":
        return torch.cuda.device_count() if availability("cuda").available else 0
    return 1


def device_facts() -> DeviceFacts:
    """This machine's facts for the skip decisions of the case matrix."""
    unavailable = {d: a.reason for d in DEVICES if not (a := availability(d)).available}
    macos = parse_version(platform.mac_ver()[0]) if sys.platform == "darwin" else None
    return DeviceFacts(unavailable, parse_version(torch.__version__), macos)


def available_accelerators() -> list[str]:
    """The accelerators usable here, in the order cuda, mps."""
    return [d for d in ("cuda", "mps") if availability(d).available]


def synchronize(device: str) -> None:
    """Wait until all work queued on `device` is finished (a no-op on the CPU, which runs eagerly)."""
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def has_events(device: str) -> bool:
    """Whether `device` has timing events (torch.cuda.Event, torch.mps.event.Event)."""
    return device in ("cuda", "mps")


def time_with_events_s(step: Callable[[], object], device: str, repeats: int) -> list[float]:
    """Device time of `step` per call, in seconds, measured by an event pair around each call."""
    event_class = torch.cuda.Event if device == "cuda" else torch.mps.event.Event
    times_s = []
    for _ in range(repeats):
        start, end = event_class(enable_timing=True), event_class(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times_s.append(start.elapsed_time(end) / 1000.0)
    return times_s


def memory_figure_name(device: str) -> str:
    """The name of the one memory figure reported for `device`; MPS has no peak API, so its figure is
    the driver's allocation after the timed rounds, not a peak."""
    return {
        "cuda": "cuda_max_allocated_bytes",
        "mps": "mps_driver_allocated_bytes",
        "cpu": "cpu_peak_rss_bytes",
    }[device]


def reset_memory_peak(device: str) -> None:
    """Start a new peak-memory window where the device has one (CUDA; Linux RSS high-water mark)."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    elif device == "cpu":
        _reset_linux_rss_peak()


def memory_figures_bytes(device: str) -> dict[str, int]:
    """Every memory figure `device` offers, in bytes, named for what it is."""
    if device == "cuda":
        return {
            "cuda_max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "cuda_max_reserved_bytes": torch.cuda.max_memory_reserved(),
        }
    if device == "mps":
        return {
            "mps_current_allocated_bytes": torch.mps.current_allocated_memory(),
            "mps_driver_allocated_bytes": torch.mps.driver_allocated_memory(),
        }
    return {"cpu_peak_rss_bytes": _peak_rss_bytes()}


def free_cached_memory(device: str) -> None:
    """Drop Python garbage and the device allocator's cached blocks, so one case does not pay for another."""
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    elif device == "mps":
        torch.mps.empty_cache()


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is a device running out of memory: CUDA's torch.OutOfMemoryError, or the
    RuntimeError MPS raises ("MPS backend out of memory ...")."""
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def _reset_linux_rss_peak() -> None:
    # Writing 5 to clear_refs resets VmHWM (Linux >= 4.0); elsewhere the peak covers the process's life.
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_rss_bytes() -> int:
    status = Path("/proc/self/status")
    if status.exists():
        match = re.search(r"^VmHWM:\s+(\d+) kB", status.read_text(), re.MULTILINE)
        if match:
            return int(match.group(1)) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def machine_fingerprint() -> dict[str, object]:
    """Facts that identify the machine a result came from: OS, CPU, accelerator, memory, torch and CUDA."""
    fingerprint: dict[str, object] = {
        "os": platform.system(),
        "os_version": platform.mac_ver()[0] if sys.platform == "darwin" else platform.release(),
        "machine_arch": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cuda_driver_version": None,
        "accelerator_name": None,
    }
    if availability("cuda").available:
        fingerprint["accelerator_name"] = torch.cuda.get_device_name()
        fingerprint["accelerator_count"] = torch.cuda.device_count()
        fingerprint["cuda_driver_version"] = _nvidia_driver_version()
        # "fp32" convolutions run in TF32 on Ampere and later unless this is False (torch's default: True).
        fingerprint["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
        fingerprint["cuda_matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    elif availability("mps").available:
        fingerprint["accelerator_name"] = _sysctl("machdep.cpu.brand_string")  # e.g. "Apple M2 Max"
    return fingerprint


def _cpu_model() -> str:
    if sys.platform == "darwin":
        return _sysctl("machdep.cpu.brand_string") or platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    if sys.platform == "darwin":
        value = _sysctl("hw.memsize")
        return int(value) if value else None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _sysctl(name: str) -> str | None:
    try:
        return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _nvidia_driver_version() -> str | None:
    try:
        output = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return output.splitlines()[0].strip() if output.strip() else None
