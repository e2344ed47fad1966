"""`perfsuite coverage` / `python -m perfsuite.coverage`: options, exit status and formats.

The tests of this subject that start processes or take long: tests/sessions/test_coverage_command_sessions.py."""

import json

import pytest

import perfsuite.workloads as workloads_module
from perfsuite.cli import main as cli_main
from perfsuite.commands.coverage import selected_models


def main(argv):
    return cli_main(["coverage", *argv])


@pytest.fixture
def planted_registry(monkeypatch, planted_fallback):
    registry = dict(workloads_module.registered_workloads())
    registry[planted_fallback.name] = planted_fallback
    monkeypatch.setattr(workloads_module, "_REGISTRY", registry)


def test_all_selects_every_registered_model_in_order():
    assert selected_models(["all"], ["a", "b"], ["b"]) == ["a", "b"]


def test_without_a_model_named_the_default_ones_are_selected():
    assert selected_models(None, ["a", "b"], ["b"]) == ["b"]


def test_models_may_be_repeated_or_comma_separated():
    assert selected_models(["b,a", "b"], ["a", "b"], ["a"]) == ["b", "a"]


def test_an_unknown_model_is_named_with_the_valid_ones():
    with pytest.raises(ValueError, match="unknown model\\(s\\) nope; registered: a, b"):
        selected_models(["nope"], ["a", "b"], ["a"])


def test_an_unknown_model_exits_2(capsys):
    assert main(["--model", "no-such-model"]) == 2
    assert "unknown model(s) no-such-model" in capsys.readouterr().err


def test_a_missing_allowlist_file_exits_2(capsys, tmp_path):
    assert main(["--model", "resnet18", "--allowlist", str(tmp_path / "none.json")]) == 2


def test_a_model_without_fallback_exits_0_and_reports_every_op_as_json(capsys):
    assert main(["--model", "resnet18", "--mode", "infer", "--format", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["models"][0]
    assert (model["model"], model["unexpected_fallbacks"]) == ("resnet18", [])
    assert {"op": "aten::max_pool2d", "verdict": "native MPS kernel"}.items() <= next(
        op for op in model["ops"] if op["op"] == "aten::max_pool2d").items()


@pytest.mark.usefixtures("planted_registry")
def test_a_planted_fallback_exits_1_and_is_named_with_its_phase_and_calls(capsys):
    assert main(["--model", "planted-fallback"]) == 1
    out = capsys.readouterr().out
    assert "aten::embedding_renorm_" in out and "infer/forward 1, train/forward 1" in out
    assert "1 CPU fallback(s) not in the allowlist: aten::embedding_renorm_" in out


@pytest.mark.usefixtures("planted_registry")
def test_an_allowlisted_fallback_exits_0(capsys, tmp_path):
    allow = tmp_path / "allow.json"
    allow.write_text(json.dumps({"schema_version": 1, "allowed_fallbacks": [
        {"op": "aten::embedding_renorm_", "models": ["planted-fallback"], "reason": "tiny, once per step"}]}))
    assert main(["--model", "planted-fallback", "--allowlist", str(allow)]) == 0


@pytest.mark.usefixtures("planted_registry")
def test_markdown_shows_the_suggestion_of_a_known_fallback(capsys):
    main(["--model", "planted-fallback", "--format", "md"])
    assert "suggestion: comes from nn.Embedding(max_norm=...)" in capsys.readouterr().out
