"""A user's own models: the default choice of models, and finding them outside pytest (conftest.py, entry points).

The tests of this subject that start processes or take long: tests/sessions/test_user_models_sessions.py."""

from __future__ import annotations

import pytest
import torch

import perfsuite.workloads as workloads
from perfsuite.options.settings import read_pyproject
from perfsuite.workloads import Workload, builtin_workloads, default_model_names, register_workload
from perfsuite.workloads.user import (
    project_conftest_files,
    pytest_ini_options,
)

BUILTIN = ["resnet18", "bert-base", "sd15-unet", "sd15-text2img", "sd15-vae-decode", "sd15-text-encoder"]


def tiny(name: str) -> Workload:
    return Workload(name=name, build_module=lambda profile: torch.nn.Identity(),
                    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 2), batch_sizes={"smoke": (2,)})


# --- which models a session measures by default -----------------------------------------------------------------


def test_a_users_own_models_are_the_default_when_any_is_registered():
    registered = {**builtin_workloads(), "tiny-mlp": tiny("tiny-mlp"), "my-unet": tiny("my-unet")}
    assert default_model_names(registered) == ["tiny-mlp", "my-unet"]


def test_the_built_in_models_are_the_default_when_no_user_model_is_registered():
    assert default_model_names(builtin_workloads()) == BUILTIN


def test_a_user_model_cannot_take_a_built_in_models_name_even_before_they_are_loaded(monkeypatch):
    monkeypatch.setattr(workloads, "_REGISTRY", {})
    monkeypatch.setattr(workloads, "_builtins_loaded", False)
    with pytest.raises(ValueError, match="'resnet18' is already registered"):
        register_workload(tiny("resnet18"))


# --- the project's conftest.py files, as pytest finds them ------------------------------------------------------


def test_conftest_files_are_the_roots_then_each_test_folders_down_from_the_root(tmp_path):
    for folder in ("", "benchmarks", "benchmarks/deep", "tests_extra", "other"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "conftest.py").write_text("")
    found = project_conftest_files(tmp_path, ["benchmarks/deep"])
    assert found == [tmp_path / "conftest.py", tmp_path / "benchmarks" / "conftest.py",
                     tmp_path / "benchmarks" / "deep" / "conftest.py"]


def test_without_testpaths_the_root_and_its_test_folders_are_searched(tmp_path):
    for folder in ("", "tests", "other"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "conftest.py").write_text("")
    assert project_conftest_files(tmp_path, []) == [tmp_path / "conftest.py", tmp_path / "tests" / "conftest.py"]


def test_no_conftest_above_the_root_is_imported(tmp_path):
    (tmp_path / "conftest.py").write_text("")
    (tmp_path / "project").mkdir()
    assert project_conftest_files(tmp_path / "project", []) == []


def test_testpaths_and_pythonpath_are_read_as_list_or_text(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.pytest.ini_options]\ntestpaths = "bench  tests"\npythonpath = ["src"]\n')
    assert pytest_ini_options(read_pyproject(pyproject)) == {"testpaths": ["bench", "tests"], "pythonpath": ["src"]}


# --- installed packages: the perfsuite.workloads entry points ---------------------------------------------------
