"""A test double of torch's MPS bindings, so perfsuite's MPS code paths run on a machine without a Mac.

It checks plumbing, not Metal: that perfsuite calls the MPS bindings it should, with the arguments they take, in
an order torch's own implementation survives. No kernel runs on a GPU and no figure it returns is a measurement.

What it replaces, and the semantics it models (from torch 2.13.0's torch/mps/, torch/backends/mps/,
torch/accelerator/memory.py and aten/src/ATen/mps/MPSEvent.mm):
- `torch._C._has_mps`, `torch._C._mps_is_available` and `torch.backends.mps.is_available` (whose lru_cache
  would keep an earlier answer): MPS built, and available or not.
- `torch._C._mps_*` events: acquire, record, wait, query, synchronize, elapsed time, release. An event records its
  completion time when a host callback sees the GPU reach it. `Event.synchronize()` on an event the GPU has not
  reached yet consumes the completion flag that `elapsed_time()` waits for: a later `elapsed_time()` on that end
  event would block forever (pytorch/pytorch#162872); here it raises `MpsEventHang` instead. With `gpu_busy`
  (the default) the GPU reaches an event only at a synchronisation, as on a Mac running a real step.
- `torch._C._mps_*` memory: current and driver allocation, recommended maximum, empty cache, memory fraction.
- `torch._C._accelerator_*`: MPS as the current accelerator with peak statistics (torch 2.13's MPSAllocator
  implements them), or, with `peak_memory_stats=False`, an allocator that raises as one without them does.
- Tensors asked for on "mps" are made on the CPU: a TorchFunctionMode rewrites every "mps" device argument, so
  factories, `Tensor.to` and `Module.to` all land on the CPU. `torch.autocast(device_type="mps")` runs CPU
  autocast after checking the dtype is one MPS autocast takes.
- The CPU fallback of ops MPS lacks (aten/src/ATen/mps/MPSFallback.mm): with `falls_back(ops)`, each call of one of
  those aten ops warns "The operator '<op>' is not currently supported on the MPS backend and will fall back to run
  on the CPU" where PYTORCH_ENABLE_MPS_FALLBACK is a non-zero number, and writes MPSProfiler's
  "CPU Fallback::<op>:..." line to stderr where PYTORCH_MPS_LOG_PROFILE_INFO has the CPU_FALLBACK_INFO bit (1 << 2);
  without the fallback variable it raises the NotImplementedError MPS raises. Which ops fall back is the test's
  choice: the double does not know MPS's kernels (the wheel check does).
- macOS facts, as perfsuite's device layer and doctor see them (their `platform` module, `sysctl`, `sw_vers`
  and `xcode-select` answers); other libraries keep seeing the real machine.
"""

from __future__ import annotations

import itertools
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

Patch = Callable[[Any, str, Any], None]


class MpsEventHang(Exception):
    """torch would block forever here: elapsed_time() waits for a completion flag that no callback will set."""


class MpsBindingMisuse(AssertionError):
    """A binding was called with arguments torch's own would reject, or in an order it cannot serve."""


@dataclass(frozen=True)
class MacFacts:
    """The Mac the double pretends to be."""

    macos_version: str = "14.5"
    darwin_release: str = "23.5.0"
    machine: str = "arm64"
    chip: str = "Apple M2 Max"
    apple_silicon: bool = True
    rosetta_translated: bool = False
    xcode_command_line_tools: str | None = "/Library/Developer/CommandLineTools"
    memory_bytes: int = 32 * 2**30

    def command_answers(self) -> dict[tuple[str, ...], str]:
        """What the commands perfsuite runs on a Mac print here."""
        answers = {
            ("sysctl", "-n", "sysctl.proc_translated"): "1" if self.rosetta_translated else "0",
            ("sysctl", "-n", "machdep.cpu.brand_string"): self.chip,
            ("sysctl", "-n", "hw.memsize"): str(self.memory_bytes),
            ("sw_vers", "-productVersion"): self.macos_version,
        }
        if self.apple_silicon:
            answers[("sysctl", "-n", "hw.optional.arm64")] = "1"
        if self.xcode_command_line_tools:
            answers[("xcode-select", "-p")] = self.xcode_command_line_tools
        return answers


@dataclass
class FakeEvent:
    """One MPSEvent: its signal counter, whether the GPU reached it, its completion stamp and CPU-sync flag."""

    event_id: int
    enable_timing: bool
    signal_counter: int = 0
    reached: bool = True
    recorded_at_ns: int = 0
    completion_time_ns: int = 0
    cpu_sync_completed: bool = False


@dataclass
class MpsDouble:
    """The recorder that stands in for torch's MPS bindings; `calls` lists every binding called, in order."""

    built: bool = True
    available: bool = True
    gpu_busy: bool = True
    peak_memory_stats: bool = True
    mac: MacFacts = field(default_factory=MacFacts)
    recommended_max_memory_bytes: int = 22906503168  # what a 32 GB Apple-silicon Mac reports
    calls: list[str] = field(default_factory=list)
    events: dict[int, FakeEvent] = field(default_factory=dict)
    allocated_bytes: int = 0
    peak_allocated_bytes: int = 0
    driver_allocated_bytes: int = 0
    allocator_initialized: bool = False
    mps_tensor_requests: int = 0
    autocast_dtypes: list[torch.dtype] = field(default_factory=list)
    unordered_event_pairs_to_come: int = 0
    _event_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # Memory, as tests and the smoke run set it.

    def allocate(self, size_bytes: int) -> None:
        """Pretend the MPS allocator served `size_bytes` more (the driver keeps them after a free)."""
        self.allocated_bytes += size_bytes
        self.driver_allocated_bytes = max(self.driver_allocated_bytes, self.allocated_bytes)
        self.peak_allocated_bytes = max(self.peak_allocated_bytes, self.allocated_bytes)
        self.allocator_initialized = True

    def free(self, size_bytes: int) -> None:
        """Pretend `size_bytes` went back to the allocator's cache."""
        self.allocated_bytes -= size_bytes

    # torch._C._mps_* bindings

    def is_available(self) -> bool:
        self.calls.append("is_available")
        return self.built and self.available

    def device_synchronize(self) -> None:
        self.calls.append("deviceSynchronize")
        self._reach_every_event()

    def acquire_event(self, enable_timing: bool) -> int:
        self.calls.append("acquireEvent")
        if not isinstance(enable_timing, bool):
            raise MpsBindingMisuse(f"_mps_acquireEvent takes a bool, got {enable_timing!r}")
        event_id = next(self._event_ids)
        self.events[event_id] = FakeEvent(event_id, enable_timing)
        return event_id

    def release_event(self, event_id: int) -> None:
        self.calls.append("releaseEvent")
        self._event(event_id)
        del self.events[event_id]

    def record_event(self, event_id: int) -> None:
        self.calls.append("recordEvent")
        event = self._event(event_id)
        event.signal_counter += 1
        event.reached, event.completion_time_ns, event.cpu_sync_completed = False, 0, False
        event.recorded_at_ns = time.perf_counter_ns()
        if not self.gpu_busy:
            self._reach(event)

    def wait_for_event(self, event_id: int) -> None:
        self.calls.append("waitForEvent")
        self._event(event_id)

    def query_event(self, event_id: int) -> bool:
        self.calls.append("queryEvent")
        event = self._event(event_id)
        return event.signal_counter > 0 and event.reached

    def synchronize_event(self, event_id: int) -> None:
        self.calls.append("synchronizeEvent")
        event = self._event(event_id)
        if event.signal_counter == 0 or event.reached:
            return  # MPSEvent::synchronize schedules nothing on a reached event: the flag stays as it was
        # Both notify blocks (record's and this one's) run, then waitForCpuSync() consumes the flag.
        self._reach(event)
        event.cpu_sync_completed = False

    def elapsed_time_ms(self, start_id: int, end_id: int) -> float:
        self.calls.append("elapsedTimeOfEvents")
        start, end = self._event(start_id), self._event(end_id)
        self._reach_every_event()  # elapsedTime() first commits and waits for the stream
        if not end.cpu_sync_completed:
            raise MpsEventHang(
                f"elapsed_time({start_id}, {end_id}) would block forever: end event {end_id}'s completion flag was "
                "consumed by Event.synchronize() before the GPU reached it (pytorch/pytorch#162872); call "
                "torch.mps.synchronize() instead"
            )
        end.cpu_sync_completed = False
        if not (start.completion_time_ns > 0 and end.completion_time_ns > 0):
            raise RuntimeError("Events were not created with argument 'enable_timing=True'")
        end_time_ns = end.completion_time_ns
        if self.unordered_event_pairs_to_come > 0:
            self.unordered_event_pairs_to_come -= 1
            end_time_ns = start.completion_time_ns
        if end_time_ns <= start.completion_time_ns:
            raise RuntimeError(f"End event {end_id} was not recorded after start event {start_id}")
        return (end_time_ns - start.completion_time_ns) * 1e-6

    def current_allocated_memory(self) -> int:
        self.calls.append("currentAllocatedMemory")
        return self.allocated_bytes

    def driver_allocated_memory(self) -> int:
        self.calls.append("driverAllocatedMemory")
        return self.driver_allocated_bytes

    def recommended_max_memory(self) -> int:
        self.calls.append("recommendedMaxMemory")
        return self.recommended_max_memory_bytes

    def empty_cache(self) -> None:
        self.calls.append("emptyCache")
        self.driver_allocated_bytes = self.allocated_bytes

    def set_memory_fraction(self, fraction: float) -> None:
        self.calls.append("setMemoryFraction")
        if not isinstance(fraction, float) or not 0 <= fraction <= 2:
            raise MpsBindingMisuse(f"_mps_setMemoryFraction takes a float in [0, 2], got {fraction!r}")

    def is_on_macos_or_newer(self, major: int, minor: int) -> bool:
        self.calls.append("is_on_macos_or_newer")
        version = tuple(int(part) for part in self.mac.macos_version.split(".")[:2])
        return version >= (major, minor)

    # torch._C._accelerator_* bindings, for MPS

    def current_accelerator(self) -> torch.device:
        return torch.device("mps")

    def is_allocator_initialized(self) -> bool:
        return self.allocator_initialized

    def device_stats(self, device_index: int) -> dict[str, Any]:
        self.calls.append("getDeviceStats")
        self._check_device_index(device_index)
        if not self.peak_memory_stats:
            raise RuntimeError("MPS allocator does not implement getDeviceStats")
        allocated = {"current": self.allocated_bytes, "peak": self.peak_allocated_bytes}
        return {"allocated_bytes": {"all": allocated}}

    def reset_peak_stats(self, device_index: int) -> None:
        self.calls.append("resetPeakStats")
        self._check_device_index(device_index)
        if not self.peak_memory_stats:
            raise RuntimeError("MPS allocator does not implement resetPeakStats")
        self.peak_allocated_bytes = self.allocated_bytes

    # Installing

    def install(self, patch: Patch) -> None:
        """Replace torch's MPS bindings and the Mac's facts with this double's, through `patch(target, name, value)`
        (monkeypatch.setattr in a test, plain setattr in a pytest process of its own)."""
        bindings = {
            "_has_mps": self.built,
            "_mps_is_available": self.is_available,
            "_mps_deviceSynchronize": self.device_synchronize,
            "_mps_acquireEvent": self.acquire_event,
            "_mps_releaseEvent": self.release_event,
            "_mps_recordEvent": self.record_event,
            "_mps_waitForEvent": self.wait_for_event,
            "_mps_queryEvent": self.query_event,
            "_mps_synchronizeEvent": self.synchronize_event,
            "_mps_elapsedTimeOfEvents": self.elapsed_time_ms,
            "_mps_currentAllocatedMemory": self.current_allocated_memory,
            "_mps_driverAllocatedMemory": self.driver_allocated_memory,
            "_mps_recommendedMaxMemory": self.recommended_max_memory,
            "_mps_emptyCache": self.empty_cache,
            "_mps_setMemoryFraction": self.set_memory_fraction,
            "_mps_is_on_macos_or_newer": self.is_on_macos_or_newer,
            "_accelerator_getAccelerator": self.current_accelerator,
            "_accelerator_getDeviceIndex": lambda: 0,
            "_accelerator_isAllocatorInitialized": self.is_allocator_initialized,
            "_accelerator_getDeviceStats": self.device_stats,
            "_accelerator_resetPeakStats": self.reset_peak_stats,
            "_accelerator_emptyCache": self.empty_cache,
            "_accelerator_synchronizeDevice": lambda device_index: self.device_synchronize(),
        }
        for name, value in bindings.items():
            patch(torch._C, name, value)
        patch(torch.backends.mps, "is_available", self.is_available)
        patch(torch, "autocast", self._autocast)
        self._install_mac(patch)

    def _install_mac(self, patch: Patch) -> None:
        from perfsuite.commands import doctor
        from perfsuite.run import devices

        answers = self.mac.command_answers()
        # Only perfsuite's modules see the Mac: libraries that load macOS frameworks when they believe they
        # are on Darwin (truststore, under huggingface_hub) keep the real platform.
        mac_platform = _MacPlatform(self.mac)
        patch(devices, "platform", mac_platform)
        patch(doctor, "platform", mac_platform)
        patch(devices, "sysctl", lambda name: answers.get(("sysctl", "-n", name)))
        patch(doctor, "_command_output", lambda command, extra_env=None: answers.get(tuple(command)))

    def falls_back(self, ops: Iterator[str] | list[str]) -> Any:
        """A mode within which the named aten ops (`aten::convolution`) behave as MPS's CPU fallback does."""
        return _FallBackLikeMps(set(ops))

    @contextmanager
    def tensors_on_cpu(self) -> Iterator[None]:
        """Within this block, tensors asked for on "mps" are made on the CPU."""
        with _KeepMpsOnCpu(self):
            yield

    def _autocast(self, device_type: str, dtype: torch.dtype | None = None, **options: Any) -> Any:
        if device_type == "mps":
            if dtype not in (torch.float16, torch.bfloat16):
                raise MpsBindingMisuse(f"MPS autocast takes float16 or bfloat16, got {dtype}")
            self.autocast_dtypes.append(dtype)
            device_type = "cpu"
        return torch.amp.autocast_mode.autocast(device_type, dtype=dtype, **options)

    def _event(self, event_id: int) -> FakeEvent:
        if not isinstance(event_id, int) or event_id not in self.events:
            raise RuntimeError(f"Invalid Event ID: {event_id}")
        return self.events[event_id]

    def _reach(self, event: FakeEvent) -> None:
        event.reached = True
        if event.enable_timing:
            event.completion_time_ns = event.recorded_at_ns
            event.cpu_sync_completed = True

    def _reach_every_event(self) -> None:
        for event in self.events.values():
            if event.signal_counter > 0 and not event.reached:
                self._reach(event)

    def _check_device_index(self, device_index: int) -> None:
        if device_index != 0:
            raise MpsBindingMisuse(f"MPS has one device, index 0; asked for {device_index!r}")


class _MacPlatform:
    """The `platform` module as perfsuite's modules see it on the pretend Mac; other names are the real module's."""

    def __init__(self, mac: MacFacts) -> None:
        self.mac = mac

    def system(self) -> str:
        return "Darwin"

    def machine(self) -> str:
        return self.mac.machine

    def mac_ver(self) -> tuple[str, tuple[str, str, str], str]:
        return self.mac.macos_version, ("", "", ""), self.mac.machine

    def release(self) -> str:
        return self.mac.darwin_release

    def __getattr__(self, name: str) -> Any:
        return getattr(platform, name)


class _KeepMpsOnCpu(TorchFunctionMode):
    """Rewrites every "mps" device argument of a torch function to "cpu", counting the requests."""

    def __init__(self, double: MpsDouble) -> None:
        super().__init__()
        self.double = double

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        args, kwargs = tree_map(self._on_cpu, (args, kwargs or {}))
        return func(*args, **kwargs)

    def _on_cpu(self, value: Any) -> Any:
        if isinstance(value, torch.device) and value.type == "mps":
            self.double.mps_tensor_requests += 1
            self.double.allocator_initialized = True
            return torch.device("cpu")
        if isinstance(value, str) and value.split(":")[0] == "mps":
            self.double.mps_tensor_requests += 1
            self.double.allocator_initialized = True
            return "cpu"
        return value


class _FallBackLikeMps(TorchDispatchMode):
    """MPSFallback.mm's behaviour for the chosen ops: warn and log per call with the fallback on, raise without."""

    def __init__(self, ops: set[str]) -> None:
        super().__init__()
        self.ops = ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        name = func._schema.name
        if name in self.ops:
            try:
                enabled = int(os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK", "0")) != 0
            except ValueError:
                enabled = False
            if not enabled:
                raise NotImplementedError(
                    f"The operator '{name}' is not currently implemented for the MPS device. If you want this op to be "
                    "considered for addition please comment on https://github.com/pytorch/pytorch/issues/141287"
                )
            warnings.warn(
                f"The operator '{name}' is not currently supported on the MPS backend and will fall back to run on "
                "the CPU. This may have performance implications.", UserWarning, stacklevel=2,
            )
            if int(os.environ.get("PYTORCH_MPS_LOG_PROFILE_INFO", "0") or 0) & (1 << 2):
                print(f"CPU Fallback::{name}:[tensor] (id=0, run=1, CopyOverhead=0.0 ms)", file=sys.stderr, flush=True)
        return func(*args, **(kwargs or {}))
