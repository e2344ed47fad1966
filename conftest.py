"""Project-wide pytest configuration; perfsuite's plugin itself loads through its pytest11 entry point.

A benchmarks-only session (`pytest --benchmark-only`, the README's first command) collects the benchmark folders
alone. The other test folders are never imported there, so what they import (the `[test]` extra: hypothesis,
selenium, ...) need not be installed: this holds for any test-only dependency added later, where a guard in each
module would hold only for the modules someone remembered to guard. `.ci/run` runs that first command as the README
gives it, on a fresh clone with the default install, so a folder that breaks it cannot land.
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
# Where this repository keeps its benchmarks (tests using pytest-benchmark's `benchmark` fixture to measure models).
BENCHMARK_FOLDERS = (ROOT / "tests" / "benchmarks",)
TESTS = ROOT / "tests"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under --benchmark-only, skip every test folder and module that is not, and holds no, benchmark folder."""
    if not config.getoption("benchmark_only", False):
        return None
    path = collection_path.resolve()
    if not path.is_relative_to(TESTS) or path == TESTS:
        return None
    inside_or_above = any(path.is_relative_to(folder) or folder.is_relative_to(path) for folder in BENCHMARK_FOLDERS)
    return None if inside_or_above else True
