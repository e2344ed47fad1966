"""The README's first screen stays true: CI runs its commands as the README writes them."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "readme_commands.py"


def _first_screen_commands() -> list[str]:
    spec = importlib.util.spec_from_file_location("readme_commands", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands: list[str] = module.first_screen_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    return commands


def test_first_screen_has_the_benchmark_and_the_test_command():
    bench, tests = _first_screen_commands()[:2]
    assert bench.endswith("pytest --benchmark-only")
    assert "[test]" not in bench, "the first command must work with the default install alone"
    assert tests.endswith("pytest --benchmark-skip -n 2 && mypy")


def test_ci_runs_the_readme_test_command():
    tests_command = _first_screen_commands()[1]
    assert tests_command in (ROOT / ".ci" / "run").read_text()


def test_ci_runs_the_first_command_from_the_readme_itself():
    """The first command is read from the README when CI runs (no copy that could drift), in a fresh clone."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_commands.py 0" in ci and "git clone" in ci
    printed = subprocess.run([sys.executable, str(SCRIPT), "0"], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == _first_screen_commands()[0]
