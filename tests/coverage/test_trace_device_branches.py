"""The trace follows the path MPS would take where torch.nn chooses a path by device type: a TransformerEncoderLayer
in inference takes its fused fast path (`aten::_transformer_encoder_layer_fwd`, no MPS kernel) on the CPU, never on
MPS, so coverage must trace its layers instead."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest
import torch

from perfsuite import Workload
from perfsuite.coverage.allowlist import Allowlist
from perfsuite.coverage.check import static_check
from perfsuite.coverage.support import Verdict
from perfsuite.coverage.trace import MPS_EXCLUDED_FAST_PATHS, OpRecorder, trace_workload

FAST_PATH_OP = "aten::_transformer_encoder_layer_fwd"
# The device types a fast path lists: `_supported_device_type = [...]` or `x.device.type in [...]`.
_DEVICE_TYPE_LIST = re.compile(r"(?:_supported_device_type\s*=|\.device\.type\s+in)\s*\[([^\]]*)\]")


def encoder_layer() -> torch.nn.Module:
    """A batch_first encoder layer that meets the fast path's conditions in eval mode without grad."""
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)


ENCODER = Workload(
    name="encoder-layer", build_module=lambda profile: encoder_layer(), batch_sizes={"smoke": (2,)},
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 5, 16),
)


def ops_on_the_cpu_path() -> set[str]:
    """The ops the layer runs in inference on plain CPU tensors, as the CPU would choose them."""
    layer, inputs, recorder = encoder_layer().eval(), torch.randn(2, 5, 16), OpRecorder()
    with recorder, torch.inference_mode():
        layer(inputs)
    return {count.op for count in recorder.counts()}


def ops_on_the_mps_path() -> set[str]:
    return {count.op for count in trace_workload(ENCODER, modes=("infer",)).counts}


def test_on_the_cpu_path_the_encoder_layer_runs_its_fused_fast_path():
    assert ops_on_the_cpu_path() == {FAST_PATH_OP}


def test_on_the_mps_path_the_encoder_layer_runs_its_layers_instead():
    ops = ops_on_the_mps_path()
    assert FAST_PATH_OP not in ops
    assert {"aten::layer_norm", "aten::linear", "aten::scaled_dot_product_attention", "aten::relu"} <= ops


def test_coverage_flags_no_fallback_for_the_encoder_layer():
    report = static_check(ENCODER, Allowlist(source="none"), modes=("infer",))
    assert report.coverage.with_verdict(Verdict.FALLBACK) == ()


def test_the_fast_path_switch_is_restored_after_the_trace():
    ops_on_the_mps_path()
    assert torch.backends.mha.get_fastpath_enabled()


@pytest.mark.parametrize("fast_path", MPS_EXCLUDED_FAST_PATHS, ids=lambda path: path.module)
def test_the_installed_torch_still_keeps_each_fast_path_off_mps(fast_path):
    module_name, _, qualified = fast_path.device_types_in.partition(".modules.")
    module = importlib.import_module(f"{module_name}.modules.{qualified.split('.')[0]}")
    function = module
    for part in qualified.split(".")[1:]:
        function = getattr(function, part)
    lists = _DEVICE_TYPE_LIST.findall(inspect.getsource(function))
    assert lists, f"{fast_path.device_types_in} lists no device types any more: re-read it"
    assert not any('"mps"' in listed for listed in lists), (
        f"{fast_path.device_types_in} now lets MPS take the fast path ({fast_path.fused_op}): stop turning it off"
    )
