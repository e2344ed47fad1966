"""The wheel check's parsing and verdict on small hand-made inputs: MPS kernel names from a binary's symbols, the
macOS a wheel needs, the ops MPSFallback.mm sends to the CPU and the event stamps read from arm64 code in a
hand-built Mach-O image, torch's own fp16 convolution skip, and a verdict that fails on any disagreement it can see.
What it found in the real wheels of 2.13.0 to 2.15.0 is in docs/wheelcheck-2.14-2.15.md."""

from __future__ import annotations

import struct
import zipfile
from dataclasses import replace

import pytest

from perfsuite.coverage.support import OpSupport, Verdict, native_yaml_paths
from perfsuite.coverage.wheelbinary import (
    BinaryReadError,
    called,
    events_stamped_on_gpu,
    mps_fallback_block,
    read_macho,
    references,
    registrations,
)
from perfsuite.coverage.wheelcheck import (
    OpAgreement,
    WheelCheck,
    compare_ops,
    fp16_convolution_backward_skipped,
    kernels_of,
    main,
    mps_minimum_macos_in_binary,
    mps_wrapper_names,
    read_wheel_yaml,
    render_check,
    wheel_macos_tag,
    wheel_min_macos_for_mps,
    wheel_version,
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


def test_the_2_15_message_gives_macos_15():
    assert mps_minimum_macos_in_binary(b"mps_unavailable_error\x00The MPS backend is supported on macOS 15.0+. ") == (
        15, 0)


@pytest.mark.parametrize(("filename", "tag"), [
    ("torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl", (14, 0)),
    ("torch-2.10.0-2-cp311-none-macosx_11_0_arm64.whl", (11, 0)),
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", None),
])
def test_the_wheel_tag_gives_the_macos_the_wheel_installs_on(filename, tag):
    assert wheel_macos_tag(filename) == tag


def test_a_wheel_that_installs_on_macos_14_but_says_mps_needs_15_needs_15():
    assert wheel_min_macos_for_mps((14, 0), (15, 0)) == (15, 0)


@pytest.mark.parametrize(("filename", "version"), [
    ("torch-2.15.0-cp311-cp311-macosx_14_0_arm64.whl", "2.15.0"),
    ("/somewhere/torch-2.10.0-2-cp311-none-macosx_11_0_arm64.whl", "2.10.0"),
])
def test_the_release_comes_from_the_wheels_name(filename, version):
    assert wheel_version(filename) == version


def test_a_name_that_is_not_a_torch_wheels_is_refused_naming_it():
    with pytest.raises(ValueError, match="numpy-2.0.whl: not a torch wheel's name"):
        wheel_version("numpy-2.0.whl")


@pytest.mark.slow
@pytest.mark.parametrize(("op", "name"), [
    ("add.Tensor", "wrapper_MPS_add_Tensor"),  # functional variant of a structured group
    ("add_.Tensor", "wrapper_MPS_add__Tensor"),  # in-place variant of a structured group
    ("add.out", "wrapper_MPS_add_out_out"),  # the structured out kernel
    ("native_batch_norm", "wrapper_MPS__native_batch_norm"),  # unstructured, no overload
    ("fill_.Scalar", "wrapper_MPS_Scalar_fill_"),  # unstructured in-place
    ("native_batch_norm.out", "wrapper_MPS_out_native_batch_norm_out"),  # unstructured out
])
def test_kernel_names_follow_torchgens_naming(installed_yaml_ops, op, name):
    assert installed_yaml_ops[1][op] == name


@pytest.fixture(scope="module")
def installed_yaml_ops(tmp_path_factory):
    """The installed torch's yaml, read as the check reads a wheel's: torchgen zipped as in a wheel, extracted and
    run in a process of its own."""
    from pathlib import Path

    import torchgen

    package = Path(torchgen.__file__).parent
    wheel_path = tmp_path_factory.mktemp("wheel") / "torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl"
    with zipfile.ZipFile(wheel_path, "w") as wheel:
        for path in package.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                wheel.write(path, f"torchgen/{path.relative_to(package)}")
    with zipfile.ZipFile(wheel_path) as wheel:
        return kernels_of(read_wheel_yaml(wheel, tmp_path_factory.mktemp("extracted")))


@pytest.mark.slow
def test_the_wheels_yaml_is_read_with_its_own_torchgen_to_the_tables_kernels(installed_yaml_ops):
    from perfsuite.coverage.support import read_native_functions

    kernels, _ = installed_yaml_ops
    assert kernels == read_native_functions(*native_yaml_paths())


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


# The verdict

RELU = OpAgreement("aten::relu", True, True)
MM = OpAgreement("aten::mm", True, True)


def check_with(model_ops=(RELU, MM), all_ops=(RELU, MM), **changes) -> WheelCheck:
    check = WheelCheck(
        torch_version="2.15.0", wheel="torch-2.15.0-cp311-cp311-macosx_14_0_arm64.whl", traced_with="2.13.0+cpu",
        model_ops=model_ops, all_ops=all_ops, fallback_in_binary=("embedding_renorm_",),
        fallback_in_facts=("embedding_renorm_",), table_min_macos=(15, 0), wheel_tag_macos=(14, 0),
        binary_min_macos=(15, 0), fp16_convolution_skipped_by_torch=True, fp16_convolution_guarded=True,
        events_on_gpu=True, events_read_as_gpu=True,
    )
    return replace(check, **changes)


def test_the_report_counts_agreement_and_passes_when_all_agree():
    report = render_check(check_with())
    assert ("ops the models use (traced with the installed torch 2.13.0+cpu): 2 ops, 2 told apart by the binary: "
            "table and libtorch_cpu.dylib agree on 2/2") in report
    assert report.splitlines()[-1] == "passed"


def test_a_disagreeing_op_of_the_yaml_fails_the_check_though_no_model_uses_it():
    check = check_with(all_ops=(RELU, MM, OpAgreement("aten::_linalg_svd.U", False, True)))
    report = render_check(check)
    assert not check.passed and "differs: aten::_linalg_svd.U: table not native, binary registered" in report
    assert report.splitlines()[-1] == "FAILED: 1 op(s) differ"


def test_a_disagreeing_model_op_fails_the_check_and_is_named():
    check = check_with(model_ops=(OpAgreement("aten::relu", True, False),))
    assert not check.passed and "differs: aten::relu: table native, binary not registered" in render_check(check)


def test_ops_the_binary_cannot_tell_apart_are_counted_apart_and_do_not_pass_or_fail_the_check():
    shared = (OpAgreement("aten::_linalg_det", True, None), OpAgreement("aten::linalg_det", False, None))
    check = check_with(all_ops=(RELU, *shared))
    report = render_check(check)
    assert check.passed and check.cannot_tell == ("aten::_linalg_det", "aten::linalg_det")
    assert "every op of the wheel's native_functions.yaml: 3 ops, 1 told apart by the binary" in report
    assert "cannot tell apart (2 ops whose MPS kernels share one name, not counted above): aten::_linalg_det, " \
           "aten::linalg_det" in report


def test_a_fallback_op_the_facts_keep_but_the_binary_dropped_fails_the_check():
    check = check_with(fallback_in_facts=("embedding_renorm_", "linalg_svd", "linalg_svd.U"))
    report = render_check(check)
    assert not check.passed
    assert ("ops MPSFallback.mm sends to the CPU: binary embedding_renorm_; facts embedding_renorm_, linalg_svd, "
            "linalg_svd.U: DIFFER") in report


def test_an_unreadable_fallback_block_cannot_judge_and_never_passes():
    check = check_with(fallback_in_binary=None, fallback_unread="no symbol for torch::Library::_impl")
    assert not check.passed and "CANNOT JUDGE" in render_check(check)


def test_a_macos_minimum_other_than_the_tables_fails_the_check():
    check = check_with(table_min_macos=(14, 0))
    assert not check.passed and "table 14.0, wheel 15.0 (platform tag 14.0, binary message 15.0): DIFFER" in (
        render_check(check))


def test_a_guard_torch_no_longer_needs_fails_the_check():
    check = check_with(fp16_convolution_skipped_by_torch=False)
    assert not check.passed and "the fp16 convolution guard differs" in render_check(check)


def test_event_stamps_other_than_the_facts_say_fail_the_check():
    check = check_with(events_read_as_gpu=False)
    assert not check.passed and "the event stamps differ" in render_check(check)


def test_a_release_newer_than_the_newest_read_is_reported_unchecked_even_when_it_agrees():
    note = "unchecked for torch 2.16.0: assumed as in torch 2.15.0, the newest release whose macOS wheel was read"
    report = render_check(check_with(torch_version="2.16.0", facts_note=note))
    assert report.splitlines()[1] == f"perfsuite's MPS facts are {note}"
    assert report.splitlines()[-1].startswith("passed: the wheel agrees with what perfsuite assumes for torch 2.16.0")


def test_a_missing_wheel_exits_2_saying_what_could_not_be_read(tmp_path, capsys):
    assert main(["--wheel", str(tmp_path / "torch-2.15.0-cp311-cp311-macosx_14_0_arm64.whl")]) == 2
    assert "cannot read torch/lib/libtorch_cpu.dylib" in capsys.readouterr().err


# torch's own fp16 convolution skip (SKIPLIST_GRAD of common_mps.py, as in 2.15.0's lines 532-545)

COMMON_MPS = '''
def mps_ops_grad_modifier(ops):
    SKIPLIST_GRAD = {
        "nn.functional.pairwise_distance": [torch.float16],
        # failed assertion `destination datatype must be fp32'
        "nn.functional.conv1d": [torch.float16],
        "nn.functional.conv2d": [torch.float16],
    }
'''


def test_torchs_own_tests_skipping_fp16_conv2d_backward_is_read():
    assert fp16_convolution_backward_skipped(COMMON_MPS)


def test_a_skip_list_without_conv2d_says_torch_runs_it():
    assert not fp16_convolution_backward_skipped(COMMON_MPS.replace('"nn.functional.conv2d"', '"topk"'))


# arm64 code in a hand-built Mach-O image

BLOCK, BOXED_FALLBACK, IMPL, BOXED_CONSTRUCTOR, PLAIN_CONSTRUCTOR = 0x1000, 0x1400, 0x1500, 0x1600, 0x1700
RECORD_BLOCK, GPU_END_TIME, STRINGS = 0x1800, 0x1900, 0x3000


def adrp(register: int, pc: int, target: int) -> int:
    pages = (target >> 12) - (pc >> 12)
    return 0x90000000 | (pages & 0x3) << 29 | ((pages >> 2) & 0x7FFFF) << 5 | register


def add(register: int, source: int, immediate: int) -> int:
    return 0x91000000 | immediate << 10 | source << 5 | register


def bl(pc: int, target: int) -> int:
    return 0x94000000 | ((target - pc) >> 2) & 0x3FFFFFF


RET = 0xD65F03C0


def assemble(address: int, *words) -> bytes:
    """Each item is an instruction word, or a function of its address that returns one."""
    return b"".join(struct.pack("<I", word(address + 4 * index) if callable(word) else word)
                    for index, word in enumerate(words))


def block_code(fallback_names: list[int], plain_name: int) -> bytes:
    """MPSFallback.mm's block: a boxed-fallback CppFunction and an _impl call per name, then one plain kernel."""
    words: list = [lambda pc: adrp(8, pc, BOXED_FALLBACK), add(8, 8, BOXED_FALLBACK & 0xFFF)]
    for name in fallback_names:
        words += [lambda pc: bl(pc, BOXED_CONSTRUCTOR), lambda pc, n=name: adrp(1, pc, n), add(1, 1, name & 0xFFF),
                  lambda pc: bl(pc, IMPL)]
    words += [lambda pc: bl(pc, PLAIN_CONSTRUCTOR), lambda pc: adrp(1, pc, plain_name), add(1, 1, plain_name & 0xFFF),
              lambda pc: bl(pc, IMPL), RET]
    return assemble(BLOCK, *words)


def macho(code_at: dict[int, bytes], strings: bytes, symbols: dict[str, int]) -> bytes:
    """A thin 64-bit Mach-O image: one segment over the whole file (addresses are file offsets), and a symbol table."""
    size = 0x5000
    names = b"\x00" + b"".join(name.encode() + b"\x00" for name in symbols)
    table_offset, names_offset = 0x4000, 0x4000 + 16 * len(symbols)
    image = bytearray(size)
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, 0x0100000C, 0, 6, 2, 72 + 24, 0, 0)
    segment = struct.pack("<II16sQQQQiiII", 0x19, 72, b"__TEXT", 0, size, 0, size, 5, 5, 0, 0)
    symtab = struct.pack("<IIIIII", 0x2, 24, table_offset, len(symbols), names_offset, len(names))
    image[0:len(header + segment + symtab)] = header + segment + symtab
    for address, code in code_at.items():
        image[address:address + len(code)] = code
    image[STRINGS:STRINGS + len(strings)] = strings
    name_offset = 1
    for index, (name, address) in enumerate(symbols.items()):
        struct.pack_into("<IBBHQ", image, table_offset + 16 * index, name_offset, 0x0E, 1, 0, address)
        name_offset += len(name) + 1
    image[names_offset:names_offset + len(names)] = names
    return bytes(image)


NAMES = b"embedding_renorm_\x00linalg_svd\x00_slow_conv2d_forward\x00"
SYMBOL_TABLE = {
    "__ZN2atL34TORCH_LIBRARY_IMPL_init_aten_MPS_2ERN5torch7LibraryE": BLOCK,
    "__ZN3c1011BoxedKernel19make_boxed_functionIXadL_ZN2atL12mps_fallbackERKNS_14OperatorHandleEE": BOXED_FALLBACK,
    "__ZNR5torch7Library5_implEPKcONS_11CppFunctionENS_17_RegisterOrVerifyE": IMPL,
    "__ZN5torch11CppFunctionC1EN3c1014KernelFunctionENSt3__18optionalINS1_4impl12CppSignatureEEE": BOXED_CONSTRUCTOR,
    "__ZN5torch11CppFunctionC2IFN2at6TensorERKS3_EEEPT_": PLAIN_CONSTRUCTOR,
    "____ZN2at3mps8MPSEvent12recordLockedEb_block_invoke": RECORD_BLOCK,
    "_objc_msgSend$GPUEndTime": GPU_END_TIME,
    "_end": 0x2000,
}


def image_with(fallback_names: list[int], record_calls: int) -> bytes:
    return macho({BLOCK: block_code(fallback_names, STRINGS + 29),
                  RECORD_BLOCK: assemble(RECORD_BLOCK, lambda pc: bl(pc, record_calls), RET)}, NAMES, SYMBOL_TABLE)


def test_the_fallback_block_names_each_op_it_sends_to_the_cpu_and_the_one_it_does_not():
    image = read_macho(image_with([STRINGS, STRINGS + 18], GPU_END_TIME))
    assert [(r.op, r.to_fallback) for r in mps_fallback_block(image)] == [
        ("embedding_renorm_", True), ("linalg_svd", True), ("_slow_conv2d_forward", False),
    ]


def test_a_block_that_sends_one_op_to_the_cpu_names_that_one():
    image = read_macho(image_with([STRINGS], GPU_END_TIME))
    assert [r.op for r in mps_fallback_block(image) if r.to_fallback] == ["embedding_renorm_"]


def test_a_binary_without_the_library_symbols_cannot_be_read_and_says_which():
    table = {name: address for name, address in SYMBOL_TABLE.items() if "Library5_impl" not in name}
    image = read_macho(macho({BLOCK: block_code([STRINGS], STRINGS + 29)}, NAMES, table))
    with pytest.raises(BinaryReadError, match="no symbol for torch::Library::_impl"):
        mps_fallback_block(image)


def test_events_read_the_gpu_end_time_when_the_record_block_calls_it():
    assert events_stamped_on_gpu(read_macho(image_with([STRINGS], GPU_END_TIME)))


def test_events_read_a_host_clock_when_the_record_block_calls_something_else():
    assert not events_stamped_on_gpu(read_macho(image_with([STRINGS], IMPL)))


def test_adrp_and_add_are_followed_to_the_address_they_build():
    code = assemble(0x10_0000, lambda pc: adrp(3, pc, 0x23_4567), add(3, 3, 0x567))
    assert references(code, 0x10_0000, 0x23_4567) and not references(code, 0x10_0000, 0x23_4568)


def test_a_bl_backwards_is_decoded_to_its_target():
    assert called(assemble(0x8000, lambda pc: bl(pc, 0x1000)), 0x8000) == {0x1000}


def test_registrations_follow_a_register_move_into_x1():
    move_x19_to_x1 = 0xAA1303E1
    code = assemble(0x1000, lambda pc: adrp(19, pc, STRINGS), add(19, 19, 0), move_x19_to_x1,
                    lambda pc: bl(pc, IMPL))
    found = registrations(code, 0x1000, IMPL, {}, lambda address: f"string at {address:#x}")
    assert [(r.op, r.to_fallback) for r in found] == [(f"string at {STRINGS:#x}", False)]


def test_a_file_that_is_not_a_64_bit_mach_o_is_refused():
    with pytest.raises(BinaryReadError, match="not a 64-bit Mach-O image"):
        read_macho(b"\x7fELF" + bytes(60))
