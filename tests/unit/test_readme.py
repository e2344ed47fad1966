"""The README's first screen stays true: CI runs exactly its test command."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _first_screen_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = quick_start.split("```sh\n")[1:]
    return [block.split("\n```", 1)[0].strip() for block in blocks]


def test_first_screen_has_the_benchmark_and_the_test_command():
    bench, tests = _first_screen_commands()[:2]
    assert bench.endswith("pytest --benchmark-only")
    assert tests.endswith("pytest --benchmark-skip -n 2 && mypy")


def test_ci_runs_the_readme_test_command():
    tests_command = _first_screen_commands()[1]
    assert tests_command in (ROOT / ".ci" / "run").read_text()
