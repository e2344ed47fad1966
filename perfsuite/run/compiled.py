"""Compiled and graph-replayed steps: `torch.compile` (inductor, reduce-overhead) and plain CUDA-graph capture.

A case's `compile` mode decides how its step runs:
- `inductor`: the module wrapped by `torch.compile` (default backend and mode);
- `reduce-overhead`: `torch.compile(mode="reduce-overhead")`, which replays the compiled step as CUDA graphs;
- `cuda-graph`: the eager step captured once with `torch.cuda.graph` and replayed (torch's "whole network
  capture" recipe: warm-up on a side stream, Adam-family optimizers made `capturable`, autocast without its cache).

Before any step is timed, `check_against_eager` compares one compiled call with the eager module on the same weights
and inputs: the outputs for inference; the loss and the norm of all parameter gradients for training (forward and
backward, no optimizer step). A compiled step that computes something else raises WrongCompiledResult and is not
timed.
A model with dropout is compared in eval mode, because two training-mode steps draw different dropout masks by
design; BatchNorm models have no dropout and are compared in training mode, the graph that is timed.

`DynamoCounts` reads torch._dynamo's counters, so the time to the first compiled call, the graphs, the graph breaks
(with their reasons) and any compilation during the timed rounds are known.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from perfsuite.records import Case, Fact

# Largest difference allowed between a compiled and an eager result, as a fraction of the eager result's largest
# magnitude (per output tensor; for the loss and the gradient norm, of the value itself). fp32 allows for
# reordered reductions and fused kernels; autocast dtypes for their 8 (bf16) and 11 (fp16) significand bits.
COMPILED_TOLERANCE = {"fp32": 5e-3, "bf16": 5e-2, "fp16": 2e-2}
CUDA_GRAPH_WARMUP_STEPS = 3


class WrongCompiledResult(Exception):
    """The compiled or graph-replayed step computes something else than the eager one: failed, not timed."""


class CaptureImpossible(Exception):
    """The step cannot be captured as a CUDA graph (it synchronises with the host, say)."""


@dataclass(frozen=True)
class DynamoCounts:
    """torch._dynamo's cumulative counters at one moment: frames compiled, graphs made, graph breaks by reason."""

    frames: int
    graphs: int
    graph_breaks: Mapping[str, int]

    @staticmethod
    def now() -> DynamoCounts:
        from torch._dynamo.utils import counters

        return DynamoCounts(
            frames=int(counters["frames"]["ok"]),
            graphs=int(counters["stats"]["unique_graphs"]),
            graph_breaks=dict(counters["graph_break"]),
        )

    def since(self, earlier: DynamoCounts) -> DynamoCounts:
        """What happened between `earlier` and this moment."""
        breaks = {
            reason: count - earlier.graph_breaks.get(reason, 0)
            for reason, count in self.graph_breaks.items()
            if count > earlier.graph_breaks.get(reason, 0)
        }
        return DynamoCounts(self.frames - earlier.frames, self.graphs - earlier.graphs, breaks)


def compile_facts(first_call_s: float, counts: DynamoCounts, largest_difference: float) -> dict[str, Fact]:
    """What a compiled case records beside its times: the first call's seconds (compilation included), the
    frames and graphs compiled, graph breaks and their most frequent reasons, and the check's largest difference."""
    reasons = sorted(counts.graph_breaks.items(), key=lambda item: -item[1])[:3]
    return {
        "compile_first_call_s": round(first_call_s, 3),
        "compile_frames": counts.frames,
        "compile_graphs": counts.graphs,
        "compile_graph_breaks": sum(counts.graph_breaks.values()),
        "compile_graph_break_reasons": "; ".join(f"{reason[:120]} (x{count})" for reason, count in reasons) or None,
        "compile_check_largest_difference": largest_difference,
    }


def compile_module(module: torch.nn.Module, compile_mode: str) -> torch.nn.Module:
    """`module` wrapped by torch.compile for `inductor` or `reduce-overhead`."""
    import torch._dynamo

    torch._dynamo.reset()  # each case compiles afresh: no graphs, guards or dynamic-shape marks from earlier cases
    mode = "reduce-overhead" if compile_mode == "reduce-overhead" else None
    compiled: torch.nn.Module = torch.compile(module, mode=mode)  # type: ignore[assignment]
    return compiled


def mark_step(compile_mode: str, step: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """For reduce-overhead, tell the CUDA-graph trees where each step begins (their outputs of the previous step
    may then be overwritten), as torch.compiler.cudagraph_mark_step_begin's documentation asks of loops."""
    if compile_mode != "reduce-overhead":
        return step

    def marked() -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        return step()

    return marked


def make_capturable(optimizer: torch.optim.Optimizer) -> None:
    """Let an Adam-family optimizer's step run inside a CUDA graph (its step counters then live on the device)."""
    for group in optimizer.param_groups:
        if "capturable" in group:
            group["capturable"] = True


def capture_cuda_graph(step: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """Capture `step` as a CUDA graph after warm-up steps on a side stream; return a step that replays it and
    returns the captured output tensor (refreshed by every replay). Raises CaptureImpossible where the step does
    something a graph cannot hold."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(CUDA_GRAPH_WARMUP_STEPS):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            output = step()
    except RuntimeError as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CaptureImpossible(f"the step cannot be captured as a CUDA graph: {text}") from None

    def replay() -> torch.Tensor:
        graph.replay()
        return output

    return replay


def has_dropout(module: torch.nn.Module) -> bool:
    """Whether a training step of `module` draws random dropout masks."""
    return any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in module.modules())


@contextlib.contextmanager
def training_check_mode(module: torch.nn.Module) -> Iterator[None]:
    """The mode the check of a training step runs `module` in: training mode, or eval where it has dropout; the
    module's own modes are restored afterwards."""
    modes = {m: m.training for m in module.modules()}
    module.train(not has_dropout(module))
    try:
        yield
    finally:
        for submodule, was_training in modes.items():
            submodule.training = was_training


def output_tensors(output: Any) -> list[torch.Tensor]:
    """The tensors of a step's output: a tensor, a mapping (transformers' and diffusers' outputs are
    OrderedDicts) or a sequence of them, in order."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, Mapping):
        return [t for value in output.values() for t in output_tensors(value)]
    if isinstance(output, (list, tuple)):
        return [t for value in output for t in output_tensors(value)]
    return []


def largest_relative_difference(expected: Sequence[torch.Tensor], actual: Sequence[torch.Tensor]) -> float:
    """max over tensors of max|actual - expected| / max|expected|; inf when shapes or counts differ or a value is
    not finite."""
    if len(expected) != len(actual) or not expected:
        return math.inf
    worst = 0.0
    for want, got in zip(expected, actual, strict=True):
        if want.shape != got.shape:
            return math.inf
        want64, got64 = want.detach().double().cpu(), got.detach().double().cpu()
        if not (torch.isfinite(want64).all() and torch.isfinite(got64).all()):
            return math.inf
        scale = float(want64.abs().max()) if want64.numel() else 0.0
        difference = float((got64 - want64).abs().max()) if want64.numel() else 0.0
        worst = max(worst, difference / scale if scale > 0 else (0.0 if difference == 0 else math.inf))
    return worst


def gradient_norm(gradients: Sequence[torch.Tensor | None]) -> torch.Tensor:
    """The 2-norm of all gradients together (missing ones count as zero)."""
    present = [g.detach().double() for g in gradients if g is not None]
    if not present:
        return torch.zeros((), dtype=torch.float64)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in present]))


@dataclass(frozen=True)
class CheckedCompile:
    """The check's outcome: seconds of the first compiled call, what Dynamo did in it, the largest difference."""

    first_call_s: float
    counts: DynamoCounts
    largest_difference: float

    def facts(self) -> dict[str, Fact]:
        return compile_facts(self.first_call_s, self.counts, self.largest_difference)


def check_against_eager(
    case: Case,
    eager_result: Callable[[], Sequence[torch.Tensor]],
    compiled_result: Callable[[], Sequence[torch.Tensor]],
    synchronize: Callable[[], None],
) -> CheckedCompile:
    """Run the eager and the compiled computation once each; raise WrongCompiledResult unless they agree within
    COMPILED_TOLERANCE[case.dtype]. The compiled call is the first one, so its time includes compilation. An eager
    computation that gives no tensor (a forward that returns None) cannot be checked: WrongCompiledResult says so."""
    expected = [t.detach().clone() for t in eager_result()]
    if not expected:
        raise WrongCompiledResult(
            f"{case.benchmark_id}: the model's forward returned no tensor (None, or nothing but other values), so the "
            f"{case.compile} step cannot be checked against eager and is not timed; return the output from forward "
            "(a tensor, or a tuple, list or dict of tensors), or run this model with --perf-compile eager"
        )
    before = DynamoCounts.now()
    synchronize()
    start_s = time.perf_counter()
    actual = [t.detach().clone() for t in compiled_result()]
    synchronize()
    first_call_s = time.perf_counter() - start_s
    counts = DynamoCounts.now().since(before)
    if len(actual) != len(expected):
        raise WrongCompiledResult(
            f"{case.benchmark_id}: the {case.compile} step returned {len(actual)} tensor(s) where eager returned "
            f"{len(expected)}; it computes something else, so it is not timed"
        )
    difference = largest_relative_difference(expected, actual)
    tolerance = COMPILED_TOLERANCE[case.dtype]
    if not difference <= tolerance:
        raise WrongCompiledResult(
            f"{case.benchmark_id}: the {case.compile} step differs from eager by {difference:.3g} of the largest "
            f"value (allowed {tolerance:g} in {case.dtype}); it computes something else, so it is not timed"
        )
    return CheckedCompile(first_call_s, counts, difference)


def loss_and_gradient_norm(
    forward_loss: Callable[[], torch.Tensor], parameters: Sequence[torch.nn.Parameter]
) -> list[torch.Tensor]:
    """One forward and loss, then the gradients by torch.autograd.grad (the parameters' .grad stay untouched):
    [loss, norm of all gradients]."""
    loss = forward_loss()
    gradients = torch.autograd.grad(loss, list(parameters), allow_unused=True)
    return [loss.detach().double().reshape(()), gradient_norm(gradients)]
