"""Fixtures shared by the test folders. Which tests are slow each file says itself (`pytestmark = pytest.mark.slow`
in every file of tests/sessions); tests/quick/test_slow_mark.py checks that none is missed."""

import os
from collections.abc import Iterator

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


@pytest.fixture(autouse=True, scope="session")
def _not_an_xdist_worker_for_inner_sessions() -> Iterator[None]:
    """Under `pytest -n`, the pytest sessions a test starts (pytester, worker processes) inherit xdist's variables,
    and pytest-benchmark then believes it runs under xdist and disables itself; they are sessions of their own, each
    given one torch thread."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            # Two workers on a small machine: torch's threads in each, and in the sessions they start, would
            # oversubscribe its cores many times over.
            monkeypatch.setenv("OMP_NUM_THREADS", "1")
            torch.set_num_threads(1)
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(name, raising=False)
        yield
