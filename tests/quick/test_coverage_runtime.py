"""Runtime detection on a Mac: the parsers, on messages rebuilt from torch's source (tests/coverage/fixtures)."""

import json
from pathlib import Path

import pytest

from perfsuite.coverage.runtime import (
    UNNAMED_KERNEL,
    fallback_op_of_error,
    fallback_op_of_warning,
    findings_from_probe,
    kernel_cpu_copy,
    probe_environment,
    profiler_fallback_calls,
    run_runtime_check,
)

FIXTURES = Path(__file__).parents[1] / "coverage" / "fixtures"


def fixture(name):
    return (FIXTURES / name).read_text()


def test_the_fallback_warning_names_its_op():
    assert fallback_op_of_warning(fixture("fallback_warning.txt")) == "aten::embedding_renorm_"


@pytest.mark.parametrize("name", ["not_implemented_since_2_6.txt", "not_implemented_before_2_6.txt"])
def test_the_not_implemented_error_names_its_op_in_both_wordings(name):
    assert fallback_op_of_error(fixture(name)) == "aten::_linalg_eig"


def test_the_fallback_warning_is_not_mistaken_for_the_error():
    assert fallback_op_of_error(fixture("fallback_warning.txt")) is None


def test_a_kernel_that_copies_to_the_cpu_before_macos_13_is_named():
    assert kernel_cpu_copy(fixture("kernel_cpu_copy_before_macos13.txt")) == (
        "aten::nonzero", "supported natively from macOS 13.0")


def test_a_kernel_cpu_copy_without_a_kernel_name_keeps_its_reason():
    op, detail = kernel_cpu_copy(fixture("kernel_cpu_copy_avg_pool_int64.txt"))
    assert op == UNNAMED_KERNEL and detail.startswith("passing divisor to Average Pooling op with int64 input")


def test_the_profiler_log_counts_every_call_per_phase():
    assert profiler_fallback_calls(fixture("probe_stderr.txt")) == {
        ("aten::embedding_renorm_", "infer/forward"): 1,
        ("aten::embedding_renorm_", "train/forward"): 1,
        ("aten::linalg_svd", "train/forward"): 2,
    }


def test_every_fallback_op_of_a_probe_is_reported_not_only_the_first():
    findings = findings_from_probe(fixture("probe_stderr.txt"), json.loads(fixture("probe_report.json")))
    fallbacks = {(f.op, f.phase, f.calls) for f in findings if f.evidence == "profiler log"}
    assert fallbacks == {
        ("aten::embedding_renorm_", "infer/forward", 1),
        ("aten::embedding_renorm_", "train/forward", 1),
        ("aten::linalg_svd", "train/forward", 2),
    }


def test_warnings_of_ops_the_profiler_logged_are_not_counted_twice():
    findings = findings_from_probe(fixture("probe_stderr.txt"), json.loads(fixture("probe_report.json")))
    assert not [f for f in findings if f.evidence == "fallback warning"]


def test_warnings_count_the_calls_when_the_profiler_log_is_missing():
    findings = findings_from_probe("", json.loads(fixture("probe_report.json")))
    warned = {(f.op, f.phase): f.calls for f in findings if f.evidence == "fallback warning"}
    assert warned == {("aten::embedding_renorm_", "infer/forward"): 1, ("aten::embedding_renorm_", "train/forward"): 1,
                      ("aten::linalg_svd", "train/forward"): 2}


def test_a_kernel_cpu_copy_in_a_probe_is_reported_with_its_phase():
    findings = findings_from_probe("", json.loads(fixture("probe_report.json")))
    assert [(f.op, f.phase) for f in findings if f.evidence == "kernel copies to CPU"] == [
        (UNNAMED_KERNEL, "train/forward")]


def test_the_error_that_stopped_a_probe_without_fallback_names_the_op():
    findings = findings_from_probe("", json.loads(fixture("probe_report_fallback_off.json")))
    assert [(f.op, f.phase, f.evidence) for f in findings] == [
        ("aten::_linalg_eig", "train/forward", "not implemented")]


def test_the_probe_starts_with_fallback_and_the_fallback_log_on():
    env = probe_environment({})
    assert (env["PYTORCH_ENABLE_MPS_FALLBACK"], env["PYTORCH_MPS_LOG_PROFILE_INFO"]) == ("1", "4")


def test_the_runtime_check_is_skipped_with_a_reason_where_mps_is_absent():
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("MPS is available here: the runtime check runs in tests/coverage")
    assert run_runtime_check("resnet18", "smoke", ("infer",)).skipped
