"""Both A/B sides in one process, each with its own project code: the base side's modules come from the base
checkout (eagerly or lazily imported), the head's from the head's tree, and nothing of one side leaks into the other
however often they alternate; a module only the head has is refused on the base side, never taken from the head.

The in-process tests of this subject: tests/quick/test_side_code.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_a_side_whose_import_patches_torch_is_named_and_cannot_share_a_process(tmp_path: Path):
    """torch is shared by the sides of one process: a head that patches torch.nn.Linear.forward when imported would
    slow the base too (a silent A/A), so the worker names it and the job measures in process pairs instead."""
    import json
    import subprocess

    from perfsuite.run.ab import AbResults, OneProcessRefused, SideSpec, Worker, check_hello

    model = ("import torch\nfrom perfsuite import Workload, register_workload\n{patch}\n"
             "register_workload(Workload(name='lin', build_module=lambda profile: torch.nn.Linear(4, 4),\n"
             "    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 4),\n"
             "    batch_sizes={{'smoke': (2,)}}))\n")
    patch = "_forward = torch.nn.Linear.forward\ntorch.nn.Linear.forward = lambda self, x: _forward(self, x)\n"
    head_root, base_root = tmp_path / "project", tmp_path / "project" / ".perfsuite" / "ab" / "abc"
    for root, text in ((head_root, model.format(patch=patch)), (base_root, model.format(patch=""))):
        root.mkdir(parents=True, exist_ok=True)
        (root / "models.py").write_text(text)
    sources = {"lin": [{"module": "models", "file": str(head_root / "models.py")}]}
    base_sources = {"lin": [{"module": "models", "file": str(base_root / "models.py")}]}
    spec = {"head_root": str(head_root), "threads": 1, "warmup_steps": 1, "ddp_processes": None, "figure": "step",
            "rounds": {"min_rounds": 1, "max_time_s": 0.1, "min_time_s": 1e-6}, "fresh_process": False,
            "model_modules": [], "check_models": ["lin"],
            "sides": [{"name": "base", "root": str(base_root), "workload_sources": base_sources},
                      {"name": "head", "root": str(head_root), "workload_sources": sources}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "-m", "perfsuite.run.worker", str(tmp_path / "spec.json")],
                          input='{"op": "exit"}\n', capture_output=True, text=True, timeout=300, cwd=tmp_path)
    hello = json.loads(done.stdout.splitlines()[0])
    assert hello["sides"]["head"]["patches_torch"] == ["torch.nn.Linear.forward"]
    assert hello["sides"]["base"]["patches_torch"] == []

    class Answered(Worker):
        def __init__(self) -> None:
            self.sides = [SideSpec("base", sys.executable, base_root, base_sources),
                          SideSpec("head", sys.executable, head_root, sources)]
            self._hello = hello

    with pytest.raises(OneProcessRefused, match=r"the head side's code changes torch itself when imported "
                                                r"\(torch.nn.Linear.forward\)"):
        answered = Answered()
        check_hello(answered, answered.sides, AbResults())
