"""The MPS skip rules of the case matrix: which torch and macOS releases cannot run which cases, and why."""

from __future__ import annotations

import pytest
import torch

from perfsuite.matrix import mps_support
from perfsuite.matrix.cases import Case, DeviceFacts
from perfsuite.matrix.cases import skip_reason as matrix_skip_reason
from perfsuite.run.devices import with_device_rules
from perfsuite.workloads import model_facts, registered_workloads

TRAINING_MODES = ("train", "train-checkpoint", "train-channels-last", "train-ddp")


def mac(torch_version: tuple[int, int], macos_version: tuple[int, int] = (15, 0)) -> DeviceFacts:
    return with_device_rules(
        DeviceFacts(unavailable_reasons={}, torch_version=torch_version, macos_version=macos_version)
    )


def skip_reason(case: Case, facts: DeviceFacts) -> str | None:
    return matrix_skip_reason(case, model_facts()[case.model], facts)


def mps_case(dtype: str, model: str, mode: str) -> Case:
    return Case("mps", dtype, model, 8, mode, "smoke")


# fp16 autocast and GradScaler


def test_fp16_inference_on_mps_needs_torch_2_5_for_autocast():
    reason = skip_reason(mps_case("fp16", "bert-base", "infer"), mac((2, 4)))
    assert reason == "fp16 autocast on MPS needs torch >= 2.5 (installed 2.4)"


def test_fp16_inference_on_mps_runs_from_torch_2_5():
    assert skip_reason(mps_case("fp16", "bert-base", "infer"), mac((2, 5))) is None


@pytest.mark.parametrize("mode", TRAINING_MODES)
def test_every_fp16_training_mode_on_mps_needs_torch_2_8_for_grad_scaler(mode):
    reason = skip_reason(mps_case("fp16", "bert-base", mode), mac((2, 7)))
    assert reason == "GradScaler on MPS (fp16 training) needs torch >= 2.8 (installed 2.7)"


def test_bf16_on_mps_at_macos_14_0_is_not_skipped():
    assert skip_reason(mps_case("bf16", "bert-base", "infer"), mac((2, 13), (14, 0))) is None


# fp16 convolution backward (pytorch/pytorch#119108)


@pytest.mark.parametrize("model", ["resnet18", "sd15-unet"])
@pytest.mark.parametrize("mode", ["train", "train-checkpoint", "train-channels-last"])
def test_fp16_training_of_a_convolutional_model_on_mps_is_guarded(model, mode):
    reason = skip_reason(mps_case("fp16", model, mode), mac((2, 13)))
    assert reason is not None and "pytorch/pytorch#119108" in reason


def test_fp16_inference_of_a_convolutional_model_on_mps_runs():
    assert skip_reason(mps_case("fp16", "resnet18", "infer"), mac((2, 13))) is None


def test_fp16_training_of_a_model_without_convolutions_on_mps_runs():
    assert skip_reason(mps_case("fp16", "bert-base", "train"), mac((2, 13))) is None


@pytest.mark.parametrize("torch_release", [(2, 14), (2, 15)])
def test_fp16_convolution_guard_holds_while_torchs_own_tests_skip_it(torch_release):
    reason = skip_reason(mps_case("fp16", "resnet18", "train"), mac(torch_release))
    assert reason is not None and f"torch {mps_support.dotted(torch_release)}'s own MPS tests skip it" in reason


def test_fp16_convolution_guard_holds_unchecked_for_a_torch_newer_than_the_newest_read():
    reason = skip_reason(mps_case("fp16", "resnet18", "train"), mac((2, 16)))
    assert reason is not None and "torch 2.15.0's own MPS tests still skip it" in reason
    assert "unchecked for torch 2.16: assumed as in torch 2.15.0" in reason


def test_the_workloads_declaring_convolution_training_are_the_trainable_ones_with_conv2d_layers():
    with_conv = [
        name
        for name, workload in registered_workloads().items()
        if workload.trainable
        and any(isinstance(m, torch.nn.Conv2d) for m in workload.build_module("smoke").modules())
    ]
    declared = [name for name, facts in model_facts().items() if facts.trains_convolutions]
    assert sorted(with_conv) == sorted(declared)


# BatchNorm2d channels_last backward (pytorch/pytorch#175189)


def test_resnet18_train_channels_last_on_mps_is_skipped_with_the_issue():
    reason = skip_reason(mps_case("fp32", "resnet18", "train-channels-last"), mac((2, 13)))
    assert reason is not None and "pytorch/pytorch#175189" in reason and "wrong gradients" in reason


def test_resnet18_infer_channels_last_on_mps_runs():
    assert skip_reason(mps_case("fp32", "resnet18", "infer-channels-last"), mac((2, 13))) is None


def test_sd15_unet_train_channels_last_on_mps_runs():
    assert skip_reason(mps_case("fp32", "sd15-unet", "train-channels-last"), mac((2, 13))) is None


def test_resnet18_train_channels_last_on_the_cpu_runs():
    case = Case("cpu", "fp32", "resnet18", 8, "train-channels-last", "smoke")
    assert skip_reason(case, mac((2, 13))) is None


@pytest.mark.parametrize("torch_release", [(2, 14), (2, 15), (2, 16)])
def test_batchnorm_guard_ends_with_the_fix_in_torch_2_14(torch_release):
    assert skip_reason(mps_case("fp32", "resnet18", "train-channels-last"), mac(torch_release)) is None


def test_the_workloads_declaring_batchnorm_are_the_ones_with_batchnorm2d_layers():
    with_batchnorm = [
        name
        for name, workload in registered_workloads().items()
        if any(isinstance(m, torch.nn.BatchNorm2d) for m in workload.build_module("smoke").modules())
    ]
    declared = [name for name, facts in model_facts().items() if facts.has_batchnorm]
    assert sorted(with_batchnorm) == sorted(declared)


# The macOS each torch release needs for MPS


@pytest.mark.parametrize(
    ("torch_release", "macos"),
    [((2, 0), (12, 3)), ((2, 5), (12, 3)), ((2, 6), (13, 0)), ((2, 8), (13, 0)), ((2, 9), (14, 0)), ((2, 13), (14, 0)),
     ((2, 14, 1), (14, 0)), ((2, 15), (15, 0))],
)
def test_minimum_macos_for_mps_follows_the_torch_release(torch_release, macos):
    assert mps_support.min_macos_for_mps(torch_release) == macos


def test_minimum_macos_for_an_unknown_torch_is_the_oldest_requirement():
    assert mps_support.min_macos_for_mps(None) == (12, 3)


def test_a_patch_release_is_at_most_its_minor_release():
    assert mps_support.is_at_most((2, 13, 1), (2, 13)) and not mps_support.is_at_most((2, 14, 0), (2, 13))


@pytest.mark.parametrize(("torch_release", "checked"), [
    ((2, 13, 0), True), ((2, 14, 1), True), ((2, 15), True), ((2, 15, 0), True), ((2, 15, 1), False), ((2, 16), False),
    ((2, 16, 0), False), ((3, 0), False),
])
def test_a_release_after_the_newest_read_is_unchecked(torch_release, checked):
    assert mps_support.is_checked(torch_release) is checked


def test_the_unusable_hint_of_torch_2_16_says_its_macos_is_assumed_from_2_15():
    assert mps_support.mps_unusable_hint((2, 16, 0)).endswith(
        "(unchecked for torch 2.16.0: assumed as in torch 2.15.0, the newest release whose macOS wheel was read)"
    )


def test_the_unusable_hint_of_torch_2_15_names_macos_15_and_a_reachable_metal_gpu():
    hint = mps_support.mps_unusable_hint((2, 15, 0))
    assert hint.startswith("macOS >= 15.0 on Apple silicon") and "virtual machine, sandbox or container" in hint
    assert "unchecked" not in hint


@pytest.mark.parametrize(("macos", "torch_release"), [((14, 5), (2, 14)), ((13, 6), (2, 8)), ((15, 0), None)])
def test_the_newest_torch_for_a_macos_is_the_last_before_a_newer_requirement(macos, torch_release):
    assert mps_support.newest_torch_for_macos(macos) == torch_release


@pytest.mark.parametrize(("torch_release", "gpu_stamped"), [((2, 13, 0), False), ((2, 14, 1), False),
                                                            ((2, 15, 0), True), ((2, 16, 0), False)])
def test_mps_events_are_read_as_gpu_stamps_only_where_a_release_read_stamps_them_on_the_gpu(torch_release, gpu_stamped):
    assert mps_support.mps_gpu_event_times(torch_release) is gpu_stamped


def test_the_assumed_facts_note_is_none_for_a_release_read():
    assert mps_support.assumed_facts_note((2, 15, 0)) is None and mps_support.assumed_facts_note(None) is None


def test_macos_14_counts_as_14_0():
    assert mps_support.is_at_least((14,), (14, 0))


# torch.compile's inductor on MPS


def test_inductor_on_mps_before_2_7_is_skipped_for_want_of_an_mps_backend():
    assert mps_support.mps_inductor_skip_reason((2, 6)) == (
        "torch.compile's inductor has no MPS backend before torch 2.7 (installed 2.6)"
    )


def test_inductor_on_mps_in_2_7_is_skipped_as_the_prototype_torch_warns_it_is():
    reason = mps_support.mps_inductor_skip_reason((2, 7, 1))
    assert reason is not None
    assert "torch 2.7.1's inductor backend for MPS is an early prototype" in reason
    assert "pytorch/pytorch#150121" in reason and "from torch 2.8" in reason


@pytest.mark.parametrize("torch_release", [(2, 8), (2, 13)])
def test_inductor_on_mps_runs_from_2_8(torch_release):
    assert mps_support.mps_inductor_skip_reason(torch_release) is None
