"""Every perfsuite option is in `pytest --help`, in the README's option table and settable in [tool.perfsuite].

The in-process tests of this subject: tests/quick/test_options_everywhere.py."""

import subprocess
import sys

import pytest

from perfsuite.options.settings import OPTIONS

pytestmark = pytest.mark.slow


def test_pytest_help_prints_every_perfsuite_option(tmp_path):
    # argparse %-formats help texts: a bare percent sign in one of them would crash `pytest --help`.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True,
        text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    missing = [option.flag for option in OPTIONS if option.flag not in result.stdout]
    assert not missing
