"""The MPS support table: for every aten op of the installed torch, whether it runs natively on MPS, runs
as a composite of other ops, falls back to the CPU, or cannot be told.

The kernels come from the native_functions.yaml that the torch wheel ships under
torchgen/packaged/ATen/native/, parsed with torchgen's own parser (`parse_native_yaml`) and read through
its MPS `BackendIndex`; what the yaml does not show comes from `mps_facts.json` (see `facts.py`). On a
CPU or CUDA build of torch the dispatcher knows nothing of MPS kernels, so the table is the source.

`classify_op` is the decision, a pure function of the kernels and the facts.
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

from perfsuite.coverage.facts import MpsFacts, coverage_note, facts_for_torch, load_mps_facts

ATEN = "aten::"
COMPOSITE_EXPLICIT = "CompositeExplicitAutograd"
COMPOSITE_EXPLICIT_NON_FUNCTIONAL = "CompositeExplicitAutogradNonFunctional"
COMPOSITE_IMPLICIT = "CompositeImplicitAutograd"
# Kernels for these keys are not what runs for a dense tensor on a device.
_NOT_A_DEVICE = ("Composite", "Meta", "Sparse", "Quantized", "Nested", "Mkldnn", "ZeroTensor")


class Verdict(str, enum.Enum):
    """What happens to an op on MPS, best first."""

    NATIVE = "native MPS kernel"
    COMPOSITE = "composite"
    UNKNOWN = "unknown"
    FALLBACK = "CPU fallback"

    @property
    def rank(self) -> int:
        """Higher is worse: a group of ops gets its worst member's verdict."""
        return list(Verdict).index(self)


@dataclass(frozen=True)
class OpKernels:
    """What native_functions.yaml says about one op (name as in the yaml: 'add.Tensor', 'relu')."""

    name: str
    has_mps_kernel: bool
    structured_delegate: str | None = None
    delegate_has_mps_kernel: bool = False
    composite_key: str | None = None
    device_kernels: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpSupport:
    """The table's answer for one op.

    `composite_key` is the dispatch key of the composite kernel MPS would run (the tracer follows that
    kernel's own calls); `runs_on_mps` are the ops a device-choosing composite calls on MPS.
    """

    op: str
    verdict: Verdict
    reason: str
    composite_key: str | None = None
    runs_on_mps: tuple[str, ...] = ()
    suggestion: str | None = None


def yaml_name(op: str) -> str:
    """'aten::add.Tensor' -> 'add.Tensor'; names without a namespace are returned as they are."""
    return op[len(ATEN):] if op.startswith(ATEN) else op


def classify_op(op: str, kernels: Mapping[str, OpKernels], facts: MpsFacts) -> OpSupport:
    """The verdict for `op` ('aten::name.overload') on MPS, from the yaml's `kernels` and the `facts` of
    the torch version at hand (already filtered with `facts_for_torch`)."""
    namespace = op.split("::", 1)[0] if "::" in op else "aten"
    if namespace != "aten":
        return OpSupport(op, Verdict.UNKNOWN, f"not an aten op: the MPS table covers aten ops only ({namespace}::)")
    name = yaml_name(op)
    suggestion = facts.suggestions.get(name)

    for fact in facts.always_cpu_fallback:
        if fact.op == name:
            return OpSupport(op, Verdict.FALLBACK, f"always falls back to the CPU on MPS, even without "
                             f"PYTORCH_ENABLE_MPS_FALLBACK ({fact.source})", suggestion=suggestion)
        if name in fact.traced_as:
            return OpSupport(op, Verdict.FALLBACK, f"a CPU trace shows {name} where MPS runs {fact.op}, which "
                             f"falls back to the CPU before it decomposes ({fact.source})",
                             suggestion=suggestion or facts.suggestions.get(fact.op))
    for kernel in facts.python_mps_kernels:
        if kernel.op == name:
            return OpSupport(op, Verdict.COMPOSITE, f"MPS kernel registered from Python: {kernel.implementation}, "
                             f"a decomposition into other ops ({kernel.source})")

    entry = kernels.get(name)
    if entry is None:
        return OpSupport(op, Verdict.UNKNOWN, "not in native_functions.yaml: its MPS support cannot be read from "
                         "the table; run the runtime check on a Mac")
    if entry.has_mps_kernel:
        return OpSupport(op, Verdict.NATIVE, "MPS kernel in native_functions.yaml")
    if entry.delegate_has_mps_kernel:
        return OpSupport(op, Verdict.NATIVE, f"structured: its {entry.structured_delegate} has an MPS kernel")
    for choice in facts.mps_choice_inside_composite:
        if choice.op == name:
            called = [classify_op(ATEN + callee, kernels, facts) for callee in choice.runs_on_mps]
            worst = max((c.verdict for c in called), key=lambda v: v.rank)
            return OpSupport(op, worst if worst is not Verdict.NATIVE else Verdict.COMPOSITE,
                             f"composite that calls {' or '.join(choice.runs_on_mps)} on MPS "
                             f"({', '.join(c.verdict.value for c in called)}) ({choice.source})",
                             runs_on_mps=choice.runs_on_mps)
    if entry.composite_key is not None:
        return OpSupport(op, Verdict.COMPOSITE, f"{entry.composite_key} kernel: runs on any backend through "
                         "other ops", composite_key=entry.composite_key)
    backends = ", ".join(entry.device_kernels) or "none"
    reason = (f"no MPS kernel and no composite kernel (kernels for: {backends}): raises NotImplementedError on MPS, "
              "or runs on the CPU with PYTORCH_ENABLE_MPS_FALLBACK=1")
    if entry.device_kernels == ("CPU",) and ("_for_cpu" in name or name.startswith("mkldnn")):
        reason += ("; a CPU-only kernel: if the model does not call it itself, a composite op picked it for the "
                   "CPU trace: add an mps_choice_inside_composite fact after checking what MPS runs")
    return OpSupport(op, Verdict.FALLBACK, reason, suggestion=suggestion)


def native_yaml_paths() -> tuple[str, str]:
    """native_functions.yaml and tags.yaml as shipped in the installed torch wheel (torchgen/packaged)."""
    import torchgen

    directory = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    return os.path.join(directory, "native_functions.yaml"), os.path.join(directory, "tags.yaml")


def read_native_functions(yaml_path: str | None = None, tags_path: str | None = None) -> dict[str, OpKernels]:
    """Every op of native_functions.yaml with its kernels, parsed by torchgen (the installed torch's copy by
    default); autogenerated variants (autogen: ... .out) included, as torchgen generates them."""
    from torchgen.gen import parse_native_yaml
    from torchgen.model import DispatchKey

    default_yaml, default_tags = native_yaml_paths()
    parsed = parse_native_yaml(yaml_path or default_yaml, tags_path or default_tags)
    mps_index = parsed.backend_indices[DispatchKey.MPS].index
    device_keys = [
        key for key in parsed.backend_indices if not any(word in str(key) for word in _NOT_A_DEVICE)
    ]
    table = {}
    for function in parsed.native_functions:
        name = function.func.name
        delegate = function.structured_delegate
        if function.has_composite_explicit_autograd_kernel:
            composite = COMPOSITE_EXPLICIT
        elif function.has_composite_explicit_autograd_non_functional_kernel:
            composite = COMPOSITE_EXPLICIT_NON_FUNCTIONAL
        elif function.has_composite_implicit_autograd_kernel:
            composite = COMPOSITE_IMPLICIT
        else:
            composite = None
        kernel_owner = delegate if delegate is not None else name
        table[str(name)] = OpKernels(
            name=str(name),
            has_mps_kernel=name in mps_index,
            structured_delegate=str(delegate) if delegate is not None else None,
            delegate_has_mps_kernel=delegate is not None and delegate in mps_index,
            composite_key=composite,
            device_kernels=tuple(
                str(key) for key in device_keys if kernel_owner in parsed.backend_indices[key].index
            ),
        )
    return table


class MpsSupportTable:
    """The table for one torch version: `lookup(op)` answers, `descend_key(op)` tells the tracer which
    composite kernel to follow."""

    def __init__(self, kernels: Mapping[str, OpKernels], facts: MpsFacts, torch_version: str):
        self.kernels = kernels
        self.torch_version = torch_version
        self.facts = facts_for_torch(facts, torch_version)
        self.note = coverage_note(facts, torch_version)
        self._answers: dict[str, OpSupport] = {}

    def lookup(self, op: str) -> OpSupport:
        """The verdict for `op` ('aten::name.overload')."""
        if op not in self._answers:
            self._answers[op] = classify_op(op, self.kernels, self.facts)
        return self._answers[op]

    def descend_key(self, op: str) -> str | None:
        """The dispatch key of the composite kernel that MPS runs for `op`, when the tracer should record
        that kernel's own calls; None for an op MPS runs as it is."""
        answer = self.lookup(op)
        return answer.composite_key if answer.verdict is Verdict.COMPOSITE else None


@functools.lru_cache(maxsize=1)
def installed_mps_support_table() -> MpsSupportTable:
    """The table for the installed torch, from its own native_functions.yaml (parsed once per process)."""
    import torch

    return MpsSupportTable(read_native_functions(), load_mps_facts(), torch.__version__)
