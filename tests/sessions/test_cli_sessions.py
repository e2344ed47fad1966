"""The in-process tests of this subject: tests/quick/test_cli.py."""

from pathlib import Path

import pytest

import perfsuite.workloads as workloads
from perfsuite.cli import main

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_model"
SMOKE_CPU_FP32 = ["--profile", "smoke", "--device", "cpu", "--dtype", "fp32"]


@pytest.fixture
def user_project(pytester, monkeypatch):
    """examples/user_model as the current folder; the models it registers leave with the test."""
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads.registered_workloads()))
    pytester.makeconftest((EXAMPLE / "conftest.py").read_text())
    pytester.makepyfile(test_benchmarks=(EXAMPLE / "test_benchmarks.py").read_text())
    return pytester


def test_list_knows_the_models_the_projects_conftest_registers(user_project, capsys):
    assert main(["list", *SMOKE_CPU_FP32, "--model", "tiny-mlp"]) == 0
    assert capsys.readouterr().out.split() == ["cpu-fp32-tiny-mlp-bs8-train-smoke", "cpu-fp32-tiny-mlp-bs8-infer-smoke"]


def test_list_shows_only_the_users_own_models_by_default(user_project, capsys):
    assert main(["list", *SMOKE_CPU_FP32, "--mode", "infer"]) == 0
    assert capsys.readouterr().out.split() == ["cpu-fp32-tiny-mlp-bs8-infer-smoke"]


def test_list_all_adds_the_built_in_models_to_the_users_own(user_project, capsys):
    assert main(["list", *SMOKE_CPU_FP32, "--mode", "infer", "--model", "all"]) == 0
    models = [line.split("-bs")[0].removeprefix("cpu-fp32-") for line in capsys.readouterr().out.split()]
    assert models == [*workloads.builtin_workloads(), "tiny-mlp"]


def test_list_reads_the_project_of_the_pyproject_it_is_given(user_project, capsys, monkeypatch):
    monkeypatch.chdir(user_project.path.parent)
    pyproject = user_project.makepyprojecttoml("[tool.perfsuite]\n")
    assert main(["list", "--pyproject", str(pyproject), *SMOKE_CPU_FP32, "--model", "tiny-mlp", "--mode", "infer"]) == 0
    assert capsys.readouterr().out.split() == ["cpu-fp32-tiny-mlp-bs8-infer-smoke"]


def test_list_names_a_conftest_that_fails_to_import_and_exits_2(pytester, monkeypatch, capsys):
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads.registered_workloads()))
    conftest = pytester.makeconftest("import no_such_package\n")
    assert main(["list"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"perfsuite list: {conftest.resolve()}:1: cannot import this conftest.py")
    assert "No module named 'no_such_package'" in error
