"""Each A/B side's own project code, all of it, in one process: the base side imports the base checkout's version of
every module of the project under test, and the two sides can live in one process without either seeing the other's.

The project's code is every module whose file lies under the project root (`head_root`) or the base checkout
(`base_root`), except installed environments inside them (a `.venv` in the project) and the harness (perfsuite
itself, when the project is perfsuite's own repository: there only its built-in model modules belong to the project).
That covers a flat layout, a src layout installed with `pip install -e .` (its path entry or setuptools' editable
finder point at the head's tree), helpers a conftest imports from its folder, and modules imported lazily inside a
function.

`BaseFinder` is put first on `sys.meta_path` while the base side runs: a project module is taken from the base
checkout at the same path the head would take it from; a module only the head has is refused (ModuleNotFoundError),
never taken from the head. `SideCode.active()` makes one side current: its modules in `sys.modules` (and as their
parent package's attributes), its workload registry, its checkout as the working folder; leaving it takes them out
again. `leaks()` names any module the base side loaded from the head's tree: a side that cannot be sure says so.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

HARNESS_PACKAGE = "perfsuite"
# Files Python cannot load twice in one process under one name: a project holding one runs its sides in two processes.
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def _under(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


@dataclass(frozen=True)
class ProjectFiles:
    """Which files are the project's code: under `head_root` or `base_root`, outside installed environments, and
    outside the harness package except `model_modules` (perfsuite's own repository)."""

    head_root: Path
    base_root: Path
    model_modules: frozenset[str] = frozenset()

    @cached_property
    def environments(self) -> tuple[Path, ...]:
        """Folders of installed packages: this interpreter's prefixes and library folders."""
        places = {sys.prefix, sys.base_prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        return tuple(Path(os.path.realpath(place)) for place in places if place)

    @cached_property
    def harness(self) -> Path:
        return Path(os.path.realpath(Path(__file__).resolve().parent.parent))

    @cached_property
    def _answers(self) -> dict[str, bool]:
        return {}

    def is_project_file(self, file: str | os.PathLike[str] | None) -> bool:
        if not file or not os.path.isabs(file):  # some modules carry a bare name (torch.ops: "_ops.py")
            return False
        key = os.fspath(file)
        answer = self._answers.get(key)
        if answer is None:
            path = Path(os.path.realpath(key))
            answer = (_under(path, self.head_root) or _under(path, self.base_root)) and not (
                self.installed(path) or _under(path, self.harness))
            self._answers[key] = answer
        return answer

    def is_project_module(self, name: str, module: ModuleType | None) -> bool:
        """Whether `module` (named `name` in sys.modules) is the project's: its file or package folder lies in the
        project, or it is one of the built-in model modules of perfsuite's own repository."""
        if name in self.model_modules:
            return True
        if name == HARNESS_PACKAGE or name.startswith(HARNESS_PACKAGE + "."):
            return False
        file = getattr(module, "__file__", None)
        if file:
            return self.is_project_file(file)
        locations = list(getattr(module, "__path__", None) or [])
        return bool(locations) and self.is_project_file(locations[0])

    def to_base(self, path: Path) -> Path:
        """The same place in the base checkout."""
        return self.base_root / Path(os.path.realpath(path)).relative_to(self.head_root)

    def to_head(self, path: Path) -> Path:
        """The same place in the head's tree."""
        return self.head_root / Path(os.path.realpath(path)).relative_to(self.base_root)

    def installed(self, path: Path) -> bool:
        """Whether `path` lies in an installed environment (a `.venv` inside the project, say)."""
        return any(_under(path, place) for place in self.environments)

    def in_head_tree(self, path: Path) -> bool:
        """Whether a folder lies in the head's tree (outside the base checkout and installed environments)."""
        return _under(path, self.head_root) and not _under(path, self.base_root) and not self.installed(path)


def _spec_location(spec: importlib.machinery.ModuleSpec) -> str | None:
    if spec.origin and spec.origin not in ("built-in", "frozen", "namespace"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return str(locations[0]) if locations else None


class BaseFinder(importlib.abc.MetaPathFinder):
    """Finds the base checkout's version of every project module (see the module's docstring)."""

    def __init__(self, files: ProjectFiles) -> None:
        self.files = files

    def _search_path(self, path: Sequence[str] | None) -> list[str]:
        entries = sys.path if path is None else list(path)
        moved = []
        for entry in entries:
            real = Path(os.path.realpath(entry or os.getcwd()))
            if self.files.in_head_tree(real):
                moved.append(str(self.files.to_base(real)))
            elif path is not None:
                moved.append(entry)
        return moved

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.files.model_modules and (
            fullname == HARNESS_PACKAGE or fullname.startswith(HARNESS_PACKAGE + ".")
        ):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, self._search_path(path))
        if spec is not None:
            location = _spec_location(spec)
            if location and self.files.is_project_file(location):
                return spec
        other = self._others(fullname, path, target)
        if other is None and path is not None:  # a submodule of a base package: does the head's package have it?
            head_path = [str(self.files.to_head(Path(entry))) for entry in path
                         if _under(Path(os.path.realpath(entry)), self.files.base_root)]
            other = importlib.machinery.PathFinder.find_spec(fullname, head_path) if head_path else None
        location = _spec_location(other) if other is not None else None
        if other is None or location is None or not self.files.in_head_tree(Path(os.path.realpath(location))):
            return None
        moved = self.files.to_base(Path(location))
        if not moved.exists():
            raise ModuleNotFoundError(
                f"the base side has no module {fullname!r}: the head's {location} has no counterpart at {moved}",
                name=fullname,
            )
        package = other.submodule_search_locations is not None
        return importlib.util.spec_from_file_location(
            fullname, moved, submodule_search_locations=[str(moved.parent)] if package else None
        )

    def _others(self, fullname: str, path: Sequence[str] | None,
                target: ModuleType | None) -> importlib.machinery.ModuleSpec | None:
        """Where the head would find `fullname`: the other finders' answer (setuptools' editable finders too)."""
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            with contextlib.suppress(ImportError, ValueError):
                found = finder.find_spec(fullname, path, target)
                if found is not None:
                    return found
        return None


@dataclass
class SideCode:
    """One side's project code in this process: `modules` (while another side is active), its workload registry
    state, its checkout (the working folder while active) and, for the base, the finder of its modules."""

    name: str
    root: Path
    files: ProjectFiles
    finder: BaseFinder | None = None
    modules: dict[str, ModuleType] = field(default_factory=dict)
    registry: Any = None
    path_entries: tuple[str, ...] = ()

    def project_module_names(self) -> list[str]:
        return [name for name, module in list(sys.modules.items()) if self.files.is_project_module(name, module)]

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """This side current in the process: its modules, registry, path entries and folder; left as it was after."""
        from perfsuite.workloads import swap_registry_state

        outside = {name: sys.modules.pop(name) for name in self.project_module_names()}
        _unbind(outside)
        sys.modules.update(self.modules)
        _bind(self.modules)
        path_before = list(sys.path)
        sys.path[:0] = [entry for entry in self.path_entries if entry not in sys.path]
        if self.finder is not None:
            sys.meta_path.insert(0, self.finder)
        registry_outside = swap_registry_state(self.registry) if self.registry is not None else None
        folder = os.getcwd()
        os.chdir(self.root)
        try:
            yield
        finally:
            os.chdir(folder)
            if registry_outside is not None:
                self.registry = swap_registry_state(registry_outside)
            if self.finder is not None:
                sys.meta_path.remove(self.finder)
            sys.path[:] = path_before
            self.modules = {name: sys.modules.pop(name) for name in self.project_module_names()}
            _unbind(self.modules)
            sys.modules.update(outside)
            _bind(outside)

    def leaks(self) -> list[str]:
        """The modules of this (base) side that came from the head's tree: where it cannot be sure it runs its own
        code. Empty for the head side."""
        if self.finder is None:
            return []
        found = []
        for name, module in sorted(self.modules.items()):
            file = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
            if file and os.path.isabs(file) and self.files.in_head_tree(Path(os.path.realpath(file))):
                found.append(f"{name} ({file})")
        return found

    def extension_modules(self) -> list[str]:
        """Project modules that are compiled extensions, which one process cannot hold in two versions."""
        return sorted(name for name, module in self.modules.items()
                      if str(getattr(module, "__file__", "") or "").endswith(EXTENSION_SUFFIXES))


def _bind(modules: Mapping[str, ModuleType]) -> None:
    """Make each module its parent package's attribute (what `from package import module` reads first)."""
    for name, module in modules.items():
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name) if parent_name else None
        if parent is not None:
            setattr(parent, child, module)


def _unbind(modules: Mapping[str, ModuleType]) -> None:
    """Remove each module from its parent package's attributes where the parent stays (a package of the harness)."""
    for name, module in modules.items():
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name) if parent_name else None
        if parent is not None and getattr(parent, child, None) is module:
            delattr(parent, child)


def source_folders(files: Sequence[str | None]) -> list[str]:
    """The folders to put on the path for a model's source files, as pytest's default import mode does for a
    conftest.py and a test module: the first folder above each file that is not a package (no __init__.py), so
    that a conftest's `import helpers` of a sibling module works in a worker too."""
    folders: list[str] = []
    for file in files:
        if not file:
            continue
        folder = Path(file).resolve().parent
        while (folder / "__init__.py").exists() and folder.parent != folder:
            folder = folder.parent
        if str(folder) not in folders:
            folders.append(str(folder))
    return folders


def workload_files(sources: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str | None]:
    return [source.get("file") for model_sources in sources.values() for source in model_sources]
