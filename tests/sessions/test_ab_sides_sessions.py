"""How an A/B side finds its models: the project's files moved to the base checkout, perfsuite's own built-in model
modules taken from the base checkout while the harness stays this one, and the windows sized from the round. (Each
side's own code in one process: tests/quick/test_side_code.py.)

The in-process tests of this subject: tests/quick/test_ab_sides.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


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
