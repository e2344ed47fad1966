"""ResNet18 image classification, as in the source article's CV benchmark.

Built from transformers' ResNet with the ResNet-18 layout (basic blocks, depths 2-2-2-2, widths
64-128-256-512), so the same implementation runs everywhere and baselines stay comparable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from perfsuite.workloads import Workload
from perfsuite.workloads.random_weights import build_on_meta

if TYPE_CHECKING:
    from transformers import ResNetConfig

NUM_CLASSES = 1000
SMOKE_NUM_CLASSES = 10


def _config(profile: str) -> ResNetConfig:
    from transformers import ResNetConfig

    if profile == "smoke":
        config = ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[2, 2, 2, 2], layer_type="basic",
        )
    else:
        config = ResNetConfig(
            embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2], layer_type="basic",
        )
    # A property, set after construction: transformers 5's typed constructors have no num_labels argument.
    config.num_labels = SMOKE_NUM_CLASSES if profile == "smoke" else NUM_CLASSES
    return config


def image_size_px(profile: str) -> int:
    """Side of the square input image in pixels: 224 as in ImageNet training, 64 at smoke size."""
    return 64 if profile == "smoke" else 224


class ResNetLogits(torch.nn.Module):
    """transformers' ResNetForImageClassification returning the logits tensor only."""

    def __init__(self, profile: str):
        super().__init__()
        from transformers import ResNetForImageClassification

        self.model = ResNetForImageClassification(_config(profile))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixel_values).logits


def build(profile: str) -> torch.nn.Module:
    """ResNet18 (or its smoke-size twin) with random weights."""
    return build_on_meta(lambda: ResNetLogits(profile))


def make_images(profile: str, batch_size: int) -> torch.Tensor:
    """Random normalised images, NCHW float32."""
    side = image_size_px(profile)
    return torch.randn(batch_size, 3, side, side, generator=torch.Generator().manual_seed(1))


def make_labels(profile: str, batch_size: int) -> torch.Tensor:
    """Random class labels."""
    classes = SMOKE_NUM_CLASSES if profile == "smoke" else NUM_CLASSES
    return torch.randint(0, classes, (batch_size,), generator=torch.Generator().manual_seed(2))


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Classification loss, computed in float32 whatever the autocast dtype."""
    return F.cross_entropy(logits.float(), labels)


class CheckpointedStage(torch.nn.Module):
    """A ResNet stage whose activations are recomputed in backward instead of kept."""

    def __init__(self, stage: torch.nn.Module):
        super().__init__()
        self.stage = stage

    def forward(self, hidden_state: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.stage, hidden_state, use_reentrant=False)


def checkpoint_stages(module: torch.nn.Module) -> None:
    """Gradient checkpointing per ResNet stage (transformers' ResNet has no switch for it), on a `build` module."""
    if not isinstance(module, ResNetLogits):
        raise TypeError(f"resnet18 checkpointing needs the module `build` returns, got {type(module).__name__}")
    stages = module.model.resnet.encoder.stages
    for index, stage in enumerate(stages):
        if not isinstance(stage, CheckpointedStage):
            stages[index] = CheckpointedStage(stage)


def _sgd(parameters: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=0.01, momentum=0.9)


WORKLOADS = (
    Workload(
        name="resnet18",
        build_module=build,
        make_inputs=make_images,
        make_target=make_labels,
        loss=cross_entropy,
        make_optimizer=_sgd,
        batch_sizes={"smoke": (4,), "standard": (32, 64, 128, 256), "full": (512,)},
        description="ResNet18, 224x224 images, 1000 classes (transformers ResNet, basic blocks 2-2-2-2)",
        enable_checkpointing=checkpoint_stages,
        supports_channels_last=True,
        trains_convolutions=True,
        has_batchnorm=True,
    ),
)
