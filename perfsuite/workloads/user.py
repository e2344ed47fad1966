"""The user's own workloads, found where pytest would find them, for the commands that run outside pytest.

A workload comes from one of two places:

- an installed package declares an entry point in the group `perfsuite.workloads` (in its pyproject.toml,
  `[project.entry-points."perfsuite.workloads"]`, e.g. `my-models = "my_package.benchmarks"`); the entry point
  names a module that registers its workloads with `register_workload` when imported, or a `Workload` object.
  `registered_workloads()` loads them with the built-in models, so pytest and every command see them alike.
- a project registers its workloads in its conftest.py files, which pytest imports before perfsuite checks its
  options. `load_project_workloads` imports the same files in pytest's order, so that `perfsuite list` and
  `perfsuite coverage` know the models a pytest session run from the project's root would.
"""

from __future__ import annotations

import glob
import importlib
import sys
import traceback
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from perfsuite.errors import UsageError
from perfsuite.workloads import Workload, register_workload

ENTRY_POINT_GROUP = "perfsuite.workloads"

# The conftest.py files this process imported: the ones outside a package all take the module name `conftest`,
# so sys.modules keeps only the last; importing one again would register its workloads twice.
_imported_conftests: set[Path] = set()


def load_installed_workloads() -> None:
    """Load every entry point of the group `perfsuite.workloads`; a UsageError names one that fails."""
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        package = entry_point.dist.name if entry_point.dist is not None else "an unknown package"
        try:
            loaded = entry_point.load()
            if isinstance(loaded, Workload):
                register_workload(loaded)
        except Exception as error:
            raise UsageError(
                f"entry point {entry_point.name} = {entry_point.value} (group {ENTRY_POINT_GROUP}, from {package}) "
                f"cannot be loaded: {type(error).__name__}: {error}; fix or uninstall {package}"
            ) from error


def pytest_ini_options(document: Mapping[str, Any]) -> dict[str, list[str]]:
    """`testpaths` and `pythonpath` of a pyproject.toml document's [tool.pytest.ini_options] (or pytest 9's
    [tool.pytest]), each a list of texts; absent ones are empty lists."""
    pytest_table = document.get("tool", {}).get("pytest", {})
    table = pytest_table.get("ini_options", pytest_table) if isinstance(pytest_table, dict) else {}
    return {key: _texts(table.get(key)) for key in ("testpaths", "pythonpath")}


def project_conftest_files(rootdir: Path, testpaths: Sequence[str]) -> list[Path]:
    """The conftest.py files pytest imports before checking its options when run in `rootdir` without test paths,
    in its order: for each of `testpaths` (glob patterns under `rootdir`; `rootdir` when none match) and each of its
    `test*` folders, the conftest.py of every folder from `rootdir` down to it."""
    rootdir = rootdir.resolve()
    anchors = [rootdir / found for pattern in testpaths
               for found in sorted(glob.glob(pattern, root_dir=rootdir, recursive=True))]
    anchors = [anchor for anchor in anchors if anchor.exists()] or [rootdir]
    anchors = [inner for anchor in anchors for inner in (anchor, *_test_folders(anchor))]
    files: list[Path] = []
    for anchor in anchors:
        folder = anchor if anchor.is_dir() else anchor.parent
        for parent in reversed((folder, *folder.parents)):
            conftest = parent / "conftest.py"
            # pytest's confcutdir is the rootdir: no conftest.py above it is imported.
            if parent not in rootdir.parents and conftest.is_file() and conftest not in files:
                files.append(conftest)
    return files


def load_project_workloads(pyproject: Path, document: Mapping[str, Any]) -> None:
    """Import the project's conftest.py files as pytest does (see `project_conftest_files`; the rootdir is the
    folder of `pyproject`, whose `pythonpath` in the parsed `document` is put on sys.path first), registering the
    workloads they declare. A file that fails to import is a UsageError naming the file and the line."""
    rootdir = pyproject.resolve().parent
    options = pytest_ini_options(document)
    for entry in reversed(options["pythonpath"]):
        if str(rootdir / entry) not in sys.path:
            sys.path.insert(0, str(rootdir / entry))
    for conftest in project_conftest_files(rootdir, options["testpaths"]):
        if conftest in _imported_conftests or _imported_by_pytest(conftest):
            continue
        try:
            module = _import_as_pytest_does(conftest)
            for plugin in _plugin_names(getattr(module, "pytest_plugins", ())):
                importlib.import_module(plugin)
        except Exception as error:
            raise UsageError(
                f"{_place(conftest, error)}: cannot import this conftest.py to find the project's workloads "
                f"({type(error).__name__}: {error}); pytest would fail on it too: fix it, or run from another folder "
                "(the folder of pyproject.toml is the project root)"
            ) from error
        _imported_conftests.add(conftest)


def _texts(value: Any) -> list[str]:
    # An ini-style option is a whitespace-separated text or, in TOML, a list.
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [str(item) for item in value]
    return []


def _test_folders(anchor: Path) -> list[Path]:
    return sorted(path for path in anchor.glob("test*") if path.is_dir()) if anchor.is_dir() else []


def _imported_by_pytest(conftest: Path) -> bool:
    # Within a pytest session (a test calling a command), its conftest.py modules are loaded already.
    files = (getattr(module, "__file__", None) for module in list(sys.modules.values()))
    return any(isinstance(file, str) and file.endswith("conftest.py") and Path(file).resolve() == conftest
               for file in files)


def _import_as_pytest_does(conftest: Path) -> Any:
    """pytest's default import mode (prepend): the first folder up that is not a package goes first on sys.path,
    and the file is imported by its dotted name there (`conftest` outside a package)."""
    base = conftest.parent
    while (base / "__init__.py").is_file():
        base = base.parent
    name = ".".join(conftest.relative_to(base).with_suffix("").parts)
    if not sys.path or sys.path[0] != str(base):
        sys.path.insert(0, str(base))
    sys.modules.pop(name, None)  # another folder's conftest.py under the same name
    module = importlib.import_module(name)
    if Path(getattr(module, "__file__", "") or "").resolve() != conftest:
        raise ImportError(f"importing {name!r} found {module.__file__} instead")
    return module


def _plugin_names(declared: object) -> list[str]:
    # A conftest.py's `pytest_plugins`: one module name or a sequence of them.
    if isinstance(declared, str):
        return [declared]
    return [str(name) for name in declared] if isinstance(declared, (list, tuple)) else []


def _place(conftest: Path, error: BaseException) -> str:
    """`conftest` with the line where `error` arose in it, if it did: a syntax error's, or its traceback's."""
    if isinstance(error, SyntaxError) and error.filename and Path(error.filename).resolve() == conftest:
        return f"{conftest}:{error.lineno}"
    lines = [line for frame, line in traceback.walk_tb(error.__traceback__)
             if Path(frame.f_code.co_filename).resolve() == conftest]
    return f"{conftest}:{lines[-1]}" if lines else str(conftest)
