"""The selftest's own pieces: the matmul chain that carries a known slowdown, the plan, the worker's records, the
pure analysis (splits, judging through the gate's own decision code, rates), the report and the command's bad
input. Synthetic `Run` records stand in for measured ones; no selftest subprocess is started.

The in-process tests of this subject: tests/quick/test_selftest.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


# Slowed chains of the shared analysis: extra blocks -> how many times the plain chain's time they take.
WELL_INSIDE_THE_BAND, HALF_AGAIN, THREEFOLD = 1, 10, 40


# --- the command ----------------------------------------------------------------------------------------------


def test_command_rejects_an_unknown_device_naming_the_valid_ones():
    completed = subprocess.run([sys.executable, "-m", "perfsuite.cli", "selftest", "--device", "mps"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "--device: invalid choice: 'mps'" in completed.stderr and "'cpu', 'cuda'" in completed.stderr
