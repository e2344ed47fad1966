"""nox sessions share one virtualenv: the first session builds it, later ones start at once."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

nox = pytest.importorskip("nox")

REPOSITORY = Path(__file__).resolve().parents[2]


class RecordingSession:
    """Enough of a nox session for the noxfile's helpers: its cache folder, no extra arguments, and the commands it
    was asked to run."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self.posargs: list[str] = []
        self.commands: list[tuple[str, ...]] = []

    def run(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.commands.append(args)
        if args[1:3] == ("-m", "venv"):
            Path(args[3]).mkdir(parents=True)
            (Path(args[3]) / "pyvenv.cfg").touch()


@pytest.fixture
def noxfile(monkeypatch) -> ModuleType:
    """The project's noxfile, loaded as nox loads it, with nox's registry and options restored afterwards."""
    monkeypatch.setattr(nox.registry, "_REGISTRY", {})
    monkeypatch.setattr(nox, "options", copy.deepcopy(nox.options))
    monkeypatch.chdir(REPOSITORY)
    spec = importlib.util.spec_from_file_location("perfsuite_noxfile", REPOSITORY / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_session_builds_a_virtualenv_of_its_own(noxfile):
    sessions = nox.registry.get()
    backends = {func.venv_backend or nox.options.default_venv_backend for func in sessions.values()}
    assert backends == {"none"} and "tests" in sessions


def test_tests_stays_the_default_session(noxfile):
    assert nox.options.sessions == ["tests"]


def test_the_first_session_builds_the_shared_environment_and_the_next_reuses_it(noxfile, tmp_path):
    first, second = RecordingSession(tmp_path), RecordingSession(tmp_path)
    noxfile.run(first, "perfsuite", "doctor")
    noxfile.run(second, "perfsuite", "coverage")
    commands = tmp_path / noxfile.SHARED_ENV_NAME / "bin"
    assert [c[:3] for c in first.commands] == [
        (sys.executable, "-m", "venv"),
        (str(commands / "python"), "-m", "pip"),
        (str(commands / "perfsuite"), "doctor"),
    ]
    assert second.commands == [(str(commands / "perfsuite"), "coverage")]


def test_a_changed_dependency_file_reinstalls_into_the_shared_environment(noxfile, tmp_path):
    noxfile.run(RecordingSession(tmp_path), "perfsuite", "doctor")
    (tmp_path / noxfile.SHARED_ENV_NAME / noxfile.INSTALL_STAMP_NAME).write_text("an older pyproject.toml")
    again = RecordingSession(tmp_path)
    noxfile.run(again, "perfsuite", "doctor")
    assert [c[1:3] for c in again.commands] == [("-m", "pip"), ("doctor",)]


def test_quick_runs_the_tests_not_marked_slow(noxfile, tmp_path):
    noxfile.run(RecordingSession(tmp_path), "perfsuite", "doctor")
    quick = RecordingSession(tmp_path)
    nox.registry.get()["quick"](quick)
    ((command, *args),) = quick.commands
    assert (Path(command).name, args[:2]) == ("pytest", ["-m", "not slow"])
