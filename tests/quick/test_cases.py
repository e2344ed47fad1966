import pytest

from perfsuite.matrix.cases import (
    Case,
    DeviceFacts,
    MatrixOptions,
    UsageError,
    build_matrix,
    parse_batch_sizes,
    parse_names,
    parse_version,
)
from perfsuite.matrix.cases import skip_reason as matrix_skip_reason
from perfsuite.run.devices import with_device_rules
from perfsuite.workloads import Workload

NO_FACTS = DeviceFacts(unavailable_reasons={}, torch_version=(2, 13))


def _workload(name, loss=True):
    return Workload(
        name=name,
        build_module=lambda profile: None,
        make_inputs=lambda profile, batch_size: None,
        make_target=(lambda profile, batch_size: None) if loss else None,
        loss=(lambda out, target: out) if loss else None,
        batch_sizes={"smoke": (2,), "standard": (8, 32), "full": (64,)},
    )


WORKLOADS = {"net": _workload("net").facts(), "pipe": _workload("pipe", loss=False).facts()}


def skip_reason(case: Case, facts: DeviceFacts) -> str | None:
    return matrix_skip_reason(case, WORKLOADS[case.model], with_device_rules(facts))


def test_benchmark_id_reads_device_dtype_model_batch_mode():
    case = Case("mps", "bf16", "resnet18", 64, "train", "standard")
    assert case.benchmark_id == "mps-bf16-resnet18-bs64-train"


def test_benchmark_id_names_a_non_standard_profile():
    assert Case("cpu", "fp32", "net", 2, "infer", "smoke").benchmark_id == "cpu-fp32-net-bs2-infer-smoke"


def test_matrix_crosses_every_axis_and_skips_train_for_inference_only_models():
    cases = build_matrix(MatrixOptions(devices=["cpu", "mps"], dtypes=["fp32", "bf16"]), WORKLOADS)
    ids = {c.benchmark_id for c in cases}
    assert len(cases) == 2 * 2 * 2 * 2 + 2 * 2 * 2  # net: 2 modes x 2 bs; pipe: infer x 2 bs; x 2 devices x 2 dtypes
    assert "mps-bf16-net-bs32-train" in ids
    assert not any("pipe" in i and i.endswith("train") for i in ids)


def test_full_profile_adds_its_batch_sizes_to_the_standard_ones():
    cases = build_matrix(MatrixOptions(devices=["cpu"], dtypes=["fp32"], models=["pipe"], profile="full"), WORKLOADS)
    assert [c.batch_size for c in cases] == [8, 32, 64]


def test_batch_size_option_replaces_the_profile_defaults():
    options = MatrixOptions(devices=["cpu"], dtypes=["fp32"], models=["net"], batch_sizes=[3], modes=["infer"])
    assert [c.benchmark_id for c in build_matrix(options, WORKLOADS)] == ["cpu-fp32-net-bs3-infer"]


def test_unknown_name_is_a_usage_error_listing_the_valid_ones():
    with pytest.raises(UsageError, match=r"--perf-device: unknown value gpu; valid: cpu, cuda, mps"):
        parse_names("cpu,gpu", ["cpu", "cuda", "mps"], "--perf-device")


def test_batch_sizes_must_be_positive_integers():
    assert parse_batch_sizes("8, 32") == [8, 32]
    with pytest.raises(UsageError, match="positive"):
        parse_batch_sizes("0")
    with pytest.raises(UsageError, match="not a comma-separated list of whole numbers"):
        parse_batch_sizes("eight")


def test_unavailable_device_is_skipped_with_its_reason():
    facts = DeviceFacts(unavailable_reasons={"cuda": "torch was built without CUDA"}, torch_version=(2, 13))
    reason = skip_reason(Case("cuda", "fp32", "net", 8, "train", "standard"), facts)
    assert reason == "cuda unavailable: torch was built without CUDA"


def test_bf16_on_mps_needs_torch_2_6():
    facts = DeviceFacts(unavailable_reasons={}, torch_version=(2, 5), macos_version=(14, 4))
    assert "torch >= 2.6" in skip_reason(Case("mps", "bf16", "net", 8, "infer", "standard"), facts)


def test_bf16_on_mps_needs_macos_14():
    facts = DeviceFacts(unavailable_reasons={}, torch_version=(2, 13), macos_version=(13, 6))
    assert "macOS >= 14" in skip_reason(Case("mps", "bf16", "net", 8, "infer", "standard"), facts)


def test_fp16_training_on_mps_needs_torch_2_8_for_grad_scaler():
    facts = DeviceFacts(unavailable_reasons={}, torch_version=(2, 7), macos_version=(15, 0))
    assert "GradScaler" in skip_reason(Case("mps", "fp16", "net", 8, "train", "standard"), facts)
    assert skip_reason(Case("mps", "fp16", "net", 8, "infer", "standard"), facts) is None


def test_supported_case_is_not_skipped():
    assert skip_reason(Case("cpu", "bf16", "net", 8, "train", "standard"), NO_FACTS) is None


def test_parse_version_reads_major_and_minor():
    assert parse_version("2.13.0+cpu") == (2, 13)
    assert parse_version("14.5") == (14, 5)
    assert parse_version("15") == (15, 0)
