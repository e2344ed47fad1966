"""The plugin as a user meets it: pytest runs in a subprocess over a scratch project.

The tests of this subject that start processes or take long: tests/sessions/test_plugin_sessions.py."""

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_model"
README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_shows_the_example_that_these_tests_run():
    readme = README.read_text()
    assert (EXAMPLE / "conftest.py").read_text() in readme
    assert (EXAMPLE / "test_benchmarks.py").read_text() in readme
