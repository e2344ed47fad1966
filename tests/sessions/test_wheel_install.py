"""The README's way into a project of one's own: perfsuite built as a wheel, installed into a fresh virtualenv, and a
user project's benchmarks run with it, with no perfsuite checkout in sight.

The fresh virtualenv borrows the already-installed dependencies (torch and the rest: no network here) through a .pth
line naming this environment's site-packages; a .pth line adds the folder without running the .pth files inside it,
so this checkout's editable install is not seen and perfsuite comes from the wheel alone.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLE = REPOSITORY / "examples" / "user_model"


def _run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with perfsuite installed from a wheel built from a copy of the sources."""
    root = tmp_path_factory.mktemp("wheel-install")
    source = root / "src"
    shutil.copytree(REPOSITORY / "perfsuite", source / "perfsuite", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPOSITORY / name, source / name)
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", root / "dist",
                 source, cwd=root)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (root / "dist").glob("perfsuite-*.whl")
    venv = root / "venv"
    assert _run(sys.executable, "-m", "venv", venv, cwd=root).returncode == 0
    python = venv / "bin" / "python"
    site_packages = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                              cwd=root).stdout.strip())
    (site_packages / "borrowed-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    installed = _run(python, "-m", "pip", "install", "--no-deps", "--no-index", wheel, cwd=root)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def test_the_wheel_installs_perfsuite_into_the_fresh_venv_not_from_the_checkout(fresh_venv, tmp_path):
    where = _run(fresh_venv / "bin" / "python", "-c", "import perfsuite; print(perfsuite.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(fresh_venv), where.stdout + where.stderr
    assert _run(fresh_venv / "bin" / "perfsuite", "--version", cwd=tmp_path).stdout.startswith("perfsuite ")


def test_a_user_projects_benchmarks_run_with_the_installed_wheel(fresh_venv, tmp_path):
    project = tmp_path / "my-project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pyproject.toml").write_text('[tool.perfsuite]\ndevice = "cpu"\nwarmup = 1\n', encoding="utf-8")
    result = _run(fresh_venv / "bin" / "python", "-m", "pytest", "--benchmark-only", "-p", "no:cacheprovider",
                  "--benchmark-min-rounds", "3", "--benchmark-max-time", "0.01", cwd=project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "cpu-fp32-tiny-mlp-bs8-train-smoke" in result.stdout
    assert (project / ".perfsuite" / "summary.json").is_file()
