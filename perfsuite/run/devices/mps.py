"""MPS (Apple-silicon GPUs): availability by torch build and macOS, `torch.mps.synchronize()`, MPS events timed as
each torch release allows (GPU stamps from 2.15, host-callback stamps read after a drain before), the allocator's
peak where torch keeps one (else the driver's allocation), and the MPS rules of each torch release
(`perfsuite.matrix.mps_support`: what a release needs of a Mac, the defects to steer around, and which facts are only
assumed for a release newer than the newest one read)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

from perfsuite.matrix import mps_support as mps
from perfsuite.matrix.axes import EAGER, base_mode
from perfsuite.matrix.cases import DeviceFacts, ModelFacts, version_text
from perfsuite.records import Case
from perfsuite.run import devices
from perfsuite.run.devices import Availability, gib
from perfsuite.run.devices.base import TorchDevice

PEAK_FIGURE = "mps_max_allocated_bytes"
DRIVER_FIGURE = "mps_driver_allocated_bytes"
UNORDERED_EVENTS_MESSAGE = "was not recorded after start event"
ONE_DEVICE = (
    "one device: DDP needs several processes with one device each; MPS has one GPU and no nccl/gloo GPU backend"
)


class Backend(TorchDevice):
    name = "mps"
    # MPS computes BatchNorm2d's channels_last backward wrongly on affected torch releases (pytorch/pytorch#175189,
    # #181411), so a channels_last training step is checked against the contiguous layout first.
    checks_channels_last_gradients = True
    ddp_unsupported = ONE_DEVICE
    ignores_pin_memory = "on MPS (it warns and loads into ordinary memory; pytorch/pytorch#86060)"
    falls_back_to_cpu = True
    op_profile_limit = (
        "device time per op is not available on MPS (torch.profiler has no ProfilerActivity.MPS, pytorch #99037): "
        "shown are the ops' host times, the ops that fell back to the CPU and the copy ops"
    )

    def availability(self) -> Availability:
        import torch

        if not torch.backends.mps.is_built():
            return Availability(
                False, f"torch {torch.__version__} was built without MPS (only macOS builds for Apple silicon have it)"
            )
        if not torch.backends.mps.is_available():
            needs = mps.mps_unusable_hint(mps.parse_release(torch.__version__))
            return Availability(
                False, f"torch {torch.__version__} has MPS but the device is unusable: it needs {needs} (not "
                "Rosetta); run `perfsuite doctor --device mps`"
            )
        return Availability(True)

    def synchronize(self) -> None:
        import torch

        torch.mps.synchronize()

    def assumed_facts(self) -> str | None:
        import torch

        return mps.assumed_facts_note(mps.parse_release(torch.__version__))

    def event_times_s(self, step: Callable[[], object], repeats: int) -> list[float] | None:
        """MPS event pairs, each around one call of `step`, `repeats` of them, in the way the installed torch allows
        (`mps_support.mps_gpu_event_times`, whose sources say how each release stamps and waits).

        torch 2.15: the GPU stamps each event with its command buffer's GPUEndTime and Event.synchronize() consumes
        nothing, so a pair is read after `end.synchronize()`, as on CUDA, and leaves host callbacks out.
        Before 2.15, and for a release newer than the newest one read: a pair is read after `torch.mps.synchronize()`,
        never after `end.synchronize()`: in those releases Event.synchronize() consumes the completion flag that
        elapsed_time() then waits for, so elapsed_time() blocks forever when the step was still running
        (pytorch/pytorch#162872). A host callback stamps each event there, so the times include its latency, and a
        step too short to separate the two callbacks raises "End event ... was not recorded after start event":
        such a pair is measured again, up to `repeats` extra times."""
        import torch

        gpu_stamped = mps.mps_gpu_event_times(mps.parse_release(torch.__version__))
        times_s: list[float] = []
        unordered_pairs = 0
        while len(times_s) < repeats:
            start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            if gpu_stamped:
                end.synchronize()
                times_s.append(start.elapsed_time(end) / 1000.0)
                continue
            torch.mps.synchronize()
            try:
                times_s.append(start.elapsed_time(end) / 1000.0)
            except RuntimeError as error:
                if UNORDERED_EVENTS_MESSAGE not in str(error):
                    raise
                unordered_pairs += 1
                if unordered_pairs > repeats:
                    raise RuntimeError(
                        f"MPS event timing: {unordered_pairs} event pairs came back unordered ({error}); the step is "
                        "too short for MPS events, rely on the rounds' wall-clock times"
                    ) from None
        return times_s

    def memory_figure_name(self) -> str:
        """The allocator's peak (`torch.accelerator.max_memory_allocated()`) where the installed torch keeps MPS peak
        statistics, from torch 2.13 (`mps_support.MIN_TORCH_FOR_MPS_PEAK_MEMORY`; 2.9-2.12's torch.accelerator
        memory statistics raise 'Allocator for mps is not a DeviceAllocator.' on MPS, and earlier releases have
        none); otherwise the driver's allocation after the timed rounds, which is not a peak. Asked of the installed
        torch at run time, not inferred from its version."""
        return PEAK_FIGURE if has_peak_memory() else DRIVER_FIGURE

    def reset_memory_peak(self) -> None:
        import torch

        if has_peak_memory():
            torch.accelerator.reset_peak_memory_stats()

    def memory_figures_bytes(self) -> dict[str, int]:
        import torch

        figures = {
            "mps_current_allocated_bytes": torch.mps.current_allocated_memory(),
            DRIVER_FIGURE: torch.mps.driver_allocated_memory(),
        }
        if has_peak_memory():
            figures[PEAK_FIGURE] = torch.accelerator.max_memory_allocated()
        return figures

    def memory_in_use_bytes(self) -> int | None:
        import torch

        return int(torch.mps.current_allocated_memory())

    def free_cached_memory(self) -> None:
        import torch

        gc.collect()
        torch.mps.empty_cache()

    def accelerator_facts(self) -> dict[str, object]:
        return {"accelerator_name": devices.sysctl("machdep.cpu.brand_string")}  # e.g. "Apple M2 Max"

    def machine_identity(self, fingerprint: Mapping[str, Any]) -> dict[str, str]:
        os_version = str(fingerprint.get("os_version") or "")
        facts = {
            "accelerator_name": fingerprint.get("accelerator_name"),
            "memory_gib": gib(fingerprint.get("memory_bytes")),
            "macos_release": ".".join(os_version.split(".")[:2]) or None,
        }
        return {key: str(value) for key, value in facts.items() if value is not None}

    def skip_reason(self, case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
        return skip_reason(case, model, facts) or super().skip_reason(case, model, facts)


def has_peak_memory() -> bool:
    """Whether torch's unified accelerator memory statistics answer for MPS with a peak: asked of the installed
    torch, not inferred from its version."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not hasattr(accelerator, "memory_stats"):
        return False
    try:
        torch.empty(1, device="mps")  # the statistics stay empty until the allocator has served a tensor
        return "allocated_bytes.all.peak" in accelerator.memory_stats()
    except (RuntimeError, ValueError):  # an allocator without statistics, or MPS not the current accelerator
        return False


def skip_reason(case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
    """Why an MPS case cannot run under the installed torch and macOS (`facts`), or None."""
    torch_version = facts.torch_version
    installed = f"installed {version_text(torch_version)}"
    training = base_mode(case.mode) == "train"
    inductor_reason = mps.mps_inductor_skip_reason(torch_version) if case.compile != EAGER else None
    if inductor_reason:
        return inductor_reason
    if case.dtype == "fp16" and not mps.is_at_least(torch_version, mps.MIN_TORCH_FOR_MPS_FP16_AUTOCAST):
        return f"fp16 autocast on MPS needs torch >= {mps.dotted(mps.MIN_TORCH_FOR_MPS_FP16_AUTOCAST)} ({installed})"
    if case.dtype == "bf16":
        if not mps.is_at_least(torch_version, mps.MIN_TORCH_FOR_MPS_BF16_AUTOCAST):
            return (
                f"bf16 autocast on MPS needs torch >= {mps.dotted(mps.MIN_TORCH_FOR_MPS_BF16_AUTOCAST)} ({installed})"
            )
        if facts.macos_version is not None and not mps.is_at_least(facts.macos_version, mps.MIN_MACOS_FOR_MPS_BF16):
            return (
                f"bf16 on MPS needs macOS >= {mps.MIN_MACOS_FOR_MPS_BF16[0]} "
                f"(this is macOS {version_text(facts.macos_version)})"
            )
    if case.dtype == "fp16" and training:
        if not mps.is_at_least(torch_version, mps.MIN_TORCH_FOR_MPS_GRAD_SCALER):
            return (
                f"GradScaler on MPS (fp16 training) needs torch >= {mps.dotted(mps.MIN_TORCH_FOR_MPS_GRAD_SCALER)} "
                f"({installed})"
            )
        if model.trains_convolutions and mps.fp16_convolution_backward_may_abort(torch_version):
            unchecked = mps.unchecked_note(torch_version)
            tested = (
                f"torch {mps.dotted(mps.NEWEST_TORCH_CHECKED)}'s own MPS tests still skip it; {unchecked}" if unchecked
                else f"torch {version_text(torch_version)}'s own MPS tests skip it"
            )
            return (
                f"fp16 convolution backward can abort the process on MPS (pytorch/pytorch#119108; {tested}); "
                f"{case.model} trains convolutions"
            )
    if (
        case.mode == "train-channels-last"
        and model.has_batchnorm
        and not mps.is_at_least(torch_version, mps.MIN_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_FIX)
    ):
        return (
            "BatchNorm2d backward on channels_last input gives wrong gradients or a RuntimeError on MPS "
            f"(pytorch/pytorch#175189, fixed in torch {mps.dotted(mps.MIN_TORCH_WITH_MPS_BATCHNORM_CHANNELS_LAST_FIX)} "
            f"by #181411/#188371; {installed}): timing it would time a wrong result"
        )
    return None
