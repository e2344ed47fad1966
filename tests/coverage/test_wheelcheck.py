"""The wheel check's parsing: MPS kernel names from a binary's symbols, the macOS a wheel needs, and the comparison
with the table, on small hand-made inputs."""

from __future__ import annotations

import pytest

from perfsuite.coverage.support import OpSupport, Verdict
from perfsuite.coverage.wheelcheck import (
    OpAgreement,
    WheelCheck,
    compare_ops,
    mps_minimum_macos_in_binary,
    mps_wrapper_names,
    render_check,
    wheel_macos_tag,
    wheel_min_macos_for_mps,
    wrapper_names_by_op,
)

# Excerpts of libtorch_cpu.dylib's strings in torch 2.13.0's macOS arm64 wheel.
SYMBOLS = (
    b"__ZN2at12_GLOBAL__N_122wrapper_MPS_add_TensorERKNS_6TensorES3_RKN3c106ScalarE\x00"
    b"__ZN2at12_GLOBAL__N_123wrapper_MPS_add_out_outERKNS_6TensorES3_RKN3c106ScalarERS1_\x00"
    b"wrapper_MPS__native_batch_normESA_SE_SE_SE_SE_bddEEEES8_NS_4guts8typelist\x00"
    b"__ZN2at12_GLOBAL__N_130wrapper_MPS__native_batch_normERKNS_6TensorE\x00"
    b"The MPS backend is supported on macOS 14.0+. Current OS version can be queried using `sw_vers`\x00"
)


def test_kernel_names_are_cut_at_the_length_their_symbol_declares():
    assert mps_wrapper_names(SYMBOLS) == {
        "wrapper_MPS_add_Tensor", "wrapper_MPS_add_out_out", "wrapper_MPS__native_batch_norm",
    }


def test_a_name_without_its_length_prefix_is_not_taken():
    assert mps_wrapper_names(b"wrapper_MPS__native_batch_normESA_SE_\x00") == set()


def test_the_binary_message_gives_the_macos_mps_needs():
    assert mps_minimum_macos_in_binary(SYMBOLS) == (14, 0)


def test_the_older_spelling_of_the_message_is_read_too():
    assert mps_minimum_macos_in_binary(b"The MPS backend is supported on MacOS 13.0+.") == (13, 0)


@pytest.mark.parametrize(("filename", "tag"), [
    ("torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl", (14, 0)),
    ("torch-2.10.0-2-cp311-none-macosx_11_0_arm64.whl", (11, 0)),
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", None),
])
def test_the_wheel_tag_gives_the_macos_the_wheel_installs_on(filename, tag):
    assert wheel_macos_tag(filename) == tag


def test_a_wheel_that_installs_on_macos_11_but_says_mps_needs_14_needs_14():
    assert wheel_min_macos_for_mps((11, 0), (14, 0)) == (14, 0)


@pytest.mark.parametrize(("op", "name"), [
    ("add.Tensor", "wrapper_MPS_add_Tensor"),  # functional variant of a structured group
    ("add_.Tensor", "wrapper_MPS_add__Tensor"),  # in-place variant of a structured group
    ("add.out", "wrapper_MPS_add_out_out"),  # the structured out kernel
    ("native_batch_norm", "wrapper_MPS__native_batch_norm"),  # unstructured, no overload
    ("fill_.Scalar", "wrapper_MPS_Scalar_fill_"),  # unstructured in-place
    ("native_batch_norm.out", "wrapper_MPS_out_native_batch_norm_out"),  # unstructured out
])
def test_kernel_names_follow_torchgens_naming(op, name):
    assert wrapper_names_by_op()[op] == name


def lookup_from(verdicts: dict[str, Verdict]):
    return lambda op: OpSupport(op, verdicts[op], "")


def test_a_native_op_with_its_kernel_in_the_binary_agrees():
    (agreement,) = compare_ops(["aten::relu"], lookup_from({"aten::relu": Verdict.NATIVE}),
                               {"relu": "wrapper_MPS__relu"}, {"wrapper_MPS__relu"}, set())
    assert agreement == OpAgreement("aten::relu", True, True) and agreement.agrees


def test_a_native_op_without_its_kernel_in_the_binary_disagrees():
    (agreement,) = compare_ops(["aten::relu"], lookup_from({"aten::relu": Verdict.NATIVE}),
                               {"relu": "wrapper_MPS__relu"}, set(), set())
    assert not agreement.agrees


def test_a_python_kernel_missing_from_the_binary_is_explained():
    (agreement,) = compare_ops(["aten::erfinv"], lookup_from({"aten::erfinv": Verdict.NATIVE}),
                               {"erfinv": "wrapper_MPS_erfinv"}, set(), {"erfinv"})
    assert agreement.agrees and agreement.explained_by is not None


def test_two_ops_sharing_a_kernel_name_cannot_be_told():
    names = {"_linalg_det": "wrapper_MPS__linalg_det", "linalg_det": "wrapper_MPS__linalg_det"}
    verdicts = {"aten::_linalg_det": Verdict.NATIVE, "aten::linalg_det": Verdict.COMPOSITE}
    agreements = compare_ops(verdicts, lookup_from(verdicts), names, {"wrapper_MPS__linalg_det"}, set())
    assert [a.binary_native for a in agreements] == [None, None]


def check_with(model_ops: tuple[OpAgreement, ...], wheel_tag=(14, 0), in_binary=(14, 0)) -> WheelCheck:
    return WheelCheck("2.13.0", "torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl", model_ops, model_ops, (14, 0),
                      wheel_tag, in_binary)


def test_the_report_counts_agreement_and_passes_when_all_agree():
    report = render_check(check_with((OpAgreement("aten::relu", True, True), OpAgreement("aten::mm", True, True))))
    assert "ops the models use: table and libtorch_cpu.dylib agree on 2/2" in report
    assert report.splitlines()[-1] == "passed"


def test_a_disagreeing_op_fails_the_check_and_is_named():
    check = check_with((OpAgreement("aten::relu", True, False),))
    assert not check.passed and "differs: aten::relu: table native, binary not registered" in render_check(check)


def test_a_macos_minimum_other_than_the_tables_fails_the_check():
    check = check_with((OpAgreement("aten::relu", True, True),), wheel_tag=(11, 0), in_binary=(13, 0))
    assert not check.passed and "table 14.0, wheel 13.0" in render_check(check)
