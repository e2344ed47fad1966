"""CUDA: GPU events stamped by the GPU, the allocator's peak after a reset, torch.profiler's kernel times, CUDA
graphs, nccl for DDP with one GPU per rank."""

from __future__ import annotations

import gc
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from perfsuite.records import GPU_CLOCKS, Conditions
from perfsuite.run.devices import Availability
from perfsuite.run.devices.base import TorchDevice

if TYPE_CHECKING:
    import torch

PEAK_FIGURE = "cuda_max_allocated_bytes"


class Backend(TorchDevice):
    name = "cuda"
    replays_cuda_graphs = True
    profiles_kernels = True
    ddp_backend = "nccl"
    one_device_per_rank = True

    def availability(self) -> Availability:
        import torch

        if torch.version.cuda is None:
            return Availability(False, f"torch {torch.__version__} was built without CUDA")
        if not torch.cuda.is_available():
            return Availability(False, "torch has CUDA but sees no GPU (driver missing or CUDA_VISIBLE_DEVICES empty)")
        return Availability(True)

    def count(self) -> int:
        import torch

        return torch.cuda.device_count() if self.availability().available else 0

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def event_times_s(self, step: Callable[[], object], repeats: int) -> list[float] | None:
        # The GPU stamps CUDA events, so the figure leaves host overhead out.
        import torch

        times_s = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times_s.append(start.elapsed_time(end) / 1000.0)
        return times_s

    def kernel_time_s(self, step: Callable[[], object]) -> float | None:
        from perfsuite.run.profiling import cuda_kernel_times_s

        return cuda_kernel_times_s(step)["kernel_s"]

    def memory_figure_name(self) -> str:
        return PEAK_FIGURE

    def reset_memory_peak(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats()

    def memory_figures_bytes(self) -> dict[str, int]:
        import torch

        return {
            PEAK_FIGURE: torch.cuda.max_memory_allocated(), "cuda_max_reserved_bytes": torch.cuda.max_memory_reserved(),
        }

    def memory_in_use_bytes(self) -> int | None:
        import torch

        return int(torch.cuda.memory_allocated())

    def free_cached_memory(self) -> None:
        import torch

        gc.collect()
        torch.cuda.empty_cache()

    def accelerator_facts(self) -> dict[str, object]:
        import torch

        return {
            "accelerator_name": torch.cuda.get_device_name(),
            "accelerator_count": torch.cuda.device_count(),
            "cuda_driver_version": _nvidia_driver_version(),
            # "fp32" convolutions run in TF32 on Ampere and later unless this is False (torch's default: True).
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        }

    def conditions(self) -> Conditions:
        """The host's conditions and the current GPU's through NVML (`perfsuite.run.devices.nvml`); where NVML gives
        nothing, `unread` says why (nvidia-ml-py not installed, no driver)."""
        import torch

        from perfsuite.run.devices.nvml import read_gpu

        host = super().conditions()
        gpu = read_gpu(str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid))
        unread = dict(host.unread)
        if gpu.error is not None or gpu.unsupported:
            unread[GPU_CLOCKS] = gpu.error or f"not exposed: {', '.join(gpu.unsupported)}"
        return replace(
            host, gpu_sm_clock_mhz=gpu.sm_clock_mhz, gpu_max_sm_clock_mhz=gpu.max_sm_clock_mhz,
            gpu_temperature_c=gpu.temperature_c, gpu_power_w=gpu.power_w, gpu_power_limit_w=gpu.power_limit_w,
            gpu_clock_events=gpu.clock_events, unread=unread,
        )

    def machine_identity(self, fingerprint: Mapping[str, Any]) -> dict[str, str]:
        # The host CPU and its cores count too: a launch-bound step follows the host.
        keys = ("cpu_model", "cpu_count", "accelerator_name", "accelerator_count", "cuda_driver_version")
        return {key: str(fingerprint[key]) for key in keys if fingerprint.get(key) is not None}

    def ddp_default_processes(self, visible: int) -> int:
        # One rank per GPU; on one GPU DDP in one process measures DDP's own overhead.
        return max(1, visible)

    def ddp_unusable(self, processes: int, visible: int) -> str | None:
        if processes > visible:
            return (
                f"train-ddp with {processes} processes needs {processes} CUDA GPUs, one per process, and "
                f"{visible} are visible; set --perf-ddp-processes to at most {visible}"
            )
        return None

    def rank_device(self, rank: int) -> torch.device:
        import torch

        return torch.device("cuda", rank)

    def use_rank_device(self, rank: int) -> None:
        import torch

        torch.cuda.set_device(rank)


def _nvidia_driver_version() -> str | None:
    try:
        output = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return output.splitlines()[0].strip() if output.strip() else None
