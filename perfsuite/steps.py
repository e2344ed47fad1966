"""One step of a case, composed the same way for every workload.

`infer`: the forward pass under `torch.inference_mode()`. `train`: zero the gradients, forward, loss,
backward, optimizer step. Mixed precision is `torch.autocast(device_type=...)` with bf16 or fp16 (weights
stay fp32); fp16 training scales the loss with `torch.amp.GradScaler(device)`.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from perfsuite.cases import Case
from perfsuite.devices import synchronize
from perfsuite.workloads import Workload
from perfsuite.workloads.random_weights import materialize_random_weights

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class PreparedCase:
    """A case ready to run: `run_step` queues one step, `timed_step` also waits for the device."""

    case: Case
    run_step: Callable[[], torch.Tensor]
    parameter_count: int
    config_digest: str

    def timed_step(self) -> None:
        """One step that returns only when the device has finished it: what each timed round runs."""
        self.run_step()
        synchronize(self.case.device)


def to_device(value: Any, device: str) -> Any:
    """Move a tensor, or the tensors of a dict, to `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def call_module(module: torch.nn.Module, inputs: Any) -> Any:
    """Call `module` with a tensor positionally or a dict as keyword arguments."""
    return module(**inputs) if isinstance(inputs, dict) else module(inputs)


def autocast_context(case: Case) -> contextlib.AbstractContextManager:
    """Mixed precision for bf16/fp16 cases; nothing for fp32."""
    if case.dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=case.device, dtype=TORCH_DTYPES[case.dtype])


def prepare_case(case: Case, workload: Workload) -> PreparedCase:
    """Build the workload's module and inputs on the case's device and compose its step."""
    module = materialize_random_weights(workload.build_module(case.profile), case.device)
    inputs = to_device(workload.make_inputs(case.profile, case.batch_size), case.device)
    digest = config_digest(workload.name, module, inputs)
    parameter_count = sum(p.numel() for p in module.parameters())
    if case.mode == "infer":
        module.eval()

        def run_step() -> torch.Tensor:
            with torch.inference_mode(), autocast_context(case):
                return call_module(module, inputs)

        return PreparedCase(case, run_step, parameter_count, digest)

    if workload.loss is None or workload.make_target is None:
        raise ValueError(f"{workload.name} has no loss, so it cannot run in train mode")
    module.train()
    target = to_device(workload.make_target(case.profile, case.batch_size), case.device)
    optimizer = workload.make_optimizer(list(module.parameters()))
    scaler = torch.amp.GradScaler(case.device) if case.dtype == "fp16" else None
    loss_of = workload.loss

    def train_step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with autocast_context(case):
            loss = loss_of(call_module(module, inputs), target)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss.detach()

    return PreparedCase(case, train_step, parameter_count, digest)


def count_flops(run_step: Callable[[], object]) -> int:
    """Floating-point operations of one step, counted by torch's FlopCounterMode (matmuls, convolutions,
    attention); run once, outside the timed rounds."""
    with FlopCounterMode(display=False) as counter:
        run_step()
    return int(counter.get_total_flops())


def config_digest(name: str, module: torch.nn.Module, inputs: Any) -> str:
    """A short hash of the model's parameter shapes and the input shapes: equal digests, equal configs."""
    shapes = [f"{n}:{tuple(p.shape)}" for n, p in module.named_parameters()]
    tensors = inputs.values() if isinstance(inputs, dict) else [inputs]
    shapes += [f"input:{tuple(t.shape)}:{t.dtype}" for t in tensors if isinstance(t, torch.Tensor)]
    return hashlib.sha256("\n".join([name, *shapes]).encode()).hexdigest()[:12]
