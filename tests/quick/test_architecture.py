"""The arrows run one way (import-linter's contracts in pyproject.toml), and only the device backends test a device's
name: code elsewhere asks `perfsuite.run.devices.backend(name)` for a trait."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "perfsuite"
DEVICE_BACKENDS = PACKAGE / "run" / "devices"
DEVICE_NAMES = frozenset({"cpu", "cuda", "mps"})
# The comparisons with a device's name left outside the backends, each with a comment saying why it needs the name.
MAX_DEVICE_NAME_TESTS = 3
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's check of the contracts in `config`, as `lint-imports` runs it in CI."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)], cwd=cwd, capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(cwd)},
    )


def is_device_name(node: ast.expr) -> bool:
    """Whether `node` is a device's name as a literal, or a tuple, list or set of nothing else ("cuda", ("mps",))."""
    if isinstance(node, ast.Constant):
        return node.value in DEVICE_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(is_device_name(element) for element in node.elts)
    return False


def device_name_tests(source: str) -> list[tuple[int, str]]:
    """The line and text of every comparison (==, !=, in, is, a `case` pattern) with a device's name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(map(is_device_name, [node.left, *node.comparators])):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and is_device_name(node.value):
            found.append((node.lineno, f"case {ast.unparse(node.value)}"))
    return found


def test_the_import_contracts_are_kept():
    checked = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_import_check_fails_on_an_import_against_the_layers(tmp_path):
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("")
    (package / "low.py").write_text("import layered.high\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.importlinter]
        root_package = "layered"

        [[tool.importlinter.contracts]]
        name = "high above low"
        type = "layers"
        layers = ["layered.high", "layered.low"]
    """))
    checked = lint_imports(tmp_path / "pyproject.toml", tmp_path)
    assert checked.returncode != 0 and "BROKEN" in checked.stdout


def test_the_scan_finds_each_way_of_testing_a_device_name():
    source = textwrap.dedent("""
        a = device == "cuda"
        b = "cpu" != case.device
        c = device in ("cuda", "mps")
        d = devices == (("mps",), ("cuda",))
        e = dtype == "fp16"
        match device:
            case "mps":
                pass
    """)
    assert [line for line, _ in device_name_tests(source)] == [2, 3, 4, 5, 8]


def test_only_the_device_backends_test_a_device_name():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py")) if not path.is_relative_to(DEVICE_BACKENDS)
        for line, text in device_name_tests(path.read_text(encoding="utf-8"))
    ]
    assert len(offenders) <= MAX_DEVICE_NAME_TESTS, (
        f"{len(offenders)} comparisons with a device name outside perfsuite/run/devices/ (at most "
        f"{MAX_DEVICE_NAME_TESTS}); ask perfsuite.run.devices.backend(name) for a trait instead:\n"
        + "\n".join(offenders)
    )
