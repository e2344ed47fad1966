"""The workload registry: what a model is, how to build it and how to feed it.

A workload is a small declaration in the style of TorchBench's model classes: a module factory, an input
maker, an optional loss and the batch sizes of each profile. The step that is timed (forward, or forward,
loss, backward and optimizer step) is composed from these pieces in `perfsuite.run.steps`, the same way for
every workload, so the built-in models and a user's own model are measured alike.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from perfsuite.matrix.cases import ModelFacts, default_models

ModuleFactory = Callable[[str], torch.nn.Module]
InputMaker = Callable[[str, int], Any]
LossFunction = Callable[[Any, Any], torch.Tensor]
OptimizerFactory = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]


def default_optimizer(parameters: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """AdamW at a small learning rate: the optimizer most training recipes for these models use."""
    return torch.optim.AdamW(parameters, lr=1e-4)


@dataclass(frozen=True)
class Workload:
    """A model family to benchmark.

    - `build_module(profile)` returns the module on the CPU; parameters left on the meta device (see
      `random_weights.build_on_meta`) get random values directly on the case's device.
    - `make_inputs(profile, batch_size)` returns the forward inputs: a tensor (passed positionally) or a
      dict of keyword arguments, on the CPU.
    - `make_target(profile, batch_size)` and `loss(output, target)` define training; a workload without a
      loss is inference-only.
    - `batch_sizes` maps each profile to the batch sizes measured by default; `full` falls back to
      `standard` plus nothing when absent.
    - `extra_facts` are figures recorded with every result of this workload (e.g. denoising steps).
    - `enable_checkpointing(module)` turns on gradient checkpointing (mode `train-checkpoint`);
      `supports_channels_last` allows the channels_last modes (4-D convolution inputs).
    - Facts the matrix steers by: `trains_convolutions` (its training step runs nn.Conv2d), `has_batchnorm` (it has
      nn.BatchNorm2d layers), `host_loop` (its step is a pipeline with a host-side loop, not one module call).
    """

    name: str
    build_module: ModuleFactory
    make_inputs: InputMaker
    batch_sizes: Mapping[str, tuple[int, ...]]
    make_target: InputMaker | None = None
    loss: LossFunction | None = None
    make_optimizer: OptimizerFactory = default_optimizer
    description: str = ""
    extra_facts: Mapping[str, Any] = field(default_factory=dict)
    enable_checkpointing: Callable[[torch.nn.Module], None] | None = None
    supports_channels_last: bool = False
    trains_convolutions: bool = False
    has_batchnorm: bool = False
    host_loop: bool = False

    @property
    def trainable(self) -> bool:
        """Whether the workload can train: it needs a loss and a target maker."""
        return self.loss is not None and self.make_target is not None

    @property
    def modes(self) -> tuple[str, ...]:
        """Every mode this workload supports, the variants included."""
        modes = ["train", "infer"] if self.trainable else ["infer"]
        if self.trainable and self.enable_checkpointing is not None:
            modes.append("train-checkpoint")
        if self.supports_channels_last:
            modes += ["train-channels-last", "infer-channels-last"] if self.trainable else ["infer-channels-last"]
        if self.trainable:
            modes.append("train-ddp")
        return tuple(modes)

    def batch_sizes_for(self, profile: str) -> tuple[int, ...]:
        """Default batch sizes of `profile`; `full` includes the `standard` ones."""
        return self.facts().batch_sizes_for(profile)

    def facts(self, builtin: bool = False) -> ModelFacts:
        """What the case matrix knows of this workload; `builtin` says perfsuite ships it."""
        return ModelFacts(
            name=self.name, modes=self.modes, batch_sizes=dict(self.batch_sizes), builtin=builtin,
            trains_convolutions=self.trains_convolutions, has_batchnorm=self.has_batchnorm, host_loop=self.host_loop,
        )


_REGISTRY: dict[str, Workload] = {}
# The module that called register_workload for each name (a conftest.py registering a model defined elsewhere): a
# worker process imports it too to find the model.
_REGISTERED_IN: dict[str, str] = {}


def register_workload(workload: Workload) -> Workload:
    """Add `workload` to the matrix; a second workload with the same name, a built-in one included, is an error."""
    caller = sys._getframe(1).f_globals.get("__name__")
    _load_builtin_workloads()  # so that a user's model cannot take a built-in model's name unnoticed
    if workload.name in _REGISTRY and _REGISTRY[workload.name] is not workload:
        raise ValueError(
            f"a workload named {workload.name!r} is already registered; pick another name "
            f"(registered: {', '.join(sorted(_REGISTRY))})"
        )
    if "-" in workload.name and workload.name.split("-")[-1].startswith("bs"):
        raise ValueError(f"workload name {workload.name!r} must not end in '-bs...': it would blur case ids")
    _REGISTRY[workload.name] = workload
    if isinstance(caller, str):
        _REGISTERED_IN[workload.name] = caller
    return workload


def registering_module(name: str) -> str | None:
    """The name of the module that registered the workload `name` (None: not registered through
    register_workload)."""
    return _REGISTERED_IN.get(name)


def registered_workloads() -> dict[str, Workload]:
    """Every registered workload by name: the built-in ones first, then the others (a project's conftest.py, an
    installed package's entry point in the group `perfsuite.workloads`) in the order they were registered."""
    _load_builtin_workloads()
    _load_installed_workloads()
    return dict(_REGISTRY)


# The modules that define the built-in models (what an A/B base side takes from the base checkout of perfsuite's own
# repository, while the harness stays the head's).
MODEL_MODULES = (
    "perfsuite.workloads.random_weights", "perfsuite.workloads.resnet", "perfsuite.workloads.bert",
    "perfsuite.workloads.stable_diffusion",
)


def builtin_workloads() -> dict[str, Workload]:
    """The models perfsuite ships, by name, in the source article's order: ResNet18, BERT-base, the SD 1.5 parts."""
    # Imported here so that `import perfsuite` stays cheap; these modules import transformers lazily too.
    from perfsuite.workloads import bert, resnet, stable_diffusion

    return {workload.name: workload for module in (resnet, bert, stable_diffusion) for workload in module.WORKLOADS}


def model_facts(workloads: Mapping[str, Workload] | None = None) -> dict[str, ModelFacts]:
    """The matrix's facts of `workloads` (default: every registered one) by name, the built-in ones marked."""
    builtin = builtin_workloads()
    chosen = registered_workloads() if workloads is None else workloads
    return {name: workload.facts(builtin=builtin.get(name) is workload) for name, workload in chosen.items()}


def default_model_names(workloads: Mapping[str, Workload]) -> list[str]:
    """The models a session measures when none are named: the user's own when there are some, else all of them."""
    return default_models(model_facts(workloads))


def get_workload(name: str) -> Workload:
    """The workload called `name`, or a KeyError that lists the valid names."""
    workloads = registered_workloads()
    if name not in workloads:
        raise KeyError(f"unknown model {name!r}; valid: {', '.join(workloads)}")
    return workloads[name]


_builtins_loaded = False
_installed_loaded = False


def _load_builtin_workloads() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for name, workload in builtin_workloads().items():
        _REGISTRY.setdefault(name, workload)


def _load_installed_workloads() -> None:
    global _installed_loaded
    if _installed_loaded:
        return
    _installed_loaded = True
    from perfsuite.workloads.user import load_installed_workloads

    load_installed_workloads()


# The registry as a value: (workloads by name, built-in models loaded, installed models loaded). An A/B process that
# holds both sides keeps one per side (`perfsuite.run.side_code`), each with its own version of the project's models.
RegistryState = tuple[dict[str, Workload], bool, bool]


def swap_registry_state(state: RegistryState) -> RegistryState:
    """Make `state` the registry; returns the state it replaced."""
    global _builtins_loaded, _installed_loaded
    previous = (dict(_REGISTRY), _builtins_loaded, _installed_loaded)
    _REGISTRY.clear()
    _REGISTRY.update(state[0])
    _builtins_loaded, _installed_loaded = state[1], state[2]
    return previous
