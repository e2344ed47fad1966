"""One step of a case, composed the same way for every workload.

`infer`: the forward pass under `torch.inference_mode()`. `train`: zero the gradients, forward, loss,
backward, optimizer step. Mixed precision is `torch.autocast(device_type=...)` with bf16 or fp16 (weights
stay fp32); fp16 training scales the loss with `torch.amp.GradScaler(device)`.
Variants: `train-checkpoint` turns on the workload's gradient checkpointing; `*-channels-last` puts the
module and its 4-D inputs in channels_last memory format; `train-ddp` is built by `perfsuite.run.ddp.rank0`.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from perfsuite.matrix.axes import EAGER, base_mode
from perfsuite.records import Case, Fact
from perfsuite.run import compiled
from perfsuite.run.correctness import channels_last_gradients_match
from perfsuite.run.devices import backend
from perfsuite.workloads import Workload
from perfsuite.workloads.random_weights import materialize_random_weights

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The seed of a case's weights, inputs and targets.
CASE_SEED = 0


@dataclass(frozen=True)
class PreparedCase:
    """A case ready to run: `run_step` queues one step, `timed_step` also waits for the device.

    `close()` releases what the case holds beyond memory (worker processes); `extra_facts` are
    recorded with its result.
    """

    case: Case
    run_step: Callable[[], torch.Tensor]
    parameter_count: int
    config_digest: str
    close: Callable[[], None] = lambda: None
    samples_per_step: int | None = None
    extra_facts: Mapping[str, Any] = field(default_factory=dict)
    # The same computation run eagerly, where `run_step` cannot be counted (a compiled step, a graph replay).
    eager_step: Callable[[], object] | None = None

    @property
    def step_to_count(self) -> Callable[[], object]:
        """The step whose FLOPs are `run_step`'s: the eager step where there is one, else `run_step`."""
        return self.eager_step or self.run_step

    @property
    def samples(self) -> int:
        """Samples one step processes: the batch size, or more where several processes share a step."""
        return self.samples_per_step or self.case.batch_size

    def timed_step(self) -> torch.Tensor:
        """One step that returns only when the device has finished it: what each timed round runs.
        Returns the step's output (the loss of a training step)."""
        output = self.run_step()
        backend(self.case.device).synchronize()
        return output


def to_device(value: Any, device: str, channels_last: bool = False) -> Any:
    """Move a tensor, or the tensors of a dict, to `device`; 4-D tensors to channels_last if asked."""
    if isinstance(value, torch.Tensor):
        moved = value.to(device)
        return moved.to(memory_format=torch.channels_last) if channels_last and moved.dim() == 4 else moved
    if isinstance(value, dict):
        return {k: to_device(v, device, channels_last) for k, v in value.items()}
    return value


def call_module(module: torch.nn.Module, inputs: Any) -> Any:
    """Call `module` with a tensor positionally or a dict as keyword arguments."""
    return module(**inputs) if isinstance(inputs, dict) else module(inputs)


def autocast_context(case: Case) -> contextlib.AbstractContextManager:
    """Mixed precision for bf16/fp16 cases; nothing for fp32. A step captured as a CUDA graph runs autocast
    without its cast cache, as torch.cuda.graph's documentation requires."""
    if case.dtype == "fp32":
        return contextlib.nullcontext()
    return backend(case.device).autocast(TORCH_DTYPES[case.dtype], cache_enabled=case.compile != "cuda-graph")


def prepare_case(case: Case, workload: Workload) -> PreparedCase:
    """Build the workload's module and inputs on the case's device and compose its step (eager, compiled or
    captured as a CUDA graph, per `case.compile`)."""
    if case.mode not in workload.modes:
        raise ValueError(f"{workload.name} has no mode {case.mode!r}; it has {', '.join(workload.modes)}")
    if case.mode == "train-ddp":
        raise ValueError(f"{case.benchmark_id}: train-ddp is prepared by perfsuite.run.ddp.rank0.prepare_ddp_case")
    channels_last = case.mode.endswith("-channels-last")
    # The same weights and inputs in every process (and on both sides of an A/B comparison): seeded once here.
    torch.manual_seed(CASE_SEED)
    module = materialize_random_weights(workload.build_module(case.profile), case.device, seed=CASE_SEED)
    inputs = to_device(workload.make_inputs(case.profile, case.batch_size), case.device, channels_last)
    # Before checkpointing: a wrapper (resnet18's CheckpointedStage) renames parameters, not the config.
    digest = config_digest(workload.name, module, inputs, case.compile)
    # Recorded with the result, so a channels_last training result says whether its gradients were checked.
    layout_facts = {}
    if channels_last and base_mode(case.mode) == "train" and backend(case.device).checks_channels_last_gradients:
        check_channels_last_gradients(case, workload, module, inputs)
        layout_facts = {"channels_last_gradients_checked": True}
    if channels_last:
        # torch's stubs omit `memory_format`, which Module.to accepts (documented in torch.nn.Module.to).
        module = module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if case.mode == "train-checkpoint":
        enable_checkpointing = workload.enable_checkpointing
        if enable_checkpointing is None:
            raise ValueError(f"{workload.name} has no enable_checkpointing for mode train-checkpoint")
        enable_checkpointing(module)
    parameter_count = sum(p.numel() for p in module.parameters())
    if base_mode(case.mode) == "infer":
        module.eval()
        target = None

        def step_with(runner: torch.nn.Module) -> Callable[[], torch.Tensor]:
            def run_step() -> torch.Tensor:
                with torch.inference_mode(), autocast_context(case):
                    return call_module(runner, inputs)

            return run_step
    else:
        module.train()
        make_target = workload.make_target
        if make_target is None:
            raise ValueError(f"{workload.name} has no make_target; it cannot train")
        target = to_device(make_target(case.profile, case.batch_size), case.device)

        def step_with(runner: torch.nn.Module) -> Callable[[], torch.Tensor]:
            return make_train_step(case, workload, runner, inputs, target)

    if case.compile == EAGER:
        return PreparedCase(case, step_with(module), parameter_count, digest, extra_facts=layout_facts)
    return prepare_compiled(EagerStep(case, workload, module, inputs, target, step_with), parameter_count, digest)


@dataclass(frozen=True)
class EagerStep:
    """What a compiled or captured step is built from and checked against: the case, its workload, the eager module
    with its inputs and training target (None for inference), and `step_with`, which composes the case's step around a
    module (the eager one or its compiled form)."""

    case: Case
    workload: Workload
    module: torch.nn.Module
    inputs: Any
    target: Any
    step_with: Callable[[torch.nn.Module], Callable[[], torch.Tensor]]

    def run(self) -> object:
        """One eager step: the computation a compiled step's FLOPs are counted on."""
        return self.step_with(self.module)()

    def forward_loss(self, runner: torch.nn.Module) -> Callable[[], torch.Tensor]:
        """The forward pass of `runner` and the workload's loss, under the case's autocast, without backward."""
        loss_of = self.workload.loss
        if loss_of is None:
            raise ValueError(f"{self.workload.name} has no loss; it cannot train")

        def run() -> torch.Tensor:
            with autocast_context(self.case):
                return loss_of(call_module(runner, self.inputs), self.target)

        return run

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The module's parameters that take gradients: those the training check compares."""
        return [p for p in self.module.parameters() if p.requires_grad]

    def check(
        self, eager_result: Callable[[], Sequence[torch.Tensor]], compiled_result: Callable[[], Sequence[torch.Tensor]]
    ) -> compiled.CheckedCompile:
        """`compiled.check_against_eager` on the case's device: raises WrongCompiledResult unless the two agree."""
        return compiled.check_against_eager(
            self.case, eager_result, compiled_result, backend(self.case.device).synchronize
        )


# A compiled or captured step and the facts recorded with its result.
CompiledStep = tuple[Callable[[], torch.Tensor], dict[str, Fact]]


def capture_inference(eager: EagerStep) -> CompiledStep:
    """The inference step captured as a CUDA graph and checked against eager; records the capture's seconds."""
    replay, capture_s = _timed_capture(eager.step_with(eager.module))
    checked = eager.check(
        lambda: compiled.output_tensors(eager.run()), lambda: compiled.output_tensors(replay())
    )
    return replay, {**checked.facts(), "compile_first_call_s": round(capture_s, 3)}


def capture_training(eager: EagerStep) -> CompiledStep:
    """The training step captured as a CUDA graph (its optimizer made capturable), once a captured graph of its loss
    and gradient norm has been checked against eager; records the capture's seconds."""
    checked = _check_captured_loss(eager)
    replay, capture_s = _timed_capture(
        make_train_step(
            eager.case, eager.workload, eager.module, eager.inputs, eager.target, compiled.make_capturable
        )
    )
    return replay, {**checked.facts(), "compile_first_call_s": round(capture_s, 3)}


def _check_captured_loss(eager: EagerStep) -> compiled.CheckedCompile:
    """The loss and gradient norm captured as a CUDA graph and checked against eager: a training step would change
    the weights it is checked on. The check's graph is released on return, before the timed one is captured."""
    parameters = eager.trainable_parameters()
    with compiled.training_check_mode(eager.module):
        check_graph = compiled.capture_cuda_graph(
            lambda: torch.stack(compiled.loss_and_gradient_norm(eager.forward_loss(eager.module), parameters))
        )
        return eager.check(
            lambda: compiled.loss_and_gradient_norm(eager.forward_loss(eager.module), parameters),
            lambda: list(check_graph()),
        )


def compile_inference(eager: EagerStep) -> CompiledStep:
    """The inference step through torch.compile in the case's mode (inductor, reduce-overhead), checked against
    eager by its first call (which compiles)."""
    runner = compiled.compile_module(eager.module, eager.case.compile)
    run_step = compiled.mark_step(eager.case.compile, eager.step_with(runner))
    checked = eager.check(
        lambda: compiled.output_tensors(eager.run()), lambda: compiled.output_tensors(run_step())
    )
    return run_step, checked.facts()


def compile_training(eager: EagerStep) -> CompiledStep:
    """The training step through torch.compile in the case's mode; the compiled loss and gradient norm are checked
    against eager first, since a training step changes the weights it would be checked on."""
    runner = compiled.compile_module(eager.module, eager.case.compile)
    parameters = eager.trainable_parameters()
    compiled_loss = compiled.mark_step(
        eager.case.compile,
        lambda: torch.stack(compiled.loss_and_gradient_norm(eager.forward_loss(runner), parameters)),
    )
    with compiled.training_check_mode(eager.module):
        checked = eager.check(
            lambda: compiled.loss_and_gradient_norm(eager.forward_loss(eager.module), parameters),
            lambda: list(compiled_loss()),
        )
    return compiled.mark_step(eager.case.compile, eager.step_with(runner)), checked.facts()


def prepare_compiled(eager: EagerStep, parameter_count: int, digest: str) -> PreparedCase:
    """The case's step compiled (inductor, reduce-overhead) or captured as a CUDA graph, for inference or training,
    once the compiled computation has been checked against eager; its FLOPs are counted on the eager step."""
    training = eager.target is not None
    if eager.case.compile == "cuda-graph":
        build = capture_training if training else capture_inference
    else:
        build = compile_training if training else compile_inference
    run_step, facts = build(eager)
    return PreparedCase(
        eager.case, run_step, parameter_count, digest, extra_facts=facts, eager_step=eager.run
    )


def _timed_capture(step: Callable[[], torch.Tensor]) -> tuple[Callable[[], torch.Tensor], float]:
    """`step` captured as a CUDA graph (`compiled.capture_cuda_graph`) and the seconds the warm-up and capture took."""
    start_s = time.perf_counter()
    replay = compiled.capture_cuda_graph(step)
    return replay, time.perf_counter() - start_s


class WrongResult(Exception):
    """The device computes this case's step differently from the reference layout: it is failed, not timed."""


def check_channels_last_gradients(case: Case, workload: Workload, module: torch.nn.Module, inputs: Any) -> None:
    """Raise WrongResult unless one fp32 training step of `module` (still contiguous) gives the same gradients in
    channels_last as in the contiguous layout, on the case's device."""
    make_target, loss_of = workload.make_target, workload.loss
    if make_target is None or loss_of is None:
        raise ValueError(f"{workload.name} has no make_target or loss; it cannot train")
    target = to_device(make_target(case.profile, case.batch_size), case.device)
    comparison = channels_last_gradients_match(module, inputs, target, loss_of)
    if not comparison.matches:
        raise WrongResult(comparison.describe(case.benchmark_id))


def make_train_step(
    case: Case,
    workload: Workload,
    module: torch.nn.Module,
    inputs: Any,
    target: Any,
    adapt_optimizer: Callable[[torch.optim.Optimizer], None] | None = None,
) -> Callable[[], torch.Tensor]:
    """Zero grads, forward under autocast, loss, backward (scaled for fp16), optimizer step; returns the loss.
    `adapt_optimizer` adjusts the workload's optimizer before its first step (e.g. makes it capturable)."""
    optimizer = workload.make_optimizer(list(module.parameters()))
    if adapt_optimizer is not None:
        adapt_optimizer(optimizer)
    scaler = backend(case.device).grad_scaler() if case.dtype == "fp16" else None
    loss_of = workload.loss
    if loss_of is None:
        raise ValueError(f"{workload.name} has no loss; it cannot train")

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

    return train_step


# Words in the names of ops that carry matrix products, convolutions or attention. Such an op without a formula in
# FlopCounterMode's registry (a fused fast path such as aten._transformer_encoder_layer_fwd, a backend's own kernel
# such as aten._scaled_dot_product_flash_attention_for_cpu) does work the counter does not see.
COMPUTE_OP_WORDS = ("attention", "transformer", "multi_head", "conv", "mm", "linear", "lstm", "gru", "rnn")


class FlopsUnknownWarning(UserWarning):
    """A step runs ops whose FLOPs torch's counter does not count: its FLOPs and TFLOP/s are reported as unknown."""


@dataclass(frozen=True)
class FlopCount:
    """One step's FLOPs as FlopCounterMode counted them, and the ops it ran that carry uncounted work (sorted)."""

    counted_flops: int
    uncounted_ops: tuple[str, ...]

    @property
    def flops_per_step(self) -> int | None:
        """The step's FLOPs, or None (unknown) where an op's work went uncounted."""
        return None if self.uncounted_ops else self.counted_flops


def uncounted_ops(op_names: Iterable[str], counted: Collection[str]) -> tuple[str, ...]:
    """Of the ops `op_names` a step ran, those that carry compute (COMPUTE_OP_WORDS) but are not in `counted`
    (the names of the ops the counter has formulas for), sorted, each once."""
    return tuple(sorted({
        name for name in op_names
        if name not in counted and any(word in name.rsplit(".", 1)[-1] for word in COMPUTE_OP_WORDS)
    }))


class _OpNames(TorchDispatchMode):
    """Records the name of every op dispatched while active that runs a kernel of its own (an op with a
    CompositeImplicitAutograd kernel runs as other ops, which are recorded instead)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if not func.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd):
            self.names.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def _as_given(formula: Callable[..., int]) -> Callable[..., int]:
    """A formula of flop_registry that FlopCounterMode's custom_mapping takes as it is (it already reads shapes)."""

    def shaped(*args: Any, **kwargs: Any) -> int:
        return formula(*args, **kwargs)

    setattr(shaped, "_get_raw", True)  # noqa: B010 - FlopCounterMode's mark for a formula that reads shapes itself
    return shaped


def _cpu_attention_formulas() -> dict[Any, Callable[..., int]]:
    """FLOP formulas for the CPU's flash attention kernels, which torch's registry lacks: they take the query, key
    and value (and, backward, the output gradient first) as the CUDA flash kernels do, so those kernels' formulas
    count them."""
    aten = torch.ops.aten
    pairs = (
        ("_scaled_dot_product_flash_attention_for_cpu", aten._scaled_dot_product_flash_attention),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", aten._scaled_dot_product_flash_attention_backward),
    )
    return {getattr(aten, name): _as_given(flop_registry[like]) for name, like in pairs if hasattr(aten, name)}


def flop_count(run_step: Callable[[], object]) -> FlopCount:
    """One step run under torch's FlopCounterMode (matmuls, convolutions, attention, and the CPU's flash attention)
    and an op recorder: the FLOPs counted and the ops whose work was not; run outside the timed rounds."""
    formulas = _cpu_attention_formulas()
    # The recorder below the counter: it sees the ops the counter's decompositions leave, as a kernel would.
    with _OpNames() as ops, FlopCounterMode(display=False, custom_mapping=formulas) as counter:
        run_step()
    counted = {str(op) for op in [*flop_registry, *formulas]}
    return FlopCount(int(counter.get_total_flops()), uncounted_ops(ops.names, counted))


def warn_if_unknown(count: FlopCount) -> None:
    """A FlopsUnknownWarning naming the ops whose work `count` leaves out, where there are any: its FLOPs are then
    unknown (None), never the smaller count."""
    if count.uncounted_ops:
        warnings.warn(FlopsUnknownWarning(
            f"FLOPs unknown: the step runs {', '.join(count.uncounted_ops)}, whose work torch's FlopCounterMode does "
            "not count; flops_per_step and TFLOP/s are left empty rather than reported too small"
        ), stacklevel=2)


# The facts a result records of its FLOP count (`flop_facts`).
FLOP_FACTS = ("flops_uncounted_ops",)


def flop_facts(count: FlopCount) -> dict[str, Any]:
    """The facts a result records of its FLOP count: `flops_uncounted_ops`, the ops whose work went uncounted."""
    return {"flops_uncounted_ops": ", ".join(count.uncounted_ops)} if count.uncounted_ops else {}


def config_digest(name: str, module: torch.nn.Module, inputs: Any, compile_mode: str = EAGER) -> str:
    """A short hash of the model's parameter shapes and the input shapes, and of the compile mode where it is not
    eager: equal digests, equal configs."""
    shapes = [f"{n}:{tuple(p.shape)}" for n, p in module.named_parameters()]
    if compile_mode != EAGER:
        shapes.append(f"compile:{compile_mode}")
    tensors = inputs.values() if isinstance(inputs, dict) else [inputs]
    shapes += [f"input:{tuple(t.shape)}:{t.dtype}" for t in tensors if isinstance(t, torch.Tensor)]
    return hashlib.sha256("\n".join([name, *shapes]).encode()).hexdigest()[:12]
