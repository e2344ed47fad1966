"""Both A/B sides in one process, each with its own project code: the base side's modules come from the base
checkout (eagerly or lazily imported), the head's from the head's tree, and nothing of one side leaks into the other
however often they alternate; a module only the head has is refused on the base side, never taken from the head.

The tests of this subject that start processes or take long: tests/sessions/test_side_code_sessions.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perfsuite.run.side_code import BaseFinder, ProjectFiles, SideCode, source_folders

PACKAGE = {
    "mypkg/__init__.py": "",
    "mypkg/layers.py": "VALUE = {side!r}\n",
    "mypkg/models.py": ("from mypkg import layers\n\nEAGER = layers.VALUE\n\n\ndef lazy():\n"
                        "    import mypkg.lazy_part\n\n    return mypkg.lazy_part.VALUE\n"),
    "mypkg/lazy_part.py": "VALUE = {side!r} + '-lazy'\n",
}


def tree(root: Path, side: str) -> Path:
    for name, text in PACKAGE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.format(side=side))
    return root


@pytest.fixture
def sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    head_root = tree(tmp_path / "project", "head")
    base_root = tree(tmp_path / "project" / ".perfsuite" / "ab" / "abc", "base")
    (head_root / "mypkg" / "only_head.py").write_text("VALUE = 'head only'\n")
    monkeypatch.syspath_prepend(str(head_root))  # as an editable install or pytest's rootdir puts it
    files = ProjectFiles(head_root, base_root)
    head = SideCode("head", head_root, files, registry=({}, False, False))
    base = SideCode("base", base_root, files, BaseFinder(files), registry=({}, False, False))
    yield head, base
    for name in [name for name in sys.modules if name == "mypkg" or name.startswith("mypkg.")]:
        del sys.modules[name]


def read(side: SideCode) -> tuple[str, str, str]:
    with side.active():
        import mypkg.models

        return mypkg.models.EAGER, mypkg.models.lazy(), mypkg.models.__file__


def test_each_side_runs_its_own_modules_eager_and_lazy_however_often_they_alternate(sides):
    head, base = sides
    for _ in range(3):
        eager, lazy, file = read(base)
        assert (eager, lazy) == ("base", "base-lazy") and Path(file).is_relative_to(base.root)
        eager, lazy, file = read(head)
        assert (eager, lazy) == ("head", "head-lazy") and not Path(file).is_relative_to(base.root)
    assert base.leaks() == [] and head.leaks() == []
    assert not any(name == "mypkg" or name.startswith("mypkg.") for name in sys.modules)  # nothing left outside


def test_a_function_of_one_side_called_later_still_sees_its_own_side(sides):
    head, base = sides
    with base.active():
        import mypkg.models

        base_lazy = mypkg.models.lazy
    with head.active():
        import mypkg.models

        assert mypkg.models.lazy() == "head-lazy"
    with base.active():
        assert base_lazy() == "base-lazy"


def test_a_module_only_the_head_has_is_refused_on_the_base_side(sides):
    head, base = sides
    with base.active(), pytest.raises(ModuleNotFoundError, match="the base side has no module 'mypkg.only_head'"):
        import mypkg.only_head  # noqa: F401
    with head.active():
        import mypkg.only_head

        assert mypkg.only_head.VALUE == "head only"


def test_each_side_keeps_its_own_workload_registry(sides):
    from perfsuite import Workload
    from perfsuite.workloads import register_workload, registered_workloads

    head, base = sides
    for side in (head, base):
        with side.active():
            register_workload(Workload(name="twin", build_module=lambda profile, side=side.name: side,
                                       make_inputs=lambda profile, batch_size: None, batch_sizes={}))
    for side in (base, head, base):
        with side.active():
            assert registered_workloads()["twin"].build_module("smoke") == side.name
    assert "twin" not in registered_workloads()


def test_a_conftest_folder_goes_on_the_path_as_pytest_puts_it(tmp_path: Path):
    (tmp_path / "tests" / "pkg").mkdir(parents=True)
    (tmp_path / "tests" / "pkg" / "__init__.py").write_text("")
    folders = source_folders([str(tmp_path / "tests" / "conftest.py"), str(tmp_path / "tests" / "pkg" / "m.py")])
    assert folders == [str(tmp_path / "tests")]
