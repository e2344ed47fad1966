"""One backend per device, behind one small interface: `backend("cpu" | "cuda" | "mps")`.

Each backend (perfsuite.run.devices.cpu, .cuda, .mps) knows its device alone: whether it can run here and why
not, how to wait for it, how to time with its events, its memory figures, how it runs out of memory, what names the
machine behind it, its autocast and GradScaler, its own rules on what it cannot run, and how DDP ranks use it.
Each also reads the machine's conditions that move its speed (`conditions`). Other code asks the backend instead of
testing the device's name. The device list is `perfsuite.matrix.axes.DEVICES`.

Importing this package, or a backend, does not import torch (the store and the reports ask backends for facts and
stay light); a backend imports torch when a method needs it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfsuite.matrix.axes import DEVICES
from perfsuite.matrix.cases import DeviceFacts, ModelFacts, parse_version
from perfsuite.records import Case, Conditions

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEVICES", "Availability", "DeviceBackend", "assumed_facts_notes", "available_accelerators", "backend",
    "device_facts", "is_accelerator", "machine_fingerprint", "with_device_rules",
]


@dataclass(frozen=True)
class Availability:
    """Whether a device can run cases here, and if not, why, in words a user can act on."""

    available: bool
    reason: str = ""


class DeviceBackend(Protocol):
    """What perfsuite asks of a device. Times in seconds, sizes in bytes."""

    name: str
    # Whether it is an accelerator (a copy to it is a transfer; it has its own memory and queue).
    is_accelerator: bool
    # Whether it replays CUDA graphs (reduce-overhead, cuda-graph).
    replays_cuda_graphs: bool
    # Whether torch.profiler times its kernels (`kernel_time_s` answers): the GPU time that host noise does not move.
    profiles_kernels: bool
    # Whether ops that the device lacks fall back to the CPU with a warning per call (MPS): an op profile keeps them.
    falls_back_to_cpu: bool
    # What an op profile of this device cannot give (a sentence), "" where it gives every op's time.
    op_profile_limit: str
    # Whether a channels_last training step is first checked against the contiguous layout here.
    checks_channels_last_gradients: bool
    # The torch.distributed backend of a train-ddp rank here; None where DDP cannot run (and `ddp_unsupported` says
    # why).
    ddp_backend: str | None
    ddp_unsupported: str
    # Whether each train-ddp rank has a device of its own (CUDA), or the ranks share one (the CPU).
    one_device_per_rank: bool
    # Where and why torch ignores DataLoader's pin_memory=True for this device, e.g. "on MPS (it warns ...)"; "" where
    # it pins or there is nothing to pin.
    ignores_pin_memory: str

    def availability(self) -> Availability:
        """Whether this process can use the device, and why not."""

    def count(self) -> int:
        """How many of these devices this process can use (0 when unavailable)."""

    def synchronize(self) -> None:
        """Wait until all work queued on the device is finished."""

    def assumed_facts(self) -> str | None:
        """Which of the device's facts are assumed for the installed torch rather than read from its release, and from
        which release (MPS: a torch newer than the newest release read); None where every fact was read."""

    def event_times_s(self, step: Callable[[], object], repeats: int) -> list[float] | None:
        """The device's own time of `step` per call, timed by its events, `repeats` times; None without events."""

    def kernel_time_s(self, step: Callable[[], object]) -> float | None:
        """The device's busy time (kernels, copies) per step from a profiler; None where it cannot be profiled."""

    def memory_figure_name(self) -> str:
        """The name of the one memory figure reported for a case on this device."""

    def reset_memory_peak(self) -> None:
        """Start a new peak-memory window where the device keeps a peak."""

    def memory_figures_bytes(self) -> dict[str, int]:
        """Every memory figure the device offers, named for what it is."""

    def memory_in_use_bytes(self) -> int | None:
        """The memory the process holds on the device now (None where only a peak is known)."""

    def free_cached_memory(self) -> None:
        """Drop Python garbage and the allocator's cached blocks, so one case does not pay for another."""

    def is_out_of_memory(self, error: BaseException) -> bool:
        """Whether `error` is this device running out of memory."""

    def accelerator_facts(self) -> dict[str, object]:
        """What names the device in a machine's fingerprint (GPU, driver); {} for the CPU alone."""

    def conditions(self) -> Conditions:
        """The machine's conditions now as they bear on this device: the host's (`perfsuite.run.devices.host`: on a
        Mac its power, energy mode, thermal pressure and CPU speed limit, on Linux its CPU frequency scaling) and the
        device's own (CUDA: the GPU's clocks, heat, power and clocks-event reasons through NVML)."""

    def machine_identity(self, fingerprint: Mapping[str, Any]) -> dict[str, str]:
        """The facts of `fingerprint` that say two results of this device came from the same machine."""

    def machine_name(self, fingerprint: Mapping[str, Any]) -> str:
        """The fact of `fingerprint` a baseline file of this device is named after (GPU or CPU model)."""

    def skip_reason(self, case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
        """Why this device cannot run `case` of `model` (its own rules), or None."""

    def autocast(self, dtype: torch.dtype, cache_enabled: bool) -> contextlib.AbstractContextManager:
        """Mixed precision on this device with `dtype`."""

    def grad_scaler(self) -> torch.amp.GradScaler:
        """The loss scaler of fp16 training on this device."""

    def rank_device(self, rank: int) -> torch.device:
        """The torch device a train-ddp rank uses."""

    def use_rank_device(self, rank: int) -> None:
        """Make the rank's device this process's current one (CUDA: a GPU per rank)."""

    def ddp_default_processes(self, visible: int) -> int:
        """The processes of a train-ddp case when none are chosen, with `visible` devices of this kind."""

    def ddp_unusable(self, processes: int, visible: int) -> str | None:
        """Why train-ddp with `processes` ranks cannot run here with `visible` devices, or None."""


@cache
def backend(name: str) -> DeviceBackend:
    """The backend of the device `name`; ValueError naming the valid ones for another name."""
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    module = importlib.import_module(f"perfsuite.run.devices.{name}")
    made: DeviceBackend = module.Backend()
    return made


def is_accelerator(name: str) -> bool:
    """Whether the device `name` is an accelerator, as its backend says; a name perfsuite has no backend for (a file
    from elsewhere may hold one) is taken for an accelerator, since the CPU has its backend."""
    return name not in DEVICES or backend(name).is_accelerator


def assumed_facts_notes(names: Sequence[str]) -> list[str]:
    """The session header's lines for the devices `names` whose facts the installed torch's release does not settle
    (`DeviceBackend.assumed_facts`)."""
    return [f"perfsuite: {note}" for name in names if (note := backend(name).assumed_facts())]


def available_accelerators() -> list[str]:
    """The accelerators usable here, in the order of DEVICES."""
    return [name for name in DEVICES if backend(name).is_accelerator and backend(name).availability().available]


def device_facts(compiling: bool = False, ddp_processes: int | None = None) -> DeviceFacts:
    """This machine's facts for the skip decisions of the case matrix; `compiling` (some case is compiled) also
    asks whether torch.compile can run here, which imports torch._dynamo (about 1.5 s); `ddp_processes` is the
    train-ddp process count chosen (None: each device's default)."""
    import torch

    backends = [backend(name) for name in DEVICES]
    unavailable = {b.name: a.reason for b in backends if not (a := b.availability()).available}
    return with_device_rules(DeviceFacts(
        unavailable, parse_version(torch.__version__), macos_version(),
        compile_unsupported_reason=compile_unsupported_reason() if compiling else None,
        cpp_compiler=cpp_compiler(),
        device_counts={b.name: b.count() for b in backends},
        ddp_processes=ddp_processes,
    ))


def with_device_rules(facts: DeviceFacts) -> DeviceFacts:
    """`facts` with every backend's own rules and traits in it (`device_facts` does this for the facts of this
    machine; tests state other machines' facts and add the rules with this)."""
    backends = [backend(name) for name in DEVICES]
    return replace(
        facts, device_rules={b.name: b.skip_reason for b in backends},
        cuda_graph_devices=frozenset(b.name for b in backends if b.replays_cuda_graphs),
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


def macos_version() -> tuple[int, int] | None:
    """This Mac's macOS release, None elsewhere."""
    return parse_version(platform.mac_ver()[0]) if on_macos() else None


def machine_fingerprint() -> dict[str, object]:
    """Facts that identify the machine a result came from: OS, CPU, memory, torch and CUDA, and the first available
    accelerator's own facts (its name, count, driver)."""
    import torch

    fingerprint: dict[str, object] = {
        "os": platform.system(),
        "os_version": platform.mac_ver()[0] if on_macos() else platform.release(),
        "machine_arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cuda_driver_version": None,
        "accelerator_name": None,
    }
    accelerators = available_accelerators()
    if accelerators:
        fingerprint.update(backend(accelerators[0]).accelerator_facts())
    return fingerprint


def cpu_model() -> str:
    """The CPU's model name (macOS: sysctl's brand string; Linux: /proc/cpuinfo)."""
    if on_macos():
        return sysctl("machdep.cpu.brand_string") or platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or platform.machine()


def memory_bytes() -> int | None:
    """The machine's memory in bytes."""
    if on_macos():
        value = sysctl("hw.memsize")
        return int(value) if value else None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def on_macos() -> bool:
    """Whether this is macOS."""
    return platform.system() == "Darwin"


def sysctl(name: str) -> str | None:
    """A macOS sysctl value as text, None where it cannot be read."""
    try:
        return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def gib(size_bytes: object) -> str | None:
    """A memory size as whole GiB text: the OS reports a few MiB more or less per boot."""
    return str(round(size_bytes / 2**30)) if isinstance(size_bytes, int) else None
