"""Record every aten op overload a workload executes, per phase, with call counts.

A `TorchDispatchMode` sees ops below autograd, after CompositeImplicitAutograd ops (linear, conv2d,
layer_norm, sdpa...) have decomposed, and only the calls that reach the dispatcher from Python or from
other modes: a kernel's own calls stay hidden. Where MPS would run a composite kernel (an op without an
MPS kernel), `OpRecorder` runs that composite kernel itself and records its calls too, marked with the
op they came from, so a fallback hidden inside a composite is seen. The optimizer's `profiler::`
record-function markers are not ops and are left out.

The trace runs on the CPU with the choices MPS makes (see `mps_like_choices`), so CPU-only kernels the
CPU would pick, and fused fast paths torch takes on the CPU but never on MPS, are not mistaken for fallbacks.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from perfsuite.workloads import Workload

PHASES = ("infer/forward", "train/forward", "train/backward", "train/optimizer")
# Record-function markers of torch.optim: bookkeeping, not computation.
_MARKER_NAMESPACES = ("profiler",)


@dataclass(frozen=True)
class OpCount:
    """`calls` calls of `op` ('aten::add.Tensor') in `phase` ('train/backward'); `inside` is the composite op
    whose kernel made the calls, None for calls from the model's own code."""

    op: str
    phase: str
    calls: int
    inside: str | None = None


@dataclass(frozen=True)
class WorkloadTrace:
    """The ops one workload ran, traced on `device` at `profile` size with `batch_size` samples."""

    model: str
    profile: str
    batch_size: int
    device: str
    counts: tuple[OpCount, ...]


def op_name(func: torch._ops.OpOverload) -> str:
    """'aten::add.Tensor' for aten.add.Tensor, 'aten::relu' for aten.relu.default (the yaml's names)."""
    overload = func._schema.overload_name
    return f"{func._schema.name}.{overload}" if overload else func._schema.name


class OpRecorder(TorchDispatchMode):
    """Counts the op overloads dispatched while it is active, per phase.

    `descend_key(op)` names the composite kernel (a dispatch key such as 'CompositeExplicitAutograd') that
    MPS would run for `op`; that kernel then runs here too, and its own calls are recorded.
    """

    def __init__(self, descend_key: Callable[[str], str | None] | None = None):
        super().__init__()
        self.phase = PHASES[0]
        self._descend_key = descend_key or (lambda op: None)
        self._inside: list[str] = []
        self._counts: Counter[tuple[str, str, str | None]] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        # A composite kernel may call its own op again (detach does): that call is the same op, not a new one.
        if func.namespace in _MARKER_NAMESPACES or name in self._inside:
            return func(*args, **kwargs)
        self._counts[(name, self.phase, self._inside[-1] if self._inside else None)] += 1
        key = self._descend_key(name)
        if key is not None and torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key):
            self._inside.append(name)
            try:
                # Re-entering the mode makes the composite kernel's own calls visible.
                with self:
                    return func._op_dk(getattr(torch._C.DispatchKey, key), *args, **kwargs)
            finally:
                self._inside.pop()
        return func(*args, **kwargs)

    def counts(self) -> tuple[OpCount, ...]:
        """What was recorded, in first-seen order."""
        return tuple(OpCount(op, phase, calls, inside) for (op, phase, inside), calls in self._counts.items())


@dataclass(frozen=True)
class MpsExcludedFastPath:
    """A torch.nn forward that runs one fused op instead of its layers, but only on the device types it lists,
    and "mps" is in none of those lists: on MPS it always runs its layers.

    `device_types_in` names the function whose source holds the list; the fast path checks
    `torch.backends.mha.get_fastpath_enabled()` before it, so turning that switch off gives the CPU MPS's path.
    """

    module: str
    fused_op: str
    device_types_in: str


# Read from torch/nn/modules/transformer.py and activation.py of the macOS wheels 2.1.2 to 2.15.0: no list holds
# "mps". tests/coverage/test_trace_device_branches.py reads the installed torch's lists and fails if one ever does.
MPS_EXCLUDED_FAST_PATHS = (
    MpsExcludedFastPath(
        "torch.nn.TransformerEncoder", "aten::_nested_tensor_from_mask",
        "torch.nn.modules.transformer.TransformerEncoder.forward",
    ),
    MpsExcludedFastPath(
        "torch.nn.TransformerEncoderLayer", "aten::_transformer_encoder_layer_fwd",
        "torch.nn.modules.transformer.TransformerEncoderLayer.forward",
    ),
    MpsExcludedFastPath(
        "torch.nn.MultiheadAttention", "aten::_native_multi_head_attention",
        "torch.nn.modules.activation._check_arg_device",
    ),
)


@contextlib.contextmanager
def mps_like_choices() -> Iterator[None]:
    """Make the CPU take the paths MPS takes where torch picks a kernel or a path by device.

    - scaled_dot_product_attention: MPS has no `_fused_sdp_choice` kernel, so it takes the math branch
      (its own `_scaled_dot_product_attention_math_for_mps`, or the `_scaled_dot_product_attention_math`
      decomposition when grad or dropout is on); the CPU would pick
      `_scaled_dot_product_flash_attention_for_cpu`, a CPU-only kernel.
    - oneDNN (mkldnn) off: the CPU would otherwise pick mkldnn-only kernels inside pooling or RNN ops.
    - The fused fast paths of TransformerEncoder, TransformerEncoderLayer and MultiheadAttention off
      (`MPS_EXCLUDED_FAST_PATHS`): their Python forward takes them only on the device types it lists, never
      on MPS, so the CPU would run `_transformer_encoder_layer_fwd` where MPS runs the layers.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with warnings.catch_warnings():
        # mkldnn.flags() re-sets oneDNN's TF32 flag too, which warns on builds without Intel GPU support.
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
        with sdpa_kernel([SDPBackend.MATH]), torch.backends.mkldnn.flags(enabled=False), _nn_fast_paths_off():
            yield


@contextlib.contextmanager
def _nn_fast_paths_off() -> Iterator[None]:
    """torch.backends.mha's fast-path switch off within the block (torch >= 2.3 has it; older torch takes the
    fast paths on the CPU and the trace shows their fused op)."""
    switch = getattr(torch.backends, "mha", None)
    if switch is None:
        yield
        return
    was_enabled = switch.get_fastpath_enabled()
    switch.set_fastpath_enabled(False)
    try:
        yield
    finally:
        switch.set_fastpath_enabled(was_enabled)


def default_batch_size(workload: Workload, profile: str) -> int:
    """The first batch size of `profile` (1 when the workload declares none)."""
    sizes = workload.batch_sizes_for(profile)
    return sizes[0] if sizes else 1


def run_phases(
    workload: Workload,
    profile: str,
    batch_size: int,
    modes: tuple[str, ...],
    device: str,
    enter_phase: Callable[[str], contextlib.AbstractContextManager],
) -> None:
    """Run each mode of `workload` once on `device`, as perfsuite's steps do, phase by phase.

    infer: eval(), forward under inference_mode. train: train(), forward and loss, backward, optimizer step.
    `enter_phase(label)` wraps each phase ('infer/forward', 'train/forward', 'train/backward',
    'train/optimizer'); building the module and the inputs happens outside every phase.
    """
    from perfsuite.run.steps import call_module, to_device
    from perfsuite.workloads.random_weights import materialize_random_weights

    module = materialize_random_weights(workload.build_module(profile), device)
    inputs = to_device(workload.make_inputs(profile, batch_size), device)
    if "infer" in modes:
        module.eval()
        with enter_phase("infer/forward"), torch.inference_mode():
            call_module(module, inputs)
    if "train" in modes:
        if workload.loss is None or workload.make_target is None:
            raise ValueError(f"{workload.name} has no loss, so it has no train mode")
        module.train()
        target = to_device(workload.make_target(profile, batch_size), device)
        optimizer = workload.make_optimizer(list(module.parameters()))
        with enter_phase("train/forward"):
            loss = workload.loss(call_module(module, inputs), target)
        with enter_phase("train/backward"):
            loss.backward()
        with enter_phase("train/optimizer"):
            optimizer.step()


def trace_workload(
    workload: Workload,
    profile: str = "smoke",
    modes: tuple[str, ...] | None = None,
    descend_key: Callable[[str], str | None] | None = None,
) -> WorkloadTrace:
    """Trace `workload` on the CPU in each of its modes (all by default), with MPS's choices."""
    chosen = tuple(m for m in (modes or workload.modes) if m in workload.modes)
    size = default_batch_size(workload, profile)
    recorder = OpRecorder(descend_key)

    @contextlib.contextmanager
    def enter_phase(label: str) -> Iterator[None]:
        recorder.phase = label
        with recorder:
            yield

    with mps_like_choices():
        run_phases(workload, profile, size, chosen, "cpu", enter_phase)
    return WorkloadTrace(workload.name, profile, size, "cpu", recorder.counts())
