"""A user's own models: the default choice of models, and finding them outside pytest (conftest.py, entry points).

The in-process tests of this subject: tests/quick/test_user_models.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import perfsuite.workloads as workloads
from perfsuite.errors import UsageError
from perfsuite.options.settings import read_pyproject
from perfsuite.workloads.user import (
    load_installed_workloads,
    load_project_workloads,
)

pytestmark = pytest.mark.slow

EXAMPLE_CONFTEST = (Path(__file__).resolve().parents[2] / "examples" / "user_model" / "conftest.py").read_text()


def load_project(pyproject):
    load_project_workloads(pyproject, read_pyproject(pyproject))


def registering(name: str) -> str:
    """A module's source that registers a workload called `name` when imported."""
    return (
        "import torch\nfrom perfsuite import Workload, register_workload\n"
        f"WORKLOAD = Workload(name={name!r}, build_module=lambda profile: torch.nn.Identity(),\n"
        "    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 2), batch_sizes={'smoke': (2,)})\n"
        f"register_workload(WORKLOAD)\n"
    )


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as it is now (the built-in models loaded); what a test registers leaves with it."""
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads.registered_workloads()))


# --- the project's conftest.py files, as pytest finds them ------------------------------------------------------


@pytest.mark.usefixtures("fresh_registry")
def test_the_example_projects_model_is_registered_from_its_conftest(pytester):
    pytester.makeconftest(EXAMPLE_CONFTEST)
    load_project(pytester.path / "pyproject.toml")
    assert "tiny-mlp" in workloads.registered_workloads()


@pytest.mark.usefixtures("fresh_registry")
def test_a_model_in_a_testpaths_conftest_is_registered_with_its_pythonpath(pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["perf"]\npythonpath = ["src"]\n')
    pytester.mkdir("src")
    (pytester.path / "src" / "my_models.py").write_text(registering("from-src"))
    pytester.mkdir("perf")
    (pytester.path / "perf" / "conftest.py").write_text("import my_models  # noqa: F401\n")
    load_project(pytester.path / "pyproject.toml")
    assert "from-src" in workloads.registered_workloads()


@pytest.mark.usefixtures("fresh_registry")
def test_loading_the_project_twice_registers_its_models_once(pytester):
    pytester.makeconftest(EXAMPLE_CONFTEST)
    load_project(pytester.path / "pyproject.toml")
    load_project(pytester.path / "pyproject.toml")
    assert list(workloads.registered_workloads()).count("tiny-mlp") == 1


@pytest.mark.usefixtures("fresh_registry")
def test_a_conftest_that_fails_is_named_with_its_line_and_error(pytester):
    conftest = pytester.makeconftest("import os\nraise RuntimeError('no GPU config')\n")
    with pytest.raises(UsageError, match=f"^{conftest.resolve()}:2: cannot import .*RuntimeError: no GPU config"):
        load_project(pytester.path / "pyproject.toml")


@pytest.mark.usefixtures("fresh_registry")
def test_a_conftest_with_a_syntax_error_is_named_with_its_line(pytester):
    conftest = pytester.makeconftest("x = 1\ndef broken(:\n")
    with pytest.raises(UsageError, match=f"^{conftest.resolve()}:2: cannot import .*SyntaxError"):
        load_project(pytester.path / "pyproject.toml")


# --- installed packages: the perfsuite.workloads entry points ---------------------------------------------------


def install(pytester, module: str, entry_point: str) -> None:
    """A package `tiny-models` on sys.path whose `perfsuite.workloads` entry point is `entry_point`."""
    site = pytester.mkdir("site")
    (site / "tiny_models.py").write_text(module)
    info = site / "tiny_models-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-models\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[perfsuite.workloads]\n{entry_point}\n")
    pytester.syspathinsert(site)


@pytest.mark.usefixtures("fresh_registry")
def test_an_installed_packages_module_entry_point_registers_its_models(pytester, monkeypatch):
    install(pytester, registering("from-package"), "tiny = tiny_models")
    monkeypatch.setattr(workloads, "_installed_loaded", False)
    assert "from-package" in workloads.registered_workloads()


@pytest.mark.usefixtures("fresh_registry")
def test_an_entry_point_may_name_a_workload_object(pytester):
    install(pytester, registering("from-object").replace("register_workload(WORKLOAD)", ""), "t = tiny_models:WORKLOAD")
    load_installed_workloads()
    assert "from-object" in workloads.registered_workloads()


@pytest.mark.usefixtures("fresh_registry")
def test_an_entry_point_that_fails_names_itself_and_its_package(pytester):
    install(pytester, "raise ImportError('needs CUDA')\n", "tiny = tiny_models")
    with pytest.raises(UsageError, match="entry point tiny = tiny_models .*from tiny-models.*ImportError: needs CUDA"):
        load_installed_workloads()
