"""How an A/B side finds its models: the project's files moved to the base checkout, perfsuite's own built-in model
modules taken from the base checkout while the harness stays this one, and the windows sized from the round. (Each
side's own code in one process: tests/unit/test_side_code.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from perfsuite.records import Case, WorkloadSource
from perfsuite.run.ab import MIN_WINDOWS, window_plan
from perfsuite.session.ab import rebased_sources


def test_sources_under_the_project_move_to_the_same_path_in_the_base_checkout(tmp_path):
    root, base = tmp_path / "project", tmp_path / "project" / ".perfsuite" / "ab" / "abc"
    (root / "models").mkdir(parents=True)
    sources = {"wide": [WorkloadSource(module="conftest", file=str(root / "conftest.py")),
                        WorkloadSource(module="models.wide", file=str(root / "models" / "wide.py")),
                        WorkloadSource(module="torch.nn", file="/usr/lib/python3/torch/nn/__init__.py")]}
    moved = rebased_sources(sources, root, base)
    assert [s["file"] for s in moved["wide"]] == [
        str(base / "conftest.py"), str(base / "models" / "wide.py"), "/usr/lib/python3/torch/nn/__init__.py"]
    assert [s["module"] for s in moved["wide"]] == ["conftest", "models.wide", "torch.nn"]


def test_the_base_side_imports_perfsuites_built_in_model_modules_from_the_base_checkout(tmp_path):
    """In perfsuite's own repository the built-in model modules are the code under test: the base side takes them
    from the base checkout, while the harness (perfsuite.run.measure) stays this checkout's."""
    root = Path(__file__).resolve().parents[2]
    base = tmp_path / "base"
    folder = base / "perfsuite" / "workloads"
    folder.mkdir(parents=True)
    (folder / "resnet.py").write_text("FROM_BASE = True\nWORKLOADS = ()\n")
    program = (
        "import sys\nfrom pathlib import Path\n"
        "from perfsuite.run.side_code import BaseFinder, ProjectFiles, SideCode\n"
        "from perfsuite.workloads import MODEL_MODULES\nimport perfsuite.run.measure  # the harness, loaded first\n"
        f"files = ProjectFiles(Path({str(root)!r}), Path({str(base)!r}), frozenset(MODEL_MODULES))\n"
        f"side = SideCode('base', Path({str(base)!r}), files, BaseFinder(files), registry=({{}}, False, False))\n"
        "with side.active():\n"
        "    import perfsuite.workloads.resnet as resnet, perfsuite.run.measure as measure\n"
        "    try:\n        import perfsuite.workloads.bert\n    except ModuleNotFoundError as error:\n"
        "        print(error)\n"
        "print(resnet.FROM_BASE, resnet.__file__)\nprint(measure.__file__)\n"
        "import perfsuite.workloads.resnet as head_resnet\nprint(hasattr(head_resnet, 'FROM_BASE'))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    missing, resnet_line, measure_file, head_has_it = done.stdout.splitlines()
    assert resnet_line == f"True {folder / 'resnet.py'}"
    assert Path(measure_file).resolve().is_relative_to((root / "perfsuite").resolve())  # the harness stays
    assert "the base side has no module 'perfsuite.workloads.bert'" in missing  # never the head's instead
    assert head_has_it == "False"  # outside the base side, the head's own module again


def test_windows_last_a_share_of_the_time_and_hold_whole_rounds():
    assert window_plan(0.001, 1, 1.0) == (0.125, 8)
    window_s, windows = window_plan(0.2, 1, 1.0)  # a slow step: two rounds a window, at least MIN_WINDOWS
    assert window_s == 0.4 and windows == MIN_WINDOWS
    assert window_plan(0.0001, 50, 0.4)[0] == 0.05


def test_a_round_past_the_first_ones_takes_the_cheapest_blocks_that_fit_in_what_is_left():
    from perfsuite.run.ab import cases_that_fit

    cases = [Case("cpu", "fp32", model, 4, "infer", "smoke") for model in ("a", "b", "c", "d")]
    costs = {case.benchmark_id: cost for case, cost in zip(cases, (30.0, 5.0, 12.0, 8.0), strict=True)}
    assert [case.model for case in cases_that_fit(cases, costs, 26.0)] == ["b", "c", "d"]
    assert [case.model for case in cases_that_fit(cases[::-1], costs, 14.0)] == ["d", "b"]
    assert cases_that_fit(cases, costs, 4.0) == []
    assert cases_that_fit(cases, costs, 100.0) == cases
