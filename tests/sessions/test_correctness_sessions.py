"""The channels_last correctness check: one step's gradients in both layouts, compared (on the CPU here).

The in-process tests of this subject: tests/quick/test_correctness.py."""

from __future__ import annotations

import math

import pytest

from perfsuite.records import Case
from perfsuite.run.devices import backend

pytestmark = pytest.mark.slow


@pytest.mark.slow  # builds and trains ResNet18 in both layouts
def test_a_checked_channels_last_training_case_that_agrees_is_prepared(monkeypatch):
    from perfsuite.run import steps
    from perfsuite.workloads import get_workload

    monkeypatch.setattr(backend("cpu"), "checks_channels_last_gradients", True)
    case = Case("cpu", "fp32", "resnet18", 2, "train-channels-last", "smoke")
    prepared = steps.prepare_case(case, get_workload("resnet18"))
    assert math.isfinite(float(prepared.run_step()))
