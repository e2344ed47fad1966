"""The channels_last correctness check: one step's gradients in both layouts, compared (on the CPU here).

The tests of this subject that start processes or take long: tests/sessions/test_correctness_sessions.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from perfsuite.matrix.axes import DEVICES
from perfsuite.records import Case
from perfsuite.run.correctness import channels_last_gradients_match, compare_gradients
from perfsuite.run.devices import backend


def small_convnet() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    )


def images() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(4, 3, 16, 16, generator=generator), torch.randint(0, 4, (4,), generator=generator)


class WrongBatchNormGradient(torch.nn.BatchNorm2d):
    """BatchNorm2d whose weight gradient is scaled in channels_last, as MPS's was (pytorch/pytorch#175189)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
            self.weight.register_hook(lambda grad: grad * 1e7)
        return super().forward(x)


def test_channels_last_gradients_agree_on_the_cpu():
    inputs, target = images()
    comparison = channels_last_gradients_match(small_convnet(), inputs, target, F.cross_entropy)
    assert comparison.matches and comparison.worst_parameter is None


def test_wrong_batchnorm_gradients_in_channels_last_are_caught_naming_the_parameter():
    model = small_convnet()
    model[1] = WrongBatchNormGradient(8)
    inputs, target = images()
    comparison = channels_last_gradients_match(model, inputs, target, F.cross_entropy)
    assert (comparison.matches, comparison.worst_parameter) == (False, "1.weight")


def test_the_check_leaves_the_batchnorm_running_statistics_untouched():
    model = small_convnet()
    inputs, target = images()
    channels_last_gradients_match(model, inputs, target, F.cross_entropy)
    assert torch.equal(model[1].running_mean, torch.zeros(8))


def test_gradients_within_the_tolerance_match():
    reference = {"w": torch.tensor([1.0, 2.0])}
    assert compare_gradients(reference, {"w": torch.tensor([1.0005, 2.001])}).matches


def test_a_gradient_off_by_a_tenth_does_not_match_and_reports_the_difference():
    comparison = compare_gradients({"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([1.0, 2.1])})
    assert (comparison.matches, comparison.worst_parameter) == (False, "w")
    assert comparison.max_abs_difference == pytest.approx(0.1, rel=1e-5)


def test_a_nan_gradient_never_matches():
    comparison = compare_gradients({"w": torch.tensor([1.0])}, {"w": torch.tensor([math.nan])})
    assert not comparison.matches and comparison.max_abs_difference == math.inf


def test_a_gradient_present_in_one_layout_only_does_not_match():
    assert not compare_gradients({"w": torch.tensor([1.0])}, {"w": None}).matches


def test_the_message_names_the_case_and_says_it_is_not_timed():
    comparison = compare_gradients({"w": torch.tensor([1.0])}, {"w": torch.tensor([3.0])})
    message = comparison.describe("mps-fp32-resnet18-bs64-train-channels-last")
    assert message.startswith("mps-fp32-resnet18-bs64-train-channels-last: channels_last gradients differ")
    assert "not timed" in message


class KeywordConvnet(torch.nn.Module):
    """A convnet called with keyword inputs, as sd15-unet is."""

    def __init__(self) -> None:
        super().__init__()
        self.body = small_convnet()

    def forward(self, sample: torch.Tensor, scale: float) -> torch.Tensor:
        return self.body(sample) * scale


def test_keyword_inputs_have_their_4d_tensors_put_in_channels_last():
    model = KeywordConvnet()
    model.body[1] = WrongBatchNormGradient(8)
    inputs, target = images()
    comparison = channels_last_gradients_match(model, {"sample": inputs, "scale": 2.0}, target, F.cross_entropy)
    assert (comparison.matches, comparison.worst_parameter) == (False, "body.1.weight")


def test_a_checked_channels_last_training_case_that_disagrees_is_failed_not_timed(monkeypatch):
    from perfsuite.run import steps
    from perfsuite.run.correctness import GradientComparison
    from perfsuite.workloads import get_workload

    monkeypatch.setattr(backend("cpu"), "checks_channels_last_gradients", True)
    monkeypatch.setattr(
        steps, "channels_last_gradients_match", lambda *args, **kwargs: GradientComparison(False, "bn.weight", 3e6)
    )
    case = Case("cpu", "fp32", "resnet18", 2, "train-channels-last", "smoke")
    with pytest.raises(steps.WrongResult, match=r"channels_last gradients differ .*bn\.weight.*so it is not timed"):
        steps.prepare_case(case, get_workload("resnet18"))


def test_only_mps_is_checked_by_default():
    assert [name for name in DEVICES if backend(name).checks_channels_last_gradients] == ["mps"]


def test_an_entry_near_zero_may_differ_by_a_thousandth_of_the_parameters_largest_gradient():
    reference = {"w": torch.tensor([10.0, 0.0])}
    assert compare_gradients(reference, {"w": torch.tensor([10.0, 0.005])}).matches
    assert not compare_gradients(reference, {"w": torch.tensor([10.0, 0.05])}).matches
