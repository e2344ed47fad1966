"""`perfsuite coverage --runtime` end to end under the MPS double: the command sees MPS, starts its probe on "mps" with
the fallback variables, and the probe's fallback warnings and profiler lines come back as findings. Plumbing, not
Metal: which ops fall back is the test's choice (MPS_DOUBLE_FALLBACK_OPS), as tests/mps_double/site arranges."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[2]
DOUBLE_SITE = REPOSITORY / "tests" / "mps_double" / "site"


def coverage_runtime(tmp_path: Path, fallback_ops: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE_SITE), str(REPOSITORY)]),
        "MPS_DOUBLE_FALLBACK_OPS": fallback_ops,
    }
    environment.pop("PYTORCH_ENABLE_MPS_FALLBACK", None)  # the command sets it for its probe, not the user
    return subprocess.run(
        [sys.executable, "-m", "perfsuite.cli", "coverage", "--runtime", "--model", "resnet18", "--mode", "train",
         "--pyproject", str(REPOSITORY / "pyproject.toml")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    folder = tmp_path_factory.mktemp("coverage-runtime")
    return {"clean": coverage_runtime(folder, ""), "falling back": coverage_runtime(folder, "aten::convolution")}


def test_a_run_where_nothing_falls_back_passes_and_says_so(runs):
    clean = runs["clean"]
    assert clean.returncode == 0, clean.stdout[-2000:] + clean.stderr[-2000:]
    assert "runtime check on MPS" in clean.stdout and "no CPU fallback seen" in clean.stdout
    assert "the run stopped" not in clean.stdout


def test_an_op_that_falls_back_at_runtime_fails_the_check_naming_the_op_its_phase_and_calls(runs):
    falling = runs["falling back"]
    assert falling.returncode == 1, falling.stdout[-2000:] + falling.stderr[-2000:]
    assert "aten::convolution: train/forward 20 call(s), profiler log" in falling.stdout
