"""What perfsuite's default install provides: pytest-benchmark's flags that the README hands to users work."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_default_install_brings_what_benchmark_histogram_needs():
    # --benchmark-histogram runs every benchmark, then imports pygal: without the extra it dies at the end.
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    requirements = [Requirement(line) for line in dependencies]
    extras = {extra for r in requirements if r.name == "pytest-benchmark" for extra in r.extras}
    assert "histogram" in extras
