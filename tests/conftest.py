"""Fixtures shared by the test folders."""

import pytest
import torch
import torch.nn.functional as F

from perfsuite import Workload


class EmbeddingWithMaxNorm(torch.nn.Module):
    """nn.Embedding(max_norm=...) renormalises its rows with aten::embedding_renorm_, an op that
    MPSFallback.mm sends to the CPU in every checked torch release."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 8, max_norm=1.0)

    def forward(self, token_ids):
        return self.embedding(token_ids).mean(dim=1)


@pytest.fixture
def planted_fallback() -> Workload:
    """A small model that uses an op known to fall back to the CPU on MPS."""
    return Workload(
        name="planted-fallback", build_module=lambda profile: EmbeddingWithMaxNorm(), batch_sizes={"smoke": (2,)},
        make_inputs=lambda profile, batch_size: torch.randint(0, 50, (batch_size, 5)),
        make_target=lambda profile, batch_size: torch.randn(batch_size, 8),
        loss=lambda output, target: F.mse_loss(output, target),
    )
