"""Whether a layout variant computes the same step as the plain one, so the suite never times a wrong result.

`train-channels-last` on MPS can give wrong BatchNorm2d gradients (pytorch/pytorch#175189): one training step's
parameter gradients in channels_last are compared with those of the contiguous layout, on the same weights and
inputs. `compare_gradients` is the decision, a pure function of two sets of gradients; `channels_last_gradients_match`
computes both sets on the device the module is on.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

# fp32 gradients of the same step in two layouts differ by summation order only; #175189's are off by 1e7. Beside
# the absolute floor, a fraction of the parameter's largest gradient is allowed: ResNet18's first convolution on
# the CPU differed by 1.45e-5 in entries near zero between the layouts.
GRADIENT_RTOL = 1e-3
GRADIENT_ATOL = 1e-5
GRADIENT_SCALE_TOL = 1e-3


@dataclass(frozen=True)
class GradientComparison:
    """The outcome of comparing one step's gradients: whether every parameter's gradient agrees, and the one
    that disagrees most (by its largest absolute difference beyond the tolerance)."""

    matches: bool
    worst_parameter: str | None
    max_abs_difference: float

    def describe(self, benchmark_id: str) -> str:
        """One line for a skip or failure message."""
        if self.matches:
            return f"{benchmark_id}: channels_last gradients agree with the contiguous layout"
        return (
            f"{benchmark_id}: channels_last gradients differ from the contiguous layout's (parameter "
            f"{self.worst_parameter}: max abs difference {self.max_abs_difference:.3g}); the device computes this "
            "variant wrongly, so it is not timed"
        )


def compare_gradients(
    reference: Mapping[str, torch.Tensor | None],
    candidate: Mapping[str, torch.Tensor | None],
    rtol: float = GRADIENT_RTOL,
    atol: float = GRADIENT_ATOL,
    scale_tol: float = GRADIENT_SCALE_TOL,
) -> GradientComparison:
    """Compare two sets of gradients by parameter name: they match when every name has a gradient in both (or in
    neither) and the gradients are close (|a - b| <= atol + scale_tol * max|a| + rtol * |a|, elementwise, with
    max|a| the parameter's largest reference gradient; NaN never close)."""
    if set(reference) != set(candidate):
        missing = sorted(set(reference) ^ set(candidate))[0]
        return GradientComparison(False, missing, float("inf"))
    worst_name, worst_excess, worst_difference = None, 0.0, 0.0
    for name, expected in reference.items():
        actual = candidate[name]
        if expected is None or actual is None:
            if expected is not actual:
                return GradientComparison(False, name, float("inf"))
            continue
        expected, actual = expected.detach().float().cpu(), actual.detach().float().cpu()
        difference = (actual - expected).abs()
        scale = expected.abs().max() if expected.numel() else torch.tensor(0.0)
        allowed = atol + scale_tol * torch.nan_to_num(scale, nan=0.0) + rtol * expected.abs()
        excess = torch.nan_to_num(difference - allowed, nan=float("inf")).max().item()
        if excess > worst_excess:
            largest = torch.nan_to_num(difference, nan=float("inf")).max().item()
            worst_name, worst_excess, worst_difference = name, excess, largest
    return GradientComparison(worst_name is None, worst_name, worst_difference)


def one_step_gradients(
    module: torch.nn.Module, inputs: Any, target: Any, loss_of: Callable[[Any, Any], torch.Tensor]
) -> dict[str, torch.Tensor | None]:
    """The parameter gradients of one forward, loss and backward of `module` (no optimizer step), by name."""
    module.zero_grad(set_to_none=True)
    output = module(**inputs) if isinstance(inputs, dict) else module(inputs)
    loss_of(output, target).backward()
    return {name: None if p.grad is None else p.grad.detach().clone() for name, p in module.named_parameters()}


def channels_last_gradients_match(
    module: torch.nn.Module,
    inputs: Any,
    target: Any,
    loss_of: Callable[[Any, Any], torch.Tensor],
    rtol: float = GRADIENT_RTOL,
    atol: float = GRADIENT_ATOL,
) -> GradientComparison:
    """Compare one training step's gradients of `module` on `inputs` (a tensor, or a dict of keyword tensors) in the
    contiguous layout with those of a copy whose module and 4-D inputs are channels_last, on the device both are
    on. `module` itself is left as it was (its copies run the step, so BatchNorm running statistics stay)."""
    contiguous = copy.deepcopy(module).train()
    # torch's stubs omit `memory_format`, which Module.to accepts (documented in torch.nn.Module.to).
    channels_last = copy.deepcopy(module).train().to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    reference = one_step_gradients(contiguous, _in_layout(inputs, torch.contiguous_format), target, loss_of)
    candidate = one_step_gradients(channels_last, _in_layout(inputs, torch.channels_last), target, loss_of)
    return compare_gradients(reference, candidate, rtol, atol)


def _in_layout(inputs: Any, memory_format: torch.memory_format) -> Any:
    if isinstance(inputs, dict):
        return {name: _in_layout(value, memory_format) for name, value in inputs.items()}
    if isinstance(inputs, torch.Tensor) and inputs.dim() == 4:
        return inputs.contiguous(memory_format=memory_format)
    return inputs
