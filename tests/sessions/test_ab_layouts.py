"""Each A/B side runs its own code, all of it, in the layouts users have: a slowdown that lives in a module the
registering file imports (not in that file) is judged regressed, for a src layout installed with `pip install -e .`
(its module imported lazily inside the model's build), a flat layout, a conftest.py that imports a sibling helper
module, and a model defined in one module but registered in the conftest. Before, the base side imported those
modules from the head's tree and read `unchanged`. The last two layouts measure in the gate's worker processes
(`--perf-processes`) too."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.scratch_project import PERF_TEST, commit_all, git, run_pytest, run_pytest_in_process, write

pytestmark = pytest.mark.slow

PERF_SETTINGS = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer"
dtype = "fp32"
threads = 1
warmup = 2
"""
LAYERS = '''import torch

BLOCKS = 1


def make_blocks():
    return torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(BLOCKS)])
'''
MODEL = '''import torch
from perfsuite import Workload, register_workload


def build(profile):
    from {package}layers import make_blocks  # imported when the model is built, not before

    return make_blocks()


register_workload(Workload(
    name="stack", build_module=build,
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 256), batch_sizes={{"smoke": (64,)}},
))
'''


def judge(root: Path, python: str = sys.executable) -> tuple[subprocess.CompletedProcess[str], dict]:
    """The A/B job against HEAD~1 with `python`: its session in this process when that is this interpreter (its sides
    run in worker processes either way)."""
    options = ("--benchmark-only", "--benchmark-max-time", "0.1", "--perf-ab", "HEAD~1", "--perf-ab-budget", "120")
    result = run_pytest_in_process(root, *options) if python == sys.executable else run_pytest(
        root, *options, python=python)
    summary_file = root / ".perfsuite" / "ab.json"
    return result, json.loads(summary_file.read_text()) if summary_file.exists() else {}


def eight_blocks_then_judge(root: Path, layers_file: str, python: str = sys.executable) -> None:
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "one block")
    (root / layers_file).write_text(LAYERS.replace("BLOCKS = 1", "BLOCKS = 8"))
    commit_all(root, "eight blocks")
    result, summary = judge(root, python)
    assert result.returncode == 1, result.stdout + result.stderr
    (case,) = summary["cases"]
    assert case["status"] == "regressed" and case["ratio"] > 2, case["message"]
    assert summary["measuring"]["in_one_process"] is True
    # The workers holding both sides fixed their heap's thresholds (perfsuite.run.heap), and the job says so.
    assert summary["measuring"]["heap"] == "glibc malloc thresholds fixed: mmap 32 MiB, trim 64 MiB"
    assert "(glibc malloc thresholds fixed: mmap 32 MiB, trim 64 MiB)" in result.stdout
    assert "perfsuite A/B FAILED: 1 regressed" in result.stdout


def editable_environment(tmp_path: Path) -> Path:
    """A virtualenv that sees this one's packages (torch, perfsuite, and pip, which installs into it from there: no
    copy of pip of its own to set up) and can take an editable install quickly."""
    location = tmp_path / "venv"
    venv.create(location, with_pip=False)
    site_packages = Path(sysconfig.get_paths(vars={"base": str(location), "platbase": str(location)})["purelib"])
    here = sysconfig.get_paths()["purelib"]
    (site_packages / "_outer_environment.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    return location / "bin" / "python"


def test_a_src_layout_installed_editable_runs_the_base_commits_modules(tmp_path: Path):
    root = tmp_path / "project"
    write(root, {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
                          '[project]\nname = "mypkg"\nversion = "0.1"\n\n' + PERF_SETTINGS,
        "src/mypkg/__init__.py": "", "src/mypkg/layers.py": LAYERS,
        "src/mypkg/models.py": MODEL.format(package="mypkg."),
        "conftest.py": "import mypkg.models  # noqa: F401\n", "test_perf.py": PERF_TEST,
    })
    python = editable_environment(tmp_path)
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e",
                                str(root)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    found = subprocess.run([str(python), "-c", "import mypkg.layers; print(mypkg.layers.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True)
    assert Path(found.stdout.strip()) == root / "src" / "mypkg" / "layers.py"  # the head's tree, as installed
    eight_blocks_then_judge(root, "src/mypkg/layers.py", str(python))


def test_a_flat_layout_package_beside_the_conftest(tmp_path: Path):
    root = tmp_path / "project"
    write(root, {
        "pyproject.toml": PERF_SETTINGS, "mypkg/__init__.py": "", "mypkg/layers.py": LAYERS,
        "mypkg/models.py": MODEL.format(package="mypkg."),
        "conftest.py": "import mypkg.models  # noqa: F401\n", "test_perf.py": PERF_TEST,
    })
    eight_blocks_then_judge(root, "mypkg/layers.py")


def test_a_conftest_that_imports_a_sibling_helper_module(tmp_path: Path):
    root = tmp_path / "project"
    write(root, {
        "pyproject.toml": PERF_SETTINGS, "tests/layers.py": LAYERS,
        "tests/helpers.py": MODEL.format(package=""),
        "tests/conftest.py": "import helpers  # noqa: F401\n", "tests/test_perf.py": PERF_TEST,
    })
    eight_blocks_then_judge(root, "tests/layers.py")


SPLIT_MODEL = '''import torch


def build(profile):
    from layers import make_blocks

    return make_blocks()


def inputs(profile, batch_size):
    return torch.randn(batch_size, 256)
'''
SPLIT_CONFTEST = '''from models import build, inputs

from perfsuite import Workload, register_workload

register_workload(Workload(name="stack", build_module=build, make_inputs=inputs, batch_sizes={"smoke": (64,)}))
'''
LAYOUTS = {
    "a conftest importing a sibling helper module": {
        "pyproject.toml": PERF_SETTINGS, "tests/layers.py": LAYERS, "tests/helpers.py": MODEL.format(package=""),
        "tests/conftest.py": "import helpers  # noqa: F401\n", "tests/test_perf.py": PERF_TEST,
    },
    "a model defined in one module and registered in the conftest": {
        "pyproject.toml": PERF_SETTINGS, "tests/layers.py": LAYERS, "tests/models.py": SPLIT_MODEL,
        "tests/conftest.py": SPLIT_CONFTEST, "tests/test_perf.py": PERF_TEST,
    },
}


def test_a_model_defined_in_one_module_and_registered_in_the_conftest(tmp_path: Path):
    """Before, a worker imported only the module defining the model's functions, which registers nothing: 'workload
    was not found in a worker process'."""
    root = tmp_path / "project"
    write(root, LAYOUTS["a model defined in one module and registered in the conftest"])
    eight_blocks_then_judge(root, "tests/layers.py")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_measures_in_worker_processes_of_the_gate(tmp_path: Path, layout: str):
    root = tmp_path / "project"
    write(root, LAYOUTS[layout])
    result = run_pytest_in_process(root, "--benchmark-only", "--benchmark-max-time", "0.1", "--perf-processes", "2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout and "was not found in a worker process" not in result.stdout
    assert "process 2/2 measured cpu-fp32-stack-bs64-infer-smoke" in result.stdout
