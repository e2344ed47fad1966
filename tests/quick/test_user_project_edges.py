"""Rough edges a user's own project met, each fixed: output folders, collection, and hints that name only what a
user's project has and the options pytest really takes.

The tests of this subject that start processes or take long: tests/sessions/test_user_project_edges_sessions.py."""


import pytest

from perfsuite.analyse.compare import CompareError
from perfsuite.commands.compare import _default_b
from perfsuite.doctor.diagnosis import diagnose
from perfsuite.render.gains import _HOW_TO_GET


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
