"""The compile dimension: ids, the matrix, skip reasons, the baseline field, the check against eager and Dynamo's
counters; and one compiled smoke case run as a user would.

The tests of this subject that start processes or take long: tests/sessions/test_compiled_sessions.py."""

from __future__ import annotations

import math

import pytest
import torch

from perfsuite.matrix.cases import DeviceFacts, MatrixOptions, build_matrix
from perfsuite.matrix.cases import skip_reason as matrix_skip_reason
from perfsuite.options.settings import RawSettings, validate_settings
from perfsuite.records import Case
from perfsuite.run import compiled
from perfsuite.run.devices import with_device_rules
from perfsuite.run.measure import CompiledDuringRounds, check_no_compilation
from perfsuite.store.baselines import BaselineFile, baseline_from_json, baseline_to_json
from perfsuite.workloads import model_facts
from tests.quick.test_baselines import entry

FACTS = with_device_rules(DeviceFacts(unavailable_reasons={}, torch_version=(2, 13), macos_version=(15, 0)))


def skip_reason(case: Case, facts: DeviceFacts) -> str | None:
    return matrix_skip_reason(case, model_facts()[case.model], with_device_rules(facts))


def case(device: str = "cuda", compile_mode: str = "inductor", **changes) -> Case:
    values = dict(device=device, dtype="bf16", model="resnet18", batch_size=32, mode="infer", profile="standard")
    values.update(changes)
    return Case(**values, compile=compile_mode)


def test_a_compile_mode_other_than_eager_is_in_the_id_before_the_profile():
    assert case(compile_mode="eager").benchmark_id == "cuda-bf16-resnet18-bs32-infer"
    assert case(compile_mode="reduce-overhead", profile="smoke").benchmark_id == (
        "cuda-bf16-resnet18-bs32-infer-reduce-overhead-smoke"
    )


def test_the_matrix_crosses_compile_modes_with_the_plain_and_layout_modes_only():
    options = MatrixOptions(devices=["cuda"], dtypes=["bf16"], models=["resnet18"], batch_sizes=[32],
                            modes=["infer", "train-checkpoint", "train-ddp"], compile_modes=["eager", "inductor"])
    ids = [c.benchmark_id for c in build_matrix(options, model_facts())]
    assert ids == [
        "cuda-bf16-resnet18-bs32-infer", "cuda-bf16-resnet18-bs32-infer-inductor",
        "cuda-bf16-resnet18-bs32-train-checkpoint", "cuda-bf16-resnet18-bs32-train-ddp",
    ]


def test_compile_is_a_setting_with_eager_by_default_and_a_clear_error():
    default = validate_settings(RawSettings(), {}, ["resnet18"], ["cpu"])
    assert list(default.matrix.compile_modes) == ["eager"]
    chosen = validate_settings(RawSettings(compile=["eager", "cuda-graph"]), {}, ["resnet18"], ["cpu"])
    assert list(chosen.matrix.compile_modes) == ["eager", "cuda-graph"]
    with pytest.raises(Exception, match=r"pyproject.toml \[tool.perfsuite\] compile: unknown value jit"):
        validate_settings(RawSettings(compile="jit"), {"compile": "pyproject.toml [tool.perfsuite] compile"},
                          ["resnet18"], ["cpu"])


@pytest.mark.parametrize(("the_case", "facts", "expected"), [
    (case("cpu", "cuda-graph"), FACTS, "cuda-graph replays CUDA graphs, which exist only on CUDA"),
    (case("mps", "reduce-overhead"), FACTS, "reduce-overhead replays CUDA graphs"),
    (case("cuda", "cuda-graph", mode="train", dtype="fp16"), FACTS, "GradScaler checks .* on the host"),
    (case("cpu", "inductor"), DeviceFacts({}, (2, 13), cpp_compiler=None), "needs a C\\+\\+ compiler"),
    (case("mps", "inductor"), DeviceFacts({}, (2, 7), (15, 0)), "inductor backend for MPS is an early prototype"),
    (case("mps", "inductor"), DeviceFacts({}, (2, 6), (15, 0)), "inductor has no MPS backend before torch 2.7"),
    (case("cuda", "inductor", model="sd15-text2img", batch_size=1), FACTS, "host-side loop"),
    (case("cuda", "inductor"), DeviceFacts({}, (2, 13), compile_unsupported_reason="Python 3.15+ is not supported"),
     "torch.compile is unavailable here: Python 3.15"),
])
def test_compiled_cases_that_cannot_run_say_why(the_case, facts, expected):
    reason = skip_reason(the_case, facts)
    assert reason is not None and __import__("re").search(expected, reason), reason


@pytest.mark.parametrize("the_case", [
    case("cuda", "cuda-graph", mode="train"), case("mps", "inductor"), case("cpu", "inductor"),
    case("cuda", "reduce-overhead", mode="train", dtype="fp16"),
])
def test_compiled_cases_that_can_run_are_not_skipped(the_case):
    assert skip_reason(the_case, FACTS) is None


def test_the_baseline_keeps_the_compile_mode_and_reads_entries_without_it_as_eager(tmp_path):
    compiled_case = case("cpu", "inductor", dtype="fp32", batch_size=4, mode="train")
    document = baseline_to_json(BaselineFile("cpu", {compiled_case.benchmark_id: entry(case=compiled_case)}))
    assert document["entries"][compiled_case.benchmark_id]["compile"] == "inductor"
    assert baseline_from_json(document, tmp_path / "x.json").entries[compiled_case.benchmark_id].case == compiled_case

    eager_case = case("cpu", "eager", dtype="fp32", batch_size=4, mode="train")
    old = baseline_to_json(BaselineFile("cpu", {eager_case.benchmark_id: entry(case=eager_case)}))
    del old["entries"][eager_case.benchmark_id]["compile"]
    assert baseline_from_json(old, tmp_path / "x.json").entries[eager_case.benchmark_id].case.compile == "eager"

    bad = baseline_to_json(BaselineFile("cpu", {compiled_case.benchmark_id: entry(case=compiled_case)}))
    bad["entries"][compiled_case.benchmark_id]["compile"] = "jit"
    with pytest.raises(Exception, match=r"has compile 'jit'; valid: eager, inductor"):
        baseline_from_json(bad, tmp_path / "x.json")


def test_largest_relative_difference_is_per_tensor_against_its_largest_value():
    expected = [torch.tensor([10.0, -20.0]), torch.tensor([1.0])]
    assert compiled.largest_relative_difference(expected, [torch.tensor([10.0, -20.2]), torch.tensor([1.0])]) == (
        pytest.approx(0.01, rel=1e-5)
    )
    assert compiled.largest_relative_difference(expected, expected[:1]) == math.inf
    assert compiled.largest_relative_difference(expected, [torch.tensor([10.0, math.nan]), expected[1]]) == math.inf
    assert compiled.largest_relative_difference([torch.zeros(3)], [torch.zeros(3)]) == 0.0


def test_output_tensors_walks_mappings_and_sequences_in_order():
    a, b, c = torch.ones(1), torch.zeros(2), torch.full((1,), 3.0)
    assert [t.numel() for t in compiled.output_tensors({"logits": a, "hidden": (b, c), "name": "x"})] == [1, 2, 1]


def test_a_compiled_step_that_computes_something_else_is_refused_naming_the_difference():
    wrong = case("cpu", "inductor", dtype="fp32")
    message = r"differs from eager by 0\.1 of the largest value \(allowed 0\.005 in fp32\)"
    with pytest.raises(compiled.WrongCompiledResult, match=message):
        compiled.check_against_eager(wrong, lambda: [torch.tensor([1.0, 2.0])], lambda: [torch.tensor([1.0, 2.2])],
                                     lambda: None)
    ok = compiled.check_against_eager(wrong, lambda: [torch.tensor([1.0, 2.0])], lambda: [torch.tensor([1.0, 2.001])],
                                      lambda: None)
    assert ok.largest_difference == pytest.approx(0.0005, rel=1e-3) and ok.first_call_s >= 0


def test_a_forward_that_returns_none_is_refused_saying_so_and_what_to_do():
    nothing = case("cpu", "inductor", dtype="fp32")
    with pytest.raises(compiled.WrongCompiledResult) as refused:
        compiled.check_against_eager(nothing, lambda: compiled.output_tensors(None),
                                     lambda: compiled.output_tensors(None), lambda: None)
    message = str(refused.value)
    assert message.startswith(f"{nothing.benchmark_id}: the model's forward returned no tensor")
    assert "return the output from forward" in message and "--perf-compile eager" in message
    assert "differs from eager" not in message


def test_a_compiled_step_that_returns_fewer_tensors_than_eager_is_refused_naming_the_counts():
    with pytest.raises(compiled.WrongCompiledResult, match=r"returned 1 tensor\(s\) where eager returned 2"):
        compiled.check_against_eager(case("cpu", "inductor", dtype="fp32"),
                                     lambda: [torch.ones(1), torch.ones(2)], lambda: [torch.ones(1)], lambda: None)


def test_a_check_in_eval_mode_where_dropout_would_draw_masks_and_modes_restored():
    with_dropout = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1), torch.nn.BatchNorm1d(2)).train()
    with compiled.training_check_mode(with_dropout):
        assert not any(m.training for m in with_dropout.modules())
    assert all(m.training for m in with_dropout.modules())
    batchnorm_only = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)).train()
    with compiled.training_check_mode(batchnorm_only):
        assert all(m.training for m in batchnorm_only.modules())


def test_dynamo_counts_since_counts_frames_graphs_and_new_graph_breaks():
    earlier = compiled.DynamoCounts(frames=2, graphs=3, graph_breaks={"print": 1})
    later = compiled.DynamoCounts(frames=5, graphs=4, graph_breaks={"print": 3, "item()": 1})
    assert later.since(earlier) == compiled.DynamoCounts(3, 1, {"print": 2, "item()": 1})
    facts = compiled.compile_facts(12.3456, later.since(earlier), 1e-4)
    assert facts["compile_graph_breaks"] == 3 and facts["compile_graph_break_reasons"].startswith("print (x2)")


def test_a_compilation_during_the_timed_rounds_fails_the_case():
    check_no_compilation(case(), compiled.DynamoCounts(0, 0, {}), 3)
    with pytest.raises(CompiledDuringRounds, match=r"compiled 1 frame\(s\) during the timed rounds .* --perf-warmup"):
        check_no_compilation(case(), compiled.DynamoCounts(1, 1, {}), 3)
