"""The MPS support table: how an op's kernels and the recorded facts decide its verdict."""

import pytest

from perfsuite.coverage.facts import AlwaysFallback, MpsChoiceInsideComposite, MpsFacts, PythonMpsKernel
from perfsuite.coverage.support import (
    COMPOSITE_EXPLICIT,
    COMPOSITE_IMPLICIT,
    OpKernels,
    Verdict,
    classify_op,
    installed_mps_support_table,
)

NO_FACTS = MpsFacts(checked_torch_versions=("2.13.0",))
KERNELS = {
    "relu": OpKernels("relu", has_mps_kernel=True, device_kernels=("CPU", "CUDA", "MPS")),
    "add.Tensor": OpKernels("add.Tensor", False, structured_delegate="add.out", delegate_has_mps_kernel=True),
    "embedding": OpKernels("embedding", False, composite_key=COMPOSITE_EXPLICIT),
    "reshape": OpKernels("reshape", False, composite_key=COMPOSITE_IMPLICIT),
    "take": OpKernels("take", False, device_kernels=("CPU", "CUDA")),
    "_flash_for_cpu": OpKernels("_flash_for_cpu", False, device_kernels=("CPU",)),
    "_convolution": OpKernels("_convolution", False, composite_key=COMPOSITE_EXPLICIT),
    "_mps_convolution": OpKernels("_mps_convolution", True, device_kernels=("MPS",)),
    "linalg_svd": OpKernels("linalg_svd", False, composite_key=COMPOSITE_IMPLICIT),
    "_linalg_svd": OpKernels("_linalg_svd", False, device_kernels=("CPU", "CUDA")),
    "native_group_norm_backward": OpKernels("native_group_norm_backward", False, device_kernels=("CPU", "CUDA")),
}


def verdict_of(op, facts=NO_FACTS):
    return classify_op(op, KERNELS, facts).verdict


def test_an_op_with_an_mps_kernel_in_the_yaml_is_native():
    assert verdict_of("aten::relu") is Verdict.NATIVE


def test_a_structured_op_inherits_the_mps_kernel_of_its_out_variant():
    assert verdict_of("aten::add.Tensor") is Verdict.NATIVE


@pytest.mark.parametrize("op", ["aten::embedding", "aten::reshape"])
def test_an_op_with_only_a_composite_kernel_is_composite(op):
    assert verdict_of(op) is Verdict.COMPOSITE


def test_a_composite_op_names_the_kernel_the_tracer_should_follow():
    assert classify_op("aten::embedding", KERNELS, NO_FACTS).composite_key == COMPOSITE_EXPLICIT


def test_an_op_with_only_cpu_and_cuda_kernels_falls_back():
    assert verdict_of("aten::take") is Verdict.FALLBACK


def test_a_cpu_only_kernel_says_it_may_have_been_picked_by_the_cpu_path():
    assert "composite op picked it for the CPU trace" in classify_op("aten::_flash_for_cpu", KERNELS, NO_FACTS).reason


def test_an_op_missing_from_the_yaml_is_unknown():
    assert verdict_of("aten::not_an_op") is Verdict.UNKNOWN


def test_an_op_of_another_namespace_is_unknown():
    assert verdict_of("torchvision::nms") is Verdict.UNKNOWN


def test_an_op_registered_to_the_cpu_fallback_falls_back_even_with_a_composite_kernel():
    facts = MpsFacts(("2.13.0",), always_cpu_fallback=(AlwaysFallback("linalg_svd", ">=2.4", "MPSFallback.mm"),))
    assert verdict_of("aten::linalg_svd", facts) is Verdict.FALLBACK


def test_the_cpu_trace_of_an_intercepted_composite_is_blamed_on_the_composite():
    facts = MpsFacts(("2.13.0",), always_cpu_fallback=(
        AlwaysFallback("linalg_svd", ">=2.4", "MPSFallback.mm", traced_as=("_linalg_svd",)),))
    assert "MPS runs linalg_svd" in classify_op("aten::_linalg_svd", KERNELS, facts).reason


def test_a_kernel_registered_from_python_keeps_the_op_on_mps():
    facts = MpsFacts(("2.12.0",), python_mps_kernels=(
        PythonMpsKernel("native_group_norm_backward", ">=2.4,<2.13", "torch._decomp...", "backends/mps"),))
    assert verdict_of("aten::native_group_norm_backward", facts) is Verdict.COMPOSITE


def test_a_composite_that_picks_an_mps_kernel_inside_is_judged_by_that_kernel():
    facts = MpsFacts(("2.13.0",), mps_choice_inside_composite=(
        MpsChoiceInsideComposite("_convolution", ">=2.4", ("_mps_convolution",), "Convolution.cpp"),))
    support = classify_op("aten::_convolution", KERNELS, facts)
    assert (support.verdict, support.runs_on_mps, support.composite_key) == (
        Verdict.COMPOSITE, ("_mps_convolution",), None)


def test_a_composite_that_picks_a_kernel_without_mps_support_falls_back():
    facts = MpsFacts(("2.13.0",), mps_choice_inside_composite=(
        MpsChoiceInsideComposite("_convolution", ">=2.4", ("take",), "Convolution.cpp"),))
    assert verdict_of("aten::_convolution", facts) is Verdict.FALLBACK


def test_a_suggestion_from_the_facts_comes_with_the_verdict():
    facts = MpsFacts(("2.13.0",), suggestions={"take": "use gather"})
    assert classify_op("aten::take", KERNELS, facts).suggestion == "use gather"


# The installed torch's own yaml, parsed by its torchgen.

@pytest.mark.parametrize("op, verdict", [
    ("aten::add.Tensor", Verdict.NATIVE),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", Verdict.FALLBACK),
    ("aten::embedding_renorm_", Verdict.FALLBACK),
    ("aten::_convolution", Verdict.COMPOSITE),
])
def test_the_installed_torch_table_gives_the_expected_verdict(op, verdict):
    assert installed_mps_support_table().lookup(op).verdict is verdict


@pytest.mark.parametrize("op", ["aten::native_group_norm", "aten::native_group_norm_backward"])
def test_group_norm_does_not_fall_back_on_the_installed_torch(op):
    # A native kernel from 2.13, a Python decomposition registered for MPS before: never the CPU.
    assert installed_mps_support_table().lookup(op).verdict is not Verdict.FALLBACK
