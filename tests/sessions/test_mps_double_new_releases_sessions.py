"""The MPS double as torch 2.14.0, 2.14.1 and 2.15.0 behave, as their macOS wheels say (perfsuite/matrix/
mps_support.py and tests/mps_double/releases.py cite file and line), with perfsuite's own answers on top; and a
made-up torch 2.16.0, which the double refuses to pretend to know and perfsuite reports as unchecked wherever it
uses a fact that release might change.

The in-process tests of this subject: tests/quick/test_mps_double_new_releases.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.quick.test_mps_double_new_releases import no_mps_variables  # noqa: F401 (autouse here too)

pytestmark = pytest.mark.slow


# A made-up 2.16.0: refused by the double, reported as unchecked by perfsuite


CONFTEST_AS_2_16 = f"""
import sys

sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from mps_double import MacFacts, MpsDouble

# this pytest process is the test's own: nothing to restore
MpsDouble(torch_version="2.16.0", behaves_as="2.15.0", mac=MacFacts(macos_version="15.1")).install(setattr)
"""


@pytest.mark.slow
def test_2_16_pytest_header_says_which_mps_facts_are_assumed(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST_AS_2_16)
    (tmp_path / "test_models.py").write_text((Path(__file__).parents[1] / "benchmarks" / "test_models.py").read_text())
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "--perf-device", "mps",
               "--perf-profile", "smoke", "--perf-model", "resnet18"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ("perfsuite: MPS facts unchecked for torch 2.16.0: the macOS MPS needs, the ops that fall back to the CPU "
            "and how MPS events are timed are assumed as in torch 2.15.0") in done.stdout
