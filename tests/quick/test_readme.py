"""The README stays true: CI runs its first screen's commands as the README writes them, and every link and every
script or record path (tools/, docs/records/) that the README and docs/ cite resolves."""

import glob
import importlib.util
import re
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


# --- the evidence the README and docs/ cite: tools/ and docs/records/ -------------------------------------------

HAND_WRITTEN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                *sorted((ROOT / "docs" / "records").rglob("README.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED_PATH = re.compile(r"(?<![\w./-])(?:tools|docs/records)/[\w.*/-]*[\w*/]")


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in HAND_WRITTEN
              for target in LINK.findall(page.read_text(encoding="utf-8"))
              if "://" not in target and not target.startswith("#")
              and not (page.parent / target.split("#")[0]).exists()]
    assert broken == []


def test_every_script_and_record_path_the_readme_and_docs_cite_exists():
    cited = {(page.relative_to(ROOT).as_posix(), path) for page in HAND_WRITTEN
             for path in CITED_PATH.findall(page.read_text(encoding="utf-8"))}
    assert len(cited) > 20, "the README and docs/ cite their scripts and records by path"
    missing = sorted(f"{page}: {path}" for page, path in cited if not glob.glob(str(ROOT / path)))
    assert missing == []
