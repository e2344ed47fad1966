"""What the three backends share: the defaults a backend overrides where its device differs."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from perfsuite.matrix.cases import DeviceFacts, ModelFacts
from perfsuite.records import Case, Conditions

if TYPE_CHECKING:
    import torch


class TorchDevice:
    """A device torch reaches by its name: autocast, GradScaler and ranks by that name; no events, no profiler, no
    peak to reset, no rules of its own. Subclasses set `name` and override what their device does differently."""

    name = ""
    is_accelerator = True
    replays_cuda_graphs = False
    profiles_kernels = False
    falls_back_to_cpu = False
    op_profile_limit = ""
    checks_channels_last_gradients = False
    ddp_backend: str | None = None
    ddp_unsupported = ""
    ignores_pin_memory = ""
    one_device_per_rank = False

    def count(self) -> int:
        return 1 if self.availability().available else 0

    def availability(self) -> Any:
        raise NotImplementedError

    def event_times_s(self, step: Callable[[], object], repeats: int) -> list[float] | None:
        return None

    def assumed_facts(self) -> str | None:
        return None

    def kernel_time_s(self, step: Callable[[], object]) -> float | None:
        return None

    def reset_memory_peak(self) -> None:
        return None

    def free_cached_memory(self) -> None:
        gc.collect()

    def is_out_of_memory(self, error: BaseException) -> bool:
        # CUDA raises torch.OutOfMemoryError ("CUDA out of memory ..."), MPS a RuntimeError ("MPS backend out of
        # memory ..."): both RuntimeErrors that say so.
        return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()

    def accelerator_facts(self) -> dict[str, object]:
        return {}

    def conditions(self) -> Conditions:
        from perfsuite.run.devices.host import host_conditions

        return host_conditions()

    def machine_name(self, fingerprint: Mapping[str, Any]) -> str:
        return str(fingerprint.get("accelerator_name") or "")

    def skip_reason(self, case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
        if case.mode == "train-ddp":
            visible = facts.device_counts.get(self.name, 0)
            return self.ddp_unusable(facts.ddp_processes or self.ddp_default_processes(visible), visible)
        return None

    def ddp_default_processes(self, visible: int) -> int:
        # Ranks share the device: two, to measure DDP's own cost.
        return 2

    def ddp_unusable(self, processes: int, visible: int) -> str | None:
        return None if self.ddp_backend is not None else self.ddp_unsupported

    def autocast(self, dtype: torch.dtype, cache_enabled: bool) -> contextlib.AbstractContextManager:
        import torch

        return torch.autocast(device_type=self.name, dtype=dtype, cache_enabled=cache_enabled)

    def grad_scaler(self) -> torch.amp.GradScaler:
        import torch

        return torch.amp.GradScaler(self.name)

    def rank_device(self, rank: int) -> torch.device:
        import torch

        return torch.device(self.name)

    def use_rank_device(self, rank: int) -> None:
        return None
