"""A test double of torch's MPS bindings, so perfsuite's MPS code paths run on a machine without a Mac.

It checks plumbing, not Metal: that perfsuite calls the MPS bindings it should, with the arguments they take, in
an order torch's own implementation survives. No kernel runs on a GPU and no figure it returns is a measurement.

It pretends to be one torch release, `MpsDouble(torch_version=...)` (default: the installed torch), and behaves as
that release's macOS wheel does wherever the table in `releases.py` says how (autocast, the fallback variables and
messages, GradScaler, BatchNorm2d, the peak-memory API, events, streams, the unavailable message, the Python API
perfsuite reads); `torch.__version__` reads as that release. It refuses a release newer than the newest one read
(`releases.UnknownRelease`) unless `behaves_as` names the release read whose behaviour to borrow, which tests of how
perfsuite treats an unchecked torch do. The rest of torch is the installed one. What it models, from torch 2.13.0's
torch/mps/, torch/backends/mps/, torch/accelerator/memory.py and aten/src/ATen/mps/MPSEvent.mm unless `releases.py`
says otherwise:
- `torch._C._has_mps`, `torch._C._mps_is_available` and `torch.backends.mps.is_available` (whose lru_cache
  would keep an earlier answer): MPS built, and available where the Mac runs the release's MPS (Apple silicon, a
  native arm64 Python, the macOS `mps_support.min_macos_for_mps` names), unless `available` says otherwise.
- `torch._C._mps_*` events: acquire, record, wait, query, synchronize, elapsed time, release. Up to 2.14 an event
  records its completion time when a host callback sees the GPU reach it, and `Event.synchronize()` on an event the
  GPU has not reached yet consumes the completion flag that `elapsed_time()` waits for: a later `elapsed_time()` on
  that end event would block forever (pytorch/pytorch#162872); here it raises `MpsEventHang` instead. From 2.15 the
  GPU stamps it and `synchronize()` consumes nothing (the double's stamps are host times standing in for the GPU's).
  With `gpu_busy` (the default) the GPU reaches an event only at a synchronisation, as on a Mac running a real step.
- From 2.15, `torch.mps` streams (`Stream`, `stream`, `current_stream`, `set_stream`, `default_stream`), and
  `torch.mps.event.Event.record()`/`.wait()` raising NotImplementedError on a non-default stream.
- `torch._C._mps_*` memory: current and driver allocation, recommended maximum, empty cache, memory fraction.
- `torch._C._accelerator_*`: MPS as the current accelerator, with the release's peak statistics (a peak from
  2.13, the allocator's RuntimeError in 2.9-2.12, no memory API before 2.9).
- Tensors asked for on "mps" are made on the CPU: a TorchFunctionMode rewrites every "mps" device argument, so
  factories, `Tensor.to` and `Module.to` all land on the CPU, unless MPS is unusable, where the request raises the
  release's RuntimeError (`releases.unavailable_message`). `torch.autocast(device_type="mps")` accepts, warns
  about and disables dtypes as the release does, then runs CPU autocast. PYTORCH_MPS_METAL_VERSION is read at the
  first MPS work and warns as 2.15 does.
- The CPU fallback of ops MPS lacks (MPSFallback.mm): with `falls_back(ops)`, each call of one of those aten ops
  warns (once per process, every call under `torch.set_warn_always(True)`) where PYTORCH_ENABLE_MPS_FALLBACK, read
  once at `install()` as the release reads it at load, turns the fallback on, and writes MPSProfiler's
  "CPU Fallback::<op>:..." line to stderr where PYTORCH_MPS_LOG_PROFILE_INFO, read once at the double's first MPS
  work, has the CPU_FALLBACK_INFO bit; without the fallback it raises the release's NotImplementedError. Which ops
  fall back is the test's choice: the double does not know MPS's kernels (the wheel check does).
- Within `tensors_on_cpu()`, BatchNorm2d's backward on channels_last input as MPS computes it up to the newest
  release checked: wrong input and weight gradients, or, on macOS 26, a RuntimeError (see `releases.py`).
- macOS facts, as perfsuite's device layer and doctor see them (their `platform` module, `sysctl`, `sw_vers`
  and `xcode-select` answers); other libraries keep seeing the real machine.
- The Mac's conditions (`MacFacts.conditions`, `macos.py`): what `pmset -g batt`, `pmset -g` and `pmset -g therm`
  print on its macOS release and the thermal pressure notify key's level through a stand-in for libSystem's notify
  functions, read by perfsuite's own condition reader whenever it asks (a test may change them between readings).
"""

from __future__ import annotations

import itertools
import os
import platform
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.torch_version import TorchVersion
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from mps_double import macos
from mps_double.macos import MacConditions
from mps_double.releases import (
    ADDED_IN,
    AUTOCAST_BF16_BELOW_MACOS_14,
    AUTOCAST_UNSUPPORTED_DEVICE,
    CPU_FALLBACK_INFO,
    FALLBACK_WARNING,
    FLOAT64_ON_MPS,
    NON_DEFAULT_STREAM,
    NOT_A_DEVICE_ALLOCATOR,
    PROFILER_FALLBACK_LINE,
    UNORDERED_EVENTS,
    VIEW_NOT_COMPATIBLE,
    ReleaseBehaviour,
    UnknownRelease,
    behaviour_of,
    fallback_enabled,
    metal_version_warning,
    profiler_log_options,
    unavailable_message,
)
from perfsuite.coverage.facts import facts_for_torch, load_mps_facts, release_of
from perfsuite.matrix.mps_support import Release, is_at_least, is_checked, min_macos_for_mps

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
    conditions: MacConditions = field(default_factory=MacConditions)

    @property
    def macos_release(self) -> Release:
        """'14.5' -> (14, 5)."""
        return tuple(int(part) for part in self.macos_version.split("."))

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
    """The recorder that stands in for torch's MPS bindings; `calls` lists every binding called, in order.

    `torch_version` is the release it pretends to be; `behaves_as`, for a release newer than the newest one read
    only, the release read whose behaviour it borrows; `available` forces MPS's availability (None: as that release
    decides on `mac`)."""

    built: bool = True
    available: bool | None = None
    gpu_busy: bool = True
    mac: MacFacts = field(default_factory=MacFacts)
    torch_version: str = field(default_factory=lambda: str(torch.__version__))
    behaves_as: str | None = None
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
    _fallback_switched_on: bool | None = None
    _fallback_warned: bool = False
    _profiler_options: int | None = None
    _metal_version_read: bool = False
    current_stream_id: int = 0
    _generator: torch.Generator = field(default_factory=torch.Generator)

    def __post_init__(self) -> None:
        behaves_as = self.release
        if self.behaves_as is not None:
            if is_checked(self.release):
                raise UnknownRelease(
                    f"behaves_as is for a release the double has no facts for; torch {self.torch_version} was read"
                )
            behaves_as = release_of(self.behaves_as).release
        self.behaviour: ReleaseBehaviour = behaviour_of(behaves_as)

    @property
    def release(self) -> Release:
        """The torch release the double pretends to be: '2.7.1' -> (2, 7, 1)."""
        return release_of(self.torch_version).release

    @property
    def mps_usable(self) -> bool:
        """Whether MPS is available: forced by `available`, else Apple silicon, a native arm64 Python and the macOS
        the release needs."""
        if self.available is not None:
            return self.available
        mac = self.mac
        return (
            mac.apple_silicon and not mac.rosetta_translated and mac.machine == "arm64"
            and is_at_least(mac.macos_release, min_macos_for_mps(self.behaviour.release))
        )

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
        return self.built and self.mps_usable

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
        self._reach(event)
        if not self.behaviour.gpu_event_times:
            # Both notify blocks (record's and this one's) run, then waitForCpuSync() consumes the flag; from 2.15 it
            # waits on the shared event's value and consumes nothing.
            event.cpu_sync_completed = False

    def elapsed_time_ms(self, start_id: int, end_id: int) -> float:
        self.calls.append("elapsedTimeOfEvents")
        start, end = self._event(start_id), self._event(end_id)
        self._reach_every_event()  # elapsedTime() first commits and waits for the stream
        if self.behaviour.gpu_event_times:
            return self._gpu_elapsed_time_ms(start, end)
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
            raise RuntimeError(UNORDERED_EVENTS.format(end=end_id, start=start_id))
        return (end_time_ns - start.completion_time_ns) * 1e-6

    def _gpu_elapsed_time_ms(self, start: FakeEvent, end: FakeEvent) -> float:
        """MPSEventPool::elapsedTime from 2.15: both events timed and recorded, their GPU stamps (never consumed),
        an error only when the end stamp is earlier; `unordered_event_pairs_to_come` does not apply (GPU stamps of one
        queue come in order)."""
        if not (start.enable_timing and end.enable_timing):
            raise RuntimeError("Events were not created with argument 'enable_timing=True'")
        if start.signal_counter == 0 or end.signal_counter == 0:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        if end.completion_time_ns < start.completion_time_ns:
            raise RuntimeError(UNORDERED_EVENTS.format(end=end.event_id, start=start.event_id))
        return (end.completion_time_ns - start.completion_time_ns) * 1e-6

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

    def default_generator(self) -> torch.Generator:
        """MPS's default random generator, which torch.manual_seed seeds too where MPS is available (a CPU one)."""
        self.calls.append("getDefaultGenerator")
        return self._generator

    def is_on_macos_or_newer(self, major: int, minor: int) -> bool:
        self.calls.append("is_on_macos_or_newer")
        return is_at_least(self.mac.macos_release, (major, minor))

    # torch._C._accelerator_* bindings, for MPS

    def current_accelerator(self) -> torch.device:
        return torch.device("mps")

    def is_allocator_initialized(self) -> bool:
        self._check_device_allocator()
        return self.allocator_initialized

    def device_stats(self, device_index: int) -> dict[str, Any]:
        self.calls.append("getDeviceStats")
        self._check_device_index(device_index)
        self._check_device_allocator()
        allocated = {"current": self.allocated_bytes, "peak": self.peak_allocated_bytes}
        return {"allocated_bytes": {"all": allocated}}

    def reset_peak_stats(self, device_index: int) -> None:
        self.calls.append("resetPeakStats")
        self._check_device_index(device_index)
        self._check_device_allocator()
        self.peak_allocated_bytes = self.allocated_bytes

    def accelerator_empty_cache(self) -> None:
        self._check_device_allocator()
        self.empty_cache()

    # The CPU fallback, as the release reads and reports it

    @property
    def fallback_switched_on(self) -> bool:
        """Whether PYTORCH_ENABLE_MPS_FALLBACK turned the CPU fallback on, as read at `install()`."""
        if self._fallback_switched_on is None:
            raise MpsBindingMisuse("install() the double first: torch reads PYTORCH_ENABLE_MPS_FALLBACK as it loads")
        return self._fallback_switched_on

    def read_metal_version(self) -> None:
        """PYTORCH_MPS_METAL_VERSION as torch 2.15 reads it, once, at the double's first MPS work: a value it does
        not take warns."""
        if self._metal_version_read:
            return
        self._metal_version_read = True
        warning = metal_version_warning(os.environ.get("PYTORCH_MPS_METAL_VERSION"), self.behaviour.release)
        if warning:
            warnings.warn(warning, UserWarning, stacklevel=3)

    def profiler_log_options(self) -> int:
        """PYTORCH_MPS_LOG_PROFILE_INFO as torch's MPS profiler parses it, read at the double's first MPS work and
        kept; a value torch rejects raises its RuntimeError at every MPS work, as a profiler that failed to build
        is tried again."""
        if self._profiler_options is None:
            self._profiler_options = profiler_log_options(os.environ.get("PYTORCH_MPS_LOG_PROFILE_INFO"))
        return self._profiler_options

    def warn_fallback(self, operator_name: str) -> None:
        """MPSFallback.mm's TORCH_WARN_ONCE: the first fallback of the process warns, and every one while
        torch.set_warn_always(True) holds."""
        if torch.is_warn_always_enabled() or not self._fallback_warned:
            warnings.warn(FALLBACK_WARNING.format(op=operator_name), UserWarning, stacklevel=3)
        if not torch.is_warn_always_enabled():
            self._fallback_warned = True

    # Installing

    def install(self, patch: Patch) -> None:
        """Replace torch's MPS bindings and the Mac's facts with this double's, through `patch(target, name, value)`
        (monkeypatch.setattr in a test, plain setattr in a pytest process of its own).

        Reads PYTORCH_ENABLE_MPS_FALLBACK now, as torch does once when it loads; raises TorchWouldAbort where the
        release would end the process on that value."""
        self._fallback_switched_on = fallback_enabled(
            os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK"), self.behaviour.release
        )
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
            "_mps_get_default_generator": self.default_generator,
            "_accelerator_getAccelerator": self.current_accelerator,
            "_accelerator_getDeviceIndex": lambda: 0,
            "_accelerator_isAllocatorInitialized": self.is_allocator_initialized,
            "_accelerator_getDeviceStats": self.device_stats,
            "_accelerator_resetPeakStats": self.reset_peak_stats,
            "_accelerator_emptyCache": self.accelerator_empty_cache,
            "_accelerator_synchronizeDevice": lambda device_index: self.device_synchronize(),
        }
        for name, value in bindings.items():
            patch(torch._C, name, value)
        self._install_release_surface(patch)
        patch(torch.backends.mps, "is_available", self.is_available)
        if self.behaviour.has("torch.backends.mps", "is_macos_or_newer"):
            patch(torch.backends.mps, "is_macos_or_newer", self.is_on_macos_or_newer)
        patch(torch, "autocast", self._autocast)
        if self.behaviour.grad_scaler_fails_on_float64 and self.behaviour.has("torch.amp", "GradScaler"):
            patch(torch.amp, "GradScaler", _GradScalerCastingScaleToFloat64)
        if self.torch_version != str(torch.__version__):
            patch(torch, "__version__", TorchVersion(self.torch_version))
        self._install_mac(patch)

    def _install_release_surface(self, patch: Patch) -> None:
        """Take away the attributes perfsuite reads that the release does not have yet (releases.ADDED_IN), by
        putting a copy of each module without them in its place; give a release the attributes the installed torch
        lacks (2.15's streams), and its event class."""
        for module_name in sorted({module for module, _ in ADDED_IN}):
            absent = {attribute for (module, attribute) in ADDED_IN if module == module_name}
            absent = {attribute for attribute in absent if not self.behaviour.has(module_name, attribute)}
            if absent:
                parent_name, _, child = module_name.rpartition(".")
                parent = _resolve(parent_name)
                patch(parent, child, _module_without(getattr(parent, child), absent))
        if self.behaviour.has("torch.mps", "Stream"):
            for name, value in self._streams_api().items():
                patch(torch.mps, name, value)
            patch(torch.mps.event, "Event", _EventOnTheDefaultStreamOnly)
            patch(torch.mps, "Event", _EventOnTheDefaultStreamOnly)

    def _streams_api(self) -> dict[str, Any]:
        """torch/mps/streams.py of 2.15 over the double's current stream: Stream, stream, current_stream, set_stream,
        default_stream."""
        double = self

        def current_stream() -> _Stream:
            return _Stream(double.current_stream_id)

        def set_stream(stream: _Stream | None) -> None:
            if stream is not None:
                double.calls.append("setStream")
                double.current_stream_id = stream.stream_id

        @contextmanager
        def stream(chosen: _Stream | None) -> Iterator[None]:
            previous = current_stream()
            set_stream(chosen)
            try:
                yield
            finally:
                if chosen is not None:
                    set_stream(previous)

        return {"Stream": _Stream, "stream": stream, "current_stream": current_stream, "set_stream": set_stream,
                "default_stream": lambda: _Stream(0)}

    def _install_mac(self, patch: Patch) -> None:
        from perfsuite.commands import doctor
        from perfsuite.run import devices
        from perfsuite.run.devices import host

        answers = self.mac.command_answers()
        # Only perfsuite's modules see the Mac: libraries that load macOS frameworks when they believe they
        # are on Darwin (truststore, under huggingface_hub) keep the real platform.
        mac_platform = _MacPlatform(self.mac)
        patch(devices, "platform", mac_platform)
        patch(doctor, "platform", mac_platform)
        patch(devices, "sysctl", lambda name: answers.get(("sysctl", "-n", name)))
        patch(doctor, "_command_output", lambda command, extra_env=None: answers.get(tuple(command)))
        # The condition sources read the Mac's conditions as they are when asked (a test may change them mid-run).
        patch(host, "command_output", lambda command: macos.command_answers(
            self.mac.conditions, self.mac.macos_release).get(tuple(command)))
        patch(host, "load_libsystem", lambda: macos.FakeLibSystem(
            lambda: macos.PRESSURE_LEVELS.index(self.mac.conditions.thermal_pressure)))

    def falls_back(self, ops: Iterator[str] | list[str]) -> Any:
        """A mode within which the named aten ops ('aten::convolution', or with an overload, 'aten::add.out')
        behave as MPS's catch-all CPU fallback does (PYTORCH_ENABLE_MPS_FALLBACK decides)."""
        return _FallBackLikeMps(self, dict.fromkeys(ops))

    def registered_fallbacks(self) -> dict[str, str]:
        """The ops the release's MPSFallback.mm registers to the CPU fallback itself (perfsuite's
        `mps_facts.json`, `always_cpu_fallback`), as a dispatch mode sees them ('aten::_linalg_svd', its `traced_as`
        name) -> as MPS names them in its warning ('aten::linalg_svd')."""
        facts = facts_for_torch(load_mps_facts(), ".".join(map(str, self.behaviour.release)))
        return {
            f"aten::{seen}": f"aten::{fact.op}"
            for fact in facts.always_cpu_fallback for seen in (fact.op, *fact.traced_as)
        }

    @contextmanager
    def tensors_on_cpu(self) -> Iterator[None]:
        """Within this block, tensors asked for on "mps" are made on the CPU, the ops the release always sends to
        the CPU warn and log as its MPSFallback.mm does (with or without PYTORCH_ENABLE_MPS_FALLBACK), and the MPS
        kernel defects of the release (BatchNorm2d's channels_last backward) apply."""
        with ExitStack() as stack:
            stack.enter_context(_KeepMpsOnCpu(self))
            stack.enter_context(_FallBackLikeMps(self, self.registered_fallbacks(), registered=True))
            if self.behaviour.batchnorm_channels_last_backward_wrong:
                stack.enter_context(_MpsKernelDefects(self))
            yield

    def _autocast(
        self, device_type: str, dtype: torch.dtype | None = None, enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> Any:
        """torch.autocast as the release's autocast_mode.py treats "mps" (releases.autocast_rule), run as CPU
        autocast."""
        if device_type != "mps":
            return torch.amp.autocast_mode.autocast(
                device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled
            )
        rule = self.behaviour.autocast
        if not rule.device_accepted:
            raise RuntimeError(AUTOCAST_UNSUPPORTED_DEVICE)
        dtype = torch.float16 if dtype is None else dtype
        if enabled or rule.checked_when_disabled:
            if str(dtype).removeprefix("torch.") not in rule.dtypes:
                warnings.warn(rule.unsupported_dtype_warning, UserWarning, stacklevel=2)
                enabled = False
            elif dtype == torch.bfloat16 and rule.bf16_needs_macos_14 and not self.is_on_macos_or_newer(14, 0):
                warnings.warn(AUTOCAST_BF16_BELOW_MACOS_14, UserWarning, stacklevel=2)
                enabled = False
        if enabled:
            self.autocast_dtypes.append(dtype)
        return torch.amp.autocast_mode.autocast("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

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

    def _check_device_allocator(self) -> None:
        if self.behaviour.peak_memory != "peak":
            # c10::getDeviceAllocator's TORCH_INTERNAL_ASSERT (c10/core/CachingDeviceAllocator.h), as torch words it.
            raise RuntimeError(
                "device_allocator INTERNAL ASSERT FAILED at \"c10/core/CachingDeviceAllocator.h\", please report a "
                f"bug to PyTorch. {NOT_A_DEVICE_ALLOCATOR}"
            )


@dataclass(frozen=True)
class _Stream:
    """torch.mps.Stream of 2.15: equal when the stream ids are."""

    stream_id: int = 0

    def synchronize(self) -> None:
        return None


class _EventOnTheDefaultStreamOnly(torch.mps.event.Event):
    """torch.mps.event.Event of 2.15: record() and wait() raise on a non-default stream (event.py, lines 25-26 and
    31-32)."""

    def record(self) -> None:
        if torch.mps.current_stream() != torch.mps.default_stream():
            raise NotImplementedError(NON_DEFAULT_STREAM)
        super().record()

    def wait(self) -> None:
        if torch.mps.current_stream() != torch.mps.default_stream():
            raise NotImplementedError(NON_DEFAULT_STREAM)
        super().wait()


class _GradScalerCastingScaleToFloat64(torch.amp.GradScaler):
    """torch.amp.GradScaler as releases before 2.8 run it on MPS: unscale_ (which step() calls) first takes the
    scale's reciprocal in float64, which an MPS tensor cannot hold."""

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        if self._enabled and self._device == "mps":
            self._check_scale_growth_tracker("unscale_")
            raise TypeError(FLOAT64_ON_MPS)
        super().unscale_(optimizer)


def _resolve(dotted_name: str) -> Any:
    """torch.backends -> the object reached from the torch module by those attributes (patches included)."""
    target: Any = torch
    for part in dotted_name.split(".")[1:]:
        target = getattr(target, part)
    return target


def _module_without(module: Any, absent: set[str]) -> types.ModuleType:
    """A module object with `module`'s attributes but `absent`."""
    copy = types.ModuleType(module.__name__, module.__doc__)
    copy.__dict__.update({name: value for name, value in vars(module).items() if name not in absent})
    return copy


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
    """Rewrites every "mps" device argument of a torch function to "cpu", counting the requests; the first one is
    the double's first MPS work, where torch's MPS profiler reads its variable."""

    def __init__(self, double: MpsDouble) -> None:
        super().__init__()
        self.double = double

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        args, kwargs = tree_map(self._on_cpu, (args, kwargs or {}))
        return func(*args, **kwargs)

    def _on_cpu(self, value: Any) -> Any:
        if isinstance(value, torch.device) and value.type == "mps":
            self._count_request()
            return torch.device("cpu")
        if isinstance(value, str) and value.split(":")[0] == "mps":
            self._count_request()
            return "cpu"
        return value

    def _count_request(self) -> None:
        double = self.double
        if double.built and not double.mps_usable:
            raise RuntimeError(unavailable_message(double.behaviour.release, double.mac.macos_release))
        double.profiler_log_options()
        double.read_metal_version()
        double.mps_tensor_requests += 1
        double.allocator_initialized = True


class _FallBackLikeMps(TorchDispatchMode):
    """MPSFallback.mm's behaviour for the chosen ops (`ops`: as the mode sees them -> as MPS names them, None for the
    same): warn (once) and log per call with the fallback on, raise the release's NotImplementedError without;
    `registered` ops (the release's own `m.impl(..., mps_fallback)`) warn and log whatever the switch says."""

    def __init__(self, double: MpsDouble, ops: Mapping[str, str | None], registered: bool = False) -> None:
        super().__init__()
        self.double = double
        self.ops = ops
        self.registered = registered
        self.runs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        seen = next((name for name in (_operator_name(func), func._schema.name) if name in self.ops), None)
        if seen is not None:
            operator_name = self.ops[seen] or _operator_name(func)
            double = self.double
            log_options = double.profiler_log_options()
            if not (self.registered or double.fallback_switched_on):
                message = double.behaviour.not_implemented_message
                raise NotImplementedError(message.format(op=operator_name, commit=torch.version.git_version))
            double.warn_fallback(operator_name)
            if log_options & CPU_FALLBACK_INFO:
                self.runs += 1
                line = PROFILER_FALLBACK_LINE.format(
                    op=operator_name.split(".")[0], tensors="[tensor]", id=0, run=self.runs, overhead="0 bytes"
                )
                print(line, file=sys.stderr, flush=True)
        return func(*args, **(kwargs or {}))


class _MpsKernelDefects(TorchDispatchMode):
    """MPS kernels that compute something else than the CPU's: BatchNorm2d's backward on a channels_last input,
    whose MPS graph reads the NCHW-contiguous copy of the input as if it were NHWC (wrong input and weight
    gradients, the bias gradient right), or, on macOS 26, raises a view error."""

    def __init__(self, double: MpsDouble) -> None:
        super().__init__()
        self.double = double

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        if func is torch.ops.aten.native_batch_norm_backward.default and _is_channels_last_4d(args[1]):
            if is_at_least(self.double.mac.macos_release, (26,)):
                raise RuntimeError(VIEW_NOT_COMPATIBLE)
            batch, channels, height, width = args[1].shape
            misread = args[1].contiguous().reshape(batch, height, width, channels).permute(0, 3, 1, 2)
            args = (args[0], misread, *args[2:])
        return func(*args, **(kwargs or {}))


def _operator_name(func: torch._ops.OpOverload) -> str:
    """c10::OperatorName as torch prints it: 'aten::add.out', 'aten::convolution' for the default overload."""
    overload = func._schema.overload_name
    return f"{func._schema.name}.{overload}" if overload else func._schema.name


def _is_channels_last_4d(tensor: torch.Tensor) -> bool:
    return (
        tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last) and not tensor.is_contiguous()
    )
