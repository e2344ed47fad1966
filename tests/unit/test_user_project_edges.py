"""Rough edges a user's own project met, each fixed: output folders, collection, and hints that name only what a
user's project has and the options pytest really takes."""

import json

import pytest

from perfsuite.analyse.compare import CompareError
from perfsuite.commands.compare import _default_b
from perfsuite.doctor.diagnosis import diagnose
from perfsuite.render.gains import _HOW_TO_GET

TINY = '''
import torch
from perfsuite import Workload, register_workload

register_workload(Workload(
    name="tiny", build_module=lambda profile: torch.nn.Linear(4, 4),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4), batch_sizes={"smoke": (2,)},
))
'''
QUICK = ("--benchmark-min-rounds", "3", "--benchmark-max-time", "0.01", "--perf-warmup", "1", "--perf-device", "cpu",
         "-p", "no:cacheprovider")


@pytest.fixture
def user_project(pytester):
    pytester.makeconftest(TINY)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    return pytester


def test_benchmark_json_into_a_missing_folder_is_written_and_the_tables_are_kept(user_project):
    result = user_project.runpytest_inprocess("--benchmark-only", "--benchmark-json", "out/runs/run.json", *QUICK)
    assert result.ret == 0
    assert json.loads((user_project.path / "out" / "runs" / "run.json").read_text())["benchmarks"]
    result.stdout.fnmatch_lines(["*perfsuite regression gate*"])


def test_dataloader_alone_in_a_user_project_collects_no_placeholder_case(user_project):
    result = user_project.runpytest_inprocess("--collect-only", "-q", "--perf-model", "dataloader", *QUICK)
    assert "NOTSET" not in result.stdout.str()


def test_compare_without_cuda_baselines_names_no_file_only_perfsuites_repository_has(tmp_path):
    with pytest.raises(CompareError) as error:
        _default_b(tmp_path / "baselines")
    assert "article-rtx4060-cuda.json" not in str(error.value)
    assert "a --benchmark-json file" in str(error.value)


def test_the_gains_hint_for_dataloader_results_names_no_file_of_perfsuites_repository():
    assert "tests/benchmarks" not in _HOW_TO_GET["dataloader"]


def test_the_doctors_advice_on_running_benchmarks_uses_pytests_option_names():
    linux = {
        "facts_version": 1,
        "python": {"version": "3.11.7", "implementation": "CPython", "executable": "/venv/bin/python"},
        "platform": {"system": "Linux", "machine": "x86_64", "release": "6.1.0"},
        "torch": {"version": "2.13.0+cpu", "import_error": None, "mps_built": False, "mps_available": False,
                  "cuda_version": None, "hip_version": None, "cuda_available": False, "cuda_devices": [],
                  "cpu_fp16_autocast": True},
        "environment": {"PYTORCH_ENABLE_MPS_FALLBACK": None, "CUDA_VISIBLE_DEVICES": None},
    }
    fixes = " ".join(finding.fix for finding in diagnose(linux) if finding.fix)
    assert "pytest --benchmark-only --perf-device cpu" in fixes
    assert "use --device" not in fixes
