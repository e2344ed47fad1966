"""The `slow` mark (tests/conftest.py) goes on every test that starts pytest or perfsuite sessions, and only there:
`pytest -m "not slow"` is the quick subset."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

TESTS_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@pytest.fixture
def starts_sessions(request):
    """tests/conftest.py's rule, as pytest loaded it."""
    (conftest,) = [
        plugin for plugin in request.config.pluginmanager.get_plugins()
        if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == TESTS_CONFTEST
    ]
    return conftest.starts_sessions


def item(function, **fixtures):
    """Enough of a collected test for the rule: its function and its fixtures' functions."""
    definitions = {name: [SimpleNamespace(func=func)] for name, func in fixtures.items()}
    return SimpleNamespace(fixturenames=list(fixtures), function=function,
                           _fixtureinfo=SimpleNamespace(name2fixturedefs=definitions))


def runs_pytest_in_a_subprocess():
    subprocess.run([sys.executable, "-m", "pytest", "--co"], check=False)


def runs_the_perfsuite_command():
    command = [sys.executable, "-m", "perfsuite.cli", "list"]
    subprocess.run(command, check=False)


def calls_a_helper_that_runs_pytest():
    runs_pytest_in_a_subprocess()


def runs_python_code_in_a_subprocess():
    subprocess.run([sys.executable, "-c", "import perfsuite"], check=False)


def reads_a_file():
    Path(__file__).read_text()


def test_a_test_asking_for_pytester_is_slow(starts_sessions):
    assert starts_sessions(SimpleNamespace(fixturenames=["pytester"], function=reads_a_file))


@pytest.mark.parametrize("function", [runs_pytest_in_a_subprocess, runs_the_perfsuite_command,
                                      calls_a_helper_that_runs_pytest])
def test_a_test_starting_a_pytest_or_perfsuite_process_is_slow(starts_sessions, function):
    assert starts_sessions(item(function))


def test_a_fixture_starting_a_perfsuite_process_makes_its_tests_slow(starts_sessions):
    assert starts_sessions(item(reads_a_file, perfsuite_run=runs_the_perfsuite_command))


@pytest.mark.parametrize("function", [reads_a_file, runs_python_code_in_a_subprocess])
def test_a_test_starting_no_session_is_not_slow(starts_sessions, function):
    assert not starts_sessions(item(function))
