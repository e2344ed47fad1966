"""cpu, cuda and mps behind one small interface: availability, synchronisation, events, memory, fingerprint.

Every function takes the device as its name ("cpu", "cuda", "mps"), so callers never branch on devices.
"""

from __future__ import annotations

import gc
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from perfsuite.matrix.cases import DeviceFacts, parse_version
from perfsuite.matrix.mps_support import dotted, min_macos_for_mps

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
            macos = dotted(min_macos_for_mps(parse_version(torch.__version__)))
            return Availability(
                False, f"torch {torch.__version__} has MPS but the device is unusable: it needs macOS >= {macos} on "
                "Apple silicon and a native arm64 Python (not Rosetta); run `perfsuite doctor --device mps`"
            )
        return Availability(True)
    raise ValueError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")


def device_count(device: str) -> int:
    """How many devices of this kind this process can use: the visible CUDA GPUs (CUDA_VISIBLE_DEVICES
    applies), else one."""
    if device == "cuda":
        return torch.cuda.device_count() if availability("cuda").available else 0
    return 1


def device_facts(compiling: bool = False) -> DeviceFacts:
    """This machine's facts for the skip decisions of the case matrix; `compiling` (some case is compiled) also
    asks whether torch.compile can run here, which imports torch._dynamo (about 1.5 s)."""
    unavailable = {d: a.reason for d in DEVICES if not (a := availability(d)).available}
    macos = parse_version(platform.mac_ver()[0]) if _on_macos() else None
    return DeviceFacts(
        unavailable, parse_version(torch.__version__), macos,
        compile_unsupported_reason=compile_unsupported_reason() if compiling else None,
        cpp_compiler=cpp_compiler(),
    )


def compile_unsupported_reason() -> str | None:
    """Why torch.compile cannot run in this interpreter (Dynamo's own check), or None."""
    import torch._dynamo

    try:
        torch._dynamo.eval_frame.check_if_dynamo_supported()
    except Exception as error:
        return str(error) or type(error).__name__
    return None


def cpp_compiler() -> str | None:
    """The C++ compiler inductor would use for CPU code: $CXX, else the first of g++, c++, clang++ on PATH."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    return next((found for name in candidates if (found := shutil.which(name))), None)


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
    """Device time of `step` per call, in seconds, measured by an event pair around each call.

    On MPS the pair is read after `torch.mps.synchronize()`, never after `end.synchronize()`: in torch's
    MPSEvent.mm, Event.synchronize() consumes the completion flag that elapsed_time() then waits for, so
    elapsed_time() blocks forever when the step was still running (pytorch/pytorch#162872). MPS stamps an event
    when a host callback sees it complete, so its times include that callback's latency, and a step too short
    to separate the two callbacks raises "End event ... was not recorded after start event": such a pair is
    measured again, up to `repeats` extra times.
    """
    if device == "mps":
        return _time_with_mps_events_s(step, repeats)
    times_s = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times_s.append(start.elapsed_time(end) / 1000.0)
    return times_s


MPS_UNORDERED_EVENTS_MESSAGE = "was not recorded after start event"


def _time_with_mps_events_s(step: Callable[[], object], repeats: int) -> list[float]:
    times_s: list[float] = []
    unordered_pairs = 0
    while len(times_s) < repeats:
        start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.mps.synchronize()
        try:
            times_s.append(start.elapsed_time(end) / 1000.0)
        except RuntimeError as error:
            if MPS_UNORDERED_EVENTS_MESSAGE not in str(error):
                raise
            unordered_pairs += 1
            if unordered_pairs > repeats:
                raise RuntimeError(
                    f"MPS event timing: {unordered_pairs} event pairs came back unordered ({error}); the step is "
                    "too short for MPS events, rely on the rounds' wall-clock times"
                ) from None
    return times_s


MPS_PEAK_FIGURE = "mps_max_allocated_bytes"
MPS_DRIVER_FIGURE = "mps_driver_allocated_bytes"


def memory_figure_name(device: str) -> str:
    """The name of the one memory figure reported for `device`.

    On MPS: the allocator's peak (`torch.accelerator.max_memory_allocated()`) where the installed torch keeps
    MPS peak statistics (torch 2.13.0 does; none of 2.5.1 to 2.12.0 does); otherwise the driver's allocation
    after the timed rounds, which is not a peak.
    """
    if device == "mps":
        return MPS_PEAK_FIGURE if mps_has_peak_memory() else MPS_DRIVER_FIGURE
    return {"cuda": "cuda_max_allocated_bytes", "cpu": "cpu_peak_rss_bytes"}[device]


def mps_has_peak_memory() -> bool:
    """Whether torch's unified accelerator memory statistics answer for MPS with a peak: asked of the installed
    torch, not inferred from its version."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not hasattr(accelerator, "memory_stats"):
        return False
    try:
        torch.empty(1, device="mps")  # the statistics stay empty until the allocator has served a tensor
        return "allocated_bytes.all.peak" in accelerator.memory_stats()
    except (RuntimeError, ValueError):  # an allocator without statistics, or MPS not the current accelerator
        return False


def reset_memory_peak(device: str) -> None:
    """Start a new peak-memory window where the device has one (CUDA; MPS where torch keeps its peak; the Linux
    RSS high-water mark)."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    elif device == "mps" and mps_has_peak_memory():
        torch.accelerator.reset_peak_memory_stats()
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
        figures = {
            "mps_current_allocated_bytes": torch.mps.current_allocated_memory(),
            MPS_DRIVER_FIGURE: torch.mps.driver_allocated_memory(),
        }
        if mps_has_peak_memory():
            figures[MPS_PEAK_FIGURE] = torch.accelerator.max_memory_allocated()
        return figures
    return {"cpu_peak_rss_bytes": _peak_rss_bytes()}


def memory_in_use_bytes(device: str) -> int | None:
    """The memory the process holds on `device` now: tensors allocated on CUDA or MPS, the resident set on the CPU
    (Linux; None elsewhere, where only the peak is known)."""
    if device == "cuda":
        return int(torch.cuda.memory_allocated())
    if device == "mps":
        return int(torch.mps.current_allocated_memory())
    try:
        resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


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
        "os_version": platform.mac_ver()[0] if _on_macos() else platform.release(),
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
    if _on_macos():
        return _sysctl("machdep.cpu.brand_string") or platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    if _on_macos():
        value = _sysctl("hw.memsize")
        return int(value) if value else None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _on_macos() -> bool:
    return platform.system() == "Darwin"


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
