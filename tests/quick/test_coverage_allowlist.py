"""The reviewed allowlist of CPU fallbacks, and what a failing check says."""

from pathlib import Path

import pytest

from perfsuite.coverage.allowlist import (
    Allowlist,
    AllowlistError,
    describe_fallback,
    load_allowlist,
    parse_allowlist,
    runtime_unexpected,
    unexpected_fallbacks,
)
from perfsuite.coverage.assess import ModelCoverage, OpUsage
from perfsuite.coverage.support import Verdict

SVD = OpUsage("aten::_linalg_svd", Verdict.FALLBACK, (("train/forward", 3),), "no MPS kernel", "use .cpu()")
RELU = OpUsage("aten::relu", Verdict.NATIVE, (("train/forward", 9),), "MPS kernel in native_functions.yaml")


def coverage(*ops):
    return ModelCoverage("my-model", "smoke", 2, "cpu", "2.13.0", ops)


def allowlist(*entries):
    return parse_allowlist({"schema_version": 1, "allowed_fallbacks": list(entries)}, "allow.json")


def test_a_fallback_outside_the_allowlist_is_unexpected():
    assert unexpected_fallbacks(coverage(SVD, RELU), Allowlist()) == (SVD,)


def test_an_allowed_fallback_passes_for_its_model():
    allowed = allowlist({"op": "aten::_linalg_svd", "models": ["my-model"], "reason": "once per epoch"})
    assert unexpected_fallbacks(coverage(SVD), allowed) == ()


def test_an_allowance_for_another_model_does_not_apply():
    allowed = allowlist({"op": "aten::_linalg_svd", "models": ["other"], "reason": "once per epoch"})
    assert unexpected_fallbacks(coverage(SVD), allowed) == (SVD,)


def test_a_star_allows_the_op_in_every_model():
    allowed = allowlist({"op": "aten::_linalg_svd", "models": ["*"], "reason": "once per epoch"})
    assert unexpected_fallbacks(coverage(SVD), allowed) == ()


def test_an_entry_without_a_reason_is_rejected_naming_the_entry():
    with pytest.raises(AllowlistError, match=r"allow.json: allowed_fallbacks\[0\] \(aten::take\): \"reason\""):
        allowlist({"op": "aten::take", "models": ["*"], "reason": " "})


def test_an_op_without_namespace_is_rejected_with_an_example():
    with pytest.raises(AllowlistError, match="aten::linalg_svd"):
        allowlist({"op": "take", "models": ["*"], "reason": "r"})


def test_the_failure_message_names_op_model_phase_and_calls():
    message = describe_fallback("my-model", SVD)
    assert "aten::_linalg_svd would fall back to the CPU on MPS in model my-model: train/forward 3 calls" in message


def test_the_failure_message_says_how_to_allow_the_fallback():
    assert '{"op": "aten::_linalg_svd", "models": ["my-model"], "reason": "..."}' in describe_fallback("my-model", SVD)


def test_a_runtime_op_without_overload_matches_an_allowed_overload():
    allowed = allowlist({"op": "aten::linalg_svd.U", "models": ["my-model"], "reason": "r"})
    assert runtime_unexpected("my-model", ["aten::linalg_svd", "aten::take"], allowed) == ("aten::take",)


def test_a_missing_default_allowlist_allows_nothing(tmp_path):
    assert load_allowlist(tmp_path / "absent.json").entries == ()


def test_a_missing_allowlist_named_by_the_user_is_an_error(tmp_path):
    with pytest.raises(AllowlistError, match="absent.json: no such allowlist file"):
        load_allowlist(tmp_path / "absent.json", required=True)


def test_the_shipped_allowlist_is_valid():
    path = Path(__file__).parents[2] / "baselines" / "mps-fallback-allowlist.json"
    assert load_allowlist(path, required=True).source == str(path)
