"""The MPS double behaves as the torch release it pretends to be (tests/mps_double/releases.py says what each
release does and where that was read): autocast, the fallback variables, warnings and messages, GradScaler,
BatchNorm2d's channels_last backward, the peak-memory API and the Python API perfsuite reads."""

from __future__ import annotations

import warnings

import pytest
import torch
from mps_double import MacFacts, MpsDouble
from mps_double.releases import (
    AUTOCAST_BF16_BELOW_MACOS_14,
    AUTOCAST_UNSUPPORTED_DTYPE_2_5,
    AUTOCAST_UNSUPPORTED_DTYPE_2_10,
    FLOAT64_ON_MPS,
    NOT_A_DEVICE_ALLOCATOR,
    VIEW_NOT_COMPATIBLE,
    TorchWouldAbort,
    UnknownRelease,
    fallback_enabled,
    profiler_log_options,
)

from perfsuite.run.devices import backend


def install(monkeypatch: pytest.MonkeyPatch, double: MpsDouble) -> MpsDouble:
    double.install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False))
    return double


def pretend(monkeypatch: pytest.MonkeyPatch, torch_version: str, macos: str = "14.5", **options) -> MpsDouble:
    """The double as torch `torch_version` on a Mac with `macos`, installed for this test."""
    return install(monkeypatch, MpsDouble(torch_version=torch_version, mac=MacFacts(macos_version=macos), **options))


def matmul_dtype_under(autocast: torch.autocast) -> torch.dtype:
    """The dtype a matmul gives inside `autocast`: float32 where autocast is off."""
    with autocast:
        return torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype


@pytest.fixture(autouse=True)
def no_fallback_variables(monkeypatch):
    monkeypatch.delenv("PYTORCH_ENABLE_MPS_FALLBACK", raising=False)
    monkeypatch.delenv("PYTORCH_MPS_LOG_PROFILE_INFO", raising=False)


# The release it pretends to be


def test_the_double_pretends_to_be_the_installed_torch_by_default():
    assert MpsDouble().torch_version == str(torch.__version__)


def test_torch_version_reads_as_the_release_the_double_pretends_to_be(monkeypatch):
    pretend(monkeypatch, "2.7.1")
    assert torch.__version__ == "2.7.1" and torch.__version__ < (2, 8)


def test_the_double_has_no_facts_before_the_oldest_release_read():
    with pytest.raises(UnknownRelease, match="no facts for torch 2.0.1"):
        MpsDouble(torch_version="2.0.1")


@pytest.mark.parametrize(("torch_version", "macos", "available"), [
    ("2.5.1", "12.6", True), ("2.6.0", "12.6", False), ("2.8.0", "13.6", True), ("2.9.0", "13.6", False),
])
def test_mps_is_available_on_the_macos_the_release_needs(monkeypatch, torch_version, macos, available):
    pretend(monkeypatch, torch_version, macos)
    assert torch.backends.mps.is_available() is available


# Autocast


def test_autocast_on_mps_before_2_5_raises_as_torch_does(monkeypatch):
    pretend(monkeypatch, "2.4.1")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'mps'"):
        torch.autocast("mps", dtype=torch.float16)


def test_bf16_autocast_on_mps_in_2_5_warns_and_runs_in_fp32(monkeypatch):
    pretend(monkeypatch, "2.5.1")
    with pytest.warns(UserWarning, match="only supports dtype of torch.bfloat16 currently") as warned:
        autocast = torch.autocast("mps", dtype=torch.bfloat16)
    assert str(warned[0].message) == AUTOCAST_UNSUPPORTED_DTYPE_2_5
    assert matmul_dtype_under(autocast) == torch.float32


def test_bf16_autocast_on_mps_below_macos_14_warns_and_runs_in_fp32_on_2_6_to_2_9(monkeypatch):
    pretend(monkeypatch, "2.8.0", macos="13.6")
    with pytest.warns(UserWarning) as warned:
        autocast = torch.autocast("mps", dtype=torch.bfloat16)
    assert [str(w.message) for w in warned] == [AUTOCAST_BF16_BELOW_MACOS_14]
    assert matmul_dtype_under(autocast) == torch.float32


def test_bf16_autocast_on_mps_at_macos_14_casts_to_bf16(monkeypatch):
    pretend(monkeypatch, "2.8.0", macos="14.0")
    assert matmul_dtype_under(torch.autocast("mps", dtype=torch.bfloat16)) == torch.bfloat16


def test_bf16_autocast_from_2_10_no_longer_checks_the_macos(monkeypatch):
    # 2.10-2.12 nest the macOS check inside the unsupported-dtype branch, which bfloat16 never enters.
    pretend(monkeypatch, "2.11.0", macos="13.6")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert matmul_dtype_under(torch.autocast("mps", dtype=torch.bfloat16)) == torch.bfloat16


def test_autocast_without_a_dtype_on_mps_casts_to_fp16(monkeypatch):
    pretend(monkeypatch, "2.13.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert matmul_dtype_under(torch.autocast("mps")) == torch.float16


def test_fp32_autocast_on_mps_warns_and_disables_autocast_as_2_13_does(monkeypatch):
    pretend(monkeypatch, "2.13.0")
    with pytest.warns(UserWarning) as warned:
        autocast = torch.autocast("mps", dtype=torch.float32)
    assert [str(w.message) for w in warned] == [AUTOCAST_UNSUPPORTED_DTYPE_2_10]
    assert matmul_dtype_under(autocast) == torch.float32


def test_fp32_autocast_disabled_on_mps_still_warns_before_2_10(monkeypatch):
    pretend(monkeypatch, "2.9.0")
    with pytest.warns(UserWarning, match="only supports dtype of torch.bfloat16 and torch.float16"):
        torch.autocast("mps", dtype=torch.float32, enabled=False)


def test_fp32_autocast_disabled_on_mps_is_quiet_from_2_10(monkeypatch):
    pretend(monkeypatch, "2.10.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.autocast("mps", dtype=torch.float32, enabled=False)


# The fallback variables: how each release parses them, and when


@pytest.mark.parametrize(("value", "torch_version", "switched_on"), [
    (None, "2.7.1", False), ("1", "2.7.1", True), ("0", "2.7.1", False), ("1abc", "2.7.1", True),
    ("0x1", "2.7.1", False), (" 2", "2.7.1", True), ("-1", "2.7.1", True),
    (None, "2.8.0", False), ("1", "2.8.0", True), ("0", "2.8.0", False), ("abc", "2.8.0", True),
    ("", "2.13.0", True), ("00", "2.13.0", True), ("false", "2.13.0", True),
])
def test_the_fallback_switch_is_parsed_as_the_release_parses_it(value, torch_version, switched_on):
    release = tuple(int(part) for part in torch_version.split("."))
    assert fallback_enabled(value, release) is switched_on


@pytest.mark.parametrize("value", ["abc", "", "99999999999"])
def test_a_fallback_switch_stoi_cannot_read_ends_torch_2_7_as_it_loads(monkeypatch, value):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", value)
    with pytest.raises(TorchWouldAbort, match="libc\\+\\+abi: terminating due to uncaught exception of type std::"):
        pretend(monkeypatch, "2.7.1")


def test_the_fallback_switch_is_read_once_when_the_double_is_installed(monkeypatch):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    double = pretend(monkeypatch, "2.13.0")
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "0")
    with double.falls_back(["aten::mul"]), pytest.warns(UserWarning, match="will fall back to run on the CPU"):
        torch.ones(2) * 2


@pytest.mark.parametrize(("value", "options"), [
    (None, 0), ("4", 4), ("0x4", 4), ("010", 8), ("4abc", 4), ("abc", 0), (" +6", 6), ("1023", 1023),
])
def test_the_profiler_variable_is_parsed_as_strtol_base_0(value, options):
    assert profiler_log_options(value) == options


@pytest.mark.parametrize(("value", "shown"), [("1024", "1024"), ("-1", "4294967295"), ("0x400", "1024")])
def test_profiler_log_options_from_1024_up_raise_the_profilers_error(value, shown):
    with pytest.raises(RuntimeError, match=f"^invalid log options {shown} passed to PYTORCH_MPS_LOG_PROFILE_INFO$"):
        profiler_log_options(value)


def test_the_profiler_variable_is_read_once_at_the_first_mps_work(monkeypatch, capfd):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    double = pretend(monkeypatch, "2.13.0")
    monkeypatch.setenv("PYTORCH_MPS_LOG_PROFILE_INFO", "4")
    with double.tensors_on_cpu():
        torch.ones(2, device="mps")
    monkeypatch.setenv("PYTORCH_MPS_LOG_PROFILE_INFO", "0")
    with double.falls_back(["aten::mul"]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ones(2) * 2
    assert "CPU Fallback::aten::mul:" in capfd.readouterr().err


# The fallback's warning and messages


def test_the_fallback_warns_once_per_process_for_every_op(monkeypatch):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    double = pretend(monkeypatch, "2.13.0")
    with double.falls_back(["aten::mul", "aten::add"]), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.ones(2) * 2 + 1
    assert [str(w.message) for w in warned] == [
        "The operator 'aten::mul.Tensor' is not currently supported on the MPS backend and will fall back to run on "
        "the CPU. This may have performance implications."
    ]


def test_the_fallback_warns_at_every_call_while_warn_always_holds(monkeypatch):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    double = pretend(monkeypatch, "2.13.0")
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with double.falls_back(["aten::mul"]), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            for _ in range(3):
                torch.ones(2) * 2
    finally:
        torch.set_warn_always(warn_always)
    assert len(warned) == 3


def test_the_fallback_warning_names_the_op_with_its_overload_and_the_profiler_line_without(monkeypatch, capfd):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    monkeypatch.setenv("PYTORCH_MPS_LOG_PROFILE_INFO", "4")
    double = pretend(monkeypatch, "2.13.0")
    out = torch.empty(2)
    with double.falls_back(["aten::add"]), pytest.warns(UserWarning, match="The operator 'aten::add.out' is not"):
        torch.add(torch.ones(2), 1, out=out)
    assert "CPU Fallback::aten::add:" in capfd.readouterr().err


def test_an_op_without_fallback_raises_the_2_13_message_with_its_overload(monkeypatch):
    double = pretend(monkeypatch, "2.13.0")
    with double.falls_back(["aten::mul"]), pytest.raises(NotImplementedError) as raised:
        torch.ones(2) * 2
    assert str(raised.value).startswith("The operator 'aten::mul.Tensor' is not currently implemented for the MPS")
    assert "issues/141287" in str(raised.value)


def test_an_op_without_fallback_points_to_issue_77764_before_2_6(monkeypatch):
    double = pretend(monkeypatch, "2.5.1")
    with double.falls_back(["aten::mul"]), pytest.raises(NotImplementedError, match="issues/77764"):
        torch.ones(2) * 2


# GradScaler


def scaled_step(device: str) -> None:
    """One fp16-style training step of a Linear layer through torch.amp.GradScaler on `device`."""
    layer = torch.nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    scaler.scale(layer(torch.ones(2, 4, device=device)).sum()).backward()
    scaler.step(optimizer)
    scaler.update()


def test_grad_scaler_on_mps_fails_casting_the_scale_to_float64_before_2_8(monkeypatch):
    double = pretend(monkeypatch, "2.7.1")
    with double.tensors_on_cpu(), pytest.raises(TypeError) as raised:
        scaled_step("mps")
    assert str(raised.value) == FLOAT64_ON_MPS


def test_grad_scaler_on_mps_steps_from_2_8(monkeypatch):
    double = pretend(monkeypatch, "2.8.0")
    with double.tensors_on_cpu():
        scaled_step("mps")


def test_torch_amp_has_no_grad_scaler_before_2_3(monkeypatch):
    pretend(monkeypatch, "2.2.2")
    assert not hasattr(torch.amp, "GradScaler")


# BatchNorm2d backward on channels_last input


def batchnorm_gradients(channels_last: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input, weight, bias) gradients of one BatchNorm2d training step on a fixed input."""
    torch.manual_seed(0)
    norm = torch.nn.BatchNorm2d(3)
    x = torch.randn(4, 3, 5, 6)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    x.requires_grad_()
    (norm(x) * torch.arange(x.numel()).reshape(x.shape)).sum().backward()
    return x.grad, norm.weight.grad, norm.bias.grad


def test_batchnorm_channels_last_backward_gives_wrong_input_and_weight_gradients_on_mps(monkeypatch):
    double = pretend(monkeypatch, "2.13.0")
    with double.tensors_on_cpu():
        contiguous, channels_last = batchnorm_gradients(False), batchnorm_gradients(True)
    agreeing = [torch.allclose(a, b, atol=1e-4) for a, b in zip(contiguous, channels_last, strict=True)]
    assert agreeing == [False, False, True]  # input, weight, bias


def test_batchnorm_channels_last_backward_raises_the_view_error_on_macos_26(monkeypatch):
    double = pretend(monkeypatch, "2.13.0", macos="26.0")
    with double.tensors_on_cpu(), pytest.raises(RuntimeError) as raised:
        batchnorm_gradients(True)
    assert str(raised.value) == VIEW_NOT_COMPATIBLE


@pytest.mark.parametrize("torch_version", ["2.14.0", "2.14.1", "2.15.0"])
def test_batchnorm_channels_last_backward_is_right_from_the_fix_in_2_14(monkeypatch, torch_version):
    double = pretend(monkeypatch, torch_version)
    with double.tensors_on_cpu():
        contiguous, channels_last = batchnorm_gradients(False), batchnorm_gradients(True)
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(contiguous, channels_last, strict=True))


def test_perfsuites_channels_last_gradient_check_catches_a_batchnorm_network_on_mps(monkeypatch):
    from perfsuite.run.steps import channels_last_gradients_match

    double = pretend(monkeypatch, "2.13.0")
    torch.manual_seed(0)
    network = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(4, 2),
    )
    with double.tensors_on_cpu():
        network, inputs = network.to("mps"), torch.randn(4, 3, 8, 8, device="mps")
        target = torch.tensor([0, 1, 1, 0], device="mps")
        comparison = channels_last_gradients_match(network, inputs, target, torch.nn.functional.cross_entropy)
    assert not comparison.matches


# Peak memory and the Python API perfsuite reads


def test_before_2_9_torch_accelerator_has_no_memory_statistics_and_mps_reports_the_driver_figure(monkeypatch):
    double = pretend(monkeypatch, "2.8.0")
    with double.tensors_on_cpu():
        assert not hasattr(torch.accelerator, "memory_stats")
        assert backend("mps").memory_figure_name() == "mps_driver_allocated_bytes"


def test_on_2_9_to_2_12_the_memory_statistics_raise_the_allocators_error_on_mps(monkeypatch):
    double = pretend(monkeypatch, "2.12.0")
    with double.tensors_on_cpu(), pytest.raises(RuntimeError, match=NOT_A_DEVICE_ALLOCATOR):
        torch.accelerator.memory_stats()


def test_from_2_13_mps_reports_the_allocator_peak(monkeypatch):
    double = pretend(monkeypatch, "2.13.0")
    with double.tensors_on_cpu():
        assert backend("mps").memory_figure_name() == "mps_max_allocated_bytes"


@pytest.mark.parametrize(("torch_version", "present"), [
    ("2.3.1", (False, False)), ("2.4.1", (True, False)), ("2.5.1", (True, True)),
])
def test_torch_mps_gains_device_count_in_2_4_and_recommended_max_memory_in_2_5(monkeypatch, torch_version, present):
    pretend(monkeypatch, torch_version)
    assert (hasattr(torch.mps, "device_count"), hasattr(torch.mps, "recommended_max_memory")) == present
