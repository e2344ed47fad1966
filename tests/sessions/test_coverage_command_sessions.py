"""`perfsuite coverage` / `python -m perfsuite.coverage`: options, exit status and formats.

The in-process tests of this subject: tests/quick/test_coverage_command.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import perfsuite.workloads as workloads_module
from tests.quick.test_coverage_command import main

pytestmark = pytest.mark.slow


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_model"


@pytest.fixture
def user_project(pytester, monkeypatch):
    """examples/user_model as the current folder; the models it registers leave with the test."""
    monkeypatch.setattr(workloads_module, "_REGISTRY", dict(workloads_module.registered_workloads()))
    pytester.makeconftest((EXAMPLE / "conftest.py").read_text())
    return pytester


@pytest.mark.usefixtures("user_project")
def test_a_model_the_projects_conftest_registers_is_checked(capsys):
    assert main(["--model", "tiny-mlp", "--mode", "infer", "--format", "json"]) == 0
    assert [model["model"] for model in json.loads(capsys.readouterr().out)["models"]] == ["tiny-mlp"]


@pytest.mark.usefixtures("user_project")
def test_in_a_users_project_only_its_own_models_are_checked_by_default(capsys):
    assert main(["--mode", "infer", "--format", "json"]) == 0
    assert [model["model"] for model in json.loads(capsys.readouterr().out)["models"]] == ["tiny-mlp"]


def test_a_conftest_that_fails_to_import_exits_2_naming_it(pytester, monkeypatch, capsys):
    monkeypatch.setattr(workloads_module, "_REGISTRY", dict(workloads_module.registered_workloads()))
    conftest = pytester.makeconftest("raise RuntimeError('broken')\n")
    assert main(["--model", "resnet18"]) == 2
    assert f"{conftest.resolve()}:1: cannot import this conftest.py" in capsys.readouterr().err


def test_the_command_runs_in_a_fresh_process():
    done = subprocess.run([sys.executable, "-m", "perfsuite.cli", "coverage", "--model", "sd15-text-encoder", "--mode",
                           "infer"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "sd15-text-encoder (smoke profile, batch 1)" in done.stdout
