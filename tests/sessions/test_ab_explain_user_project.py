"""A/B verdicts explained by their ops, in a user's own project run as a user runs it (a scratch git repository,
`pytest --benchmark-only --perf-ab HEAD~1`): a commit that runs every norm layer twice reads as the norm op's calls
doubled and most of the change in it; a commit that adds a host-side wait to every module reads as host time outside
the ops; a comment-only commit changes no op; on the MPS double a head commit whose new op falls back to the CPU
names it as a new CPU fallback. `--perf-ab-explain all` explains every case, so each test checks the explanation
whatever verdict the busy machine gives; the default (changed) is checked where the verdict is certain."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.scratch_project import commit, make_project
from tests.sessions.test_ab_user_project import ab

pytestmark = pytest.mark.slow
DOUBLE_SITE = Path(__file__).resolve().parents[1] / "mps_double" / "site"

MODEL = '''import time

import torch
from perfsuite import Workload, register_workload


class Normed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(256) for _ in range(4))

    def forward(self, x):
        for norm in self.norms:
            x = torch.relu(norm(x))  # NORM
        return x


def build(profile):
    model = Normed()
    # HOOKS
    return model


register_workload(Workload(
    name="normed", build_module=build,
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 64, 256), batch_sizes={"smoke": (16,)},
))
'''
NORM_TWICE = ("            x = torch.relu(norm(x))  # NORM\n",
              "            x = torch.relu(norm(norm(x)))  # NORM run twice\n")
# A host-side wait after every module's forward (Python busy-waiting 300 us: no op runs in it).
HOST_WAIT = ("    # HOOKS\n", """    def wait(module, inputs, output):
        end = time.perf_counter() + 300e-6
        while time.perf_counter() < end:
            pass

    for module in model.modules():
        module.register_forward_hook(wait)
""")
COMMENT = ("  # NORM\n", "  # NORM: each block normalises, then rectifies\n")
# The tests that check the explanation whatever the verdict (they assert none) stop measuring after the first blocks,
# which every case gets whatever the budget: an A/A case at this band could take the default 300 s to decide, which
# they do not look at.
EXPLAINED_WHATEVER_THE_VERDICT = ("--perf-ab-budget", "1")
PYPROJECT = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer"
dtype = "fp32"
threads = 1
warmup = 2
tolerance = 0.3
"""


def normed_project(tmp_path: Path, change: tuple[str, str]) -> Path:
    """A scratch git repository: the model committed on main, then `change` (old text -> new) committed on it."""
    root = make_project(tmp_path / "project", MODEL, PYPROJECT)
    assert change[0] in MODEL
    (root / "conftest.py").write_text(MODEL.replace(*change))
    commit(root, "the change")
    return root


def explained_case(project: Path, result: Any) -> dict[str, Any]:
    (case,) = json.loads((project / ".perfsuite" / "ab.json").read_text())["cases"]
    assert case["explanation"] is not None, (case["explanation_error"], result.stdout[-3000:], result.stderr[-3000:])
    return case


def test_a_norm_run_twice_is_explained_by_the_norm_op_called_twice_as_often(tmp_path):
    project = normed_project(tmp_path, NORM_TWICE)
    result = ab(project, "--perf-ab", "HEAD~1", "--perf-ab-explain", "all", *EXPLAINED_WHATEVER_THE_VERDICT)
    case = explained_case(project, result)
    why = case["explanation"]
    norm = next(op for op in why["calls_changed"] if op["name"] == "aten::native_layer_norm")
    assert (norm["base_calls"], norm["head_calls"]) == (4, 8)
    top = why["top"][0]
    assert top["name"] == "aten::native_layer_norm", why["lines"]
    assert top["head_s"] - top["base_s"] > 0.5 * why["profiled_change_s"] > 0, why["lines"]
    assert why["new_ops"] == [] and why["gone_ops"] == [] and why["basis"] == "host"
    # the terminal shows it under the case, the job summary in full
    assert "aten::native_layer_norm: calls 4 -> 8 a step" in result.stdout
    assert "aten::native_layer_norm: calls 4 -&gt; 8 a step" in (project / ".perfsuite" / "ab.md").read_text()
    measuring = json.loads((project / ".perfsuite" / "ab.json").read_text())["measuring"]
    assert measuring["explain"] == "all" and 0 < measuring["explaining_s"] < measuring["spent_s"]


def test_a_host_side_wait_per_module_is_explained_as_host_time_outside_the_ops(tmp_path):
    project = normed_project(tmp_path, HOST_WAIT)
    result = ab(project, "--perf-ab", "HEAD~1")  # the default explains the changed cases: 5 x 300 us is certain
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    case = explained_case(project, result)
    assert case["status"] == "regressed"
    why = case["explanation"]
    assert why["top"][0]["name"] == "(host time outside ops)", why["lines"]
    base_s, head_s = why["host_outside_ops_s"]
    assert head_s - base_s > 5 * 250e-6, why["lines"]  # five modules (the model and its four norms) wait 300 us
    assert why["calls_changed"] == [] and why["new_ops"] == [], why["lines"]
    assert "host time outside ops (Python, hooks, waits)" in result.stdout


def test_a_comment_only_commit_changes_no_op(tmp_path):
    project = normed_project(tmp_path, COMMENT)
    result = ab(project, "--perf-ab", "HEAD~1", "--perf-ab-explain", "all", *EXPLAINED_WHATEVER_THE_VERDICT)
    why = explained_case(project, result)["explanation"]
    assert why["calls_changed"] == [] and why["new_ops"] == [] and why["gone_ops"] == [], why["lines"]
    assert "calls changed: none; new ops: none; gone: none" in why["lines"]


def test_the_default_explains_no_unchanged_case_and_none_explains_nothing(tmp_path):
    project = normed_project(tmp_path, COMMENT)
    result = ab(project, "--perf-ab", "HEAD~1", "--perf-ab-explain", "none", *EXPLAINED_WHATEVER_THE_VERDICT)
    (case,) = json.loads((project / ".perfsuite" / "ab.json").read_text())["cases"]
    assert case["explanation"] is None and "why, by the ops" not in result.stdout
    assert json.loads((project / ".perfsuite" / "ab.json").read_text())["measuring"]["explaining_s"] == 0


def test_an_op_that_falls_back_to_the_cpu_at_head_is_named_a_new_cpu_fallback_on_the_doubled_mps(
    tmp_path, monkeypatch
):
    change = ("            x = torch.relu(norm(x))  # NORM\n",
              "            x = torch.relu(norm(x))  # NORM\n            x = torch.erfinv(x.clamp(-0.5, 0.5))\n")
    project = normed_project(tmp_path, change)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(DOUBLE_SITE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPS_DOUBLE_FALLBACK_OPS", "aten::erfinv")
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    # A session of its own: the double, on PYTHONPATH, stands in for MPS from the interpreter's start.
    result = ab(project, "--perf-ab", "HEAD~1", "--perf-device", "mps", "--perf-ab-explain", "all",
                *EXPLAINED_WHATEVER_THE_VERDICT, own_process=True)
    case = explained_case(project, result)
    assert case["benchmark_id"] == "mps-fp32-normed-bs16-infer-smoke"
    why = case["explanation"]
    assert why["new_fallbacks"] == ["aten::erfinv"], why["lines"]
    assert ["aten::erfinv", 0, 4] in [list(item) for item in why["fallbacks_changed"]]
    assert "aten::erfinv" in why["new_ops"]
    assert any("ProfilerActivity.MPS" in line and "#99037" in line for line in why["lines"])
    assert "MPS CPU fallbacks: aten::erfinv new, 0 -&gt; 4 calls a step" in (
        project / ".perfsuite" / "ab.md").read_text()


THREE_LAYERS = '''import torch
from perfsuite import Workload, register_workload


class ThreeLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.middle = torch.nn.Linear(64, 256), torch.nn.Linear(256, 256)
        self.last = torch.nn.Linear(256, 10)

    def forward(self, x):
        x = self.middle(torch.relu(self.first(x)))  # MIDDLE
        return self.last(torch.relu(x))


register_workload(Workload(
    name="three-layers", build_module=lambda profile: ThreeLayers(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 64), batch_sizes={"smoke": (64,)},
    make_target=lambda profile, batch_size: torch.randint(0, 10, (batch_size,)),
    loss=torch.nn.functional.cross_entropy,
))
'''
MIDDLE_TWICE = ("        x = self.middle(torch.relu(self.first(x)))  # MIDDLE\n",
                "        x = self.middle(self.middle(torch.relu(self.first(x))))  # MIDDLE run twice\n")


def test_a_training_step_whose_one_layer_runs_twice_changes_no_untouched_ops_calls(tmp_path):
    """Each side's profile comes in turns, each keeping only its largest ops' times; the calls of every op are still
    whole a step, the doubled layer's op reads one call more, and the ops the change does not touch (the
    activations, the loss, the optimizer) read the same calls on both sides."""
    project = make_project(tmp_path / "project", THREE_LAYERS, PYPROJECT.replace('mode = "infer"', 'mode = "train"'))
    (project / "conftest.py").write_text(THREE_LAYERS.replace(*MIDDLE_TWICE))
    commit(project, "run the middle layer twice")
    result = ab(project, "--perf-ab", "HEAD~1", "--perf-ab-explain", "all", *EXPLAINED_WHATEVER_THE_VERDICT)
    why = explained_case(project, result)["explanation"]
    changed = {op["name"]: (op["base_calls"], op["head_calls"]) for op in why["calls_changed"]}
    assert changed["aten::addmm"] == (3, 4), why["lines"]
    assert all(float(calls).is_integer() for pair in changed.values() for calls in pair), changed
    untouched = [name for name in changed
                 if any(word in name.lower() for word in ("relu", "nll", "softmax", "item", "sqrt", "lerp", "foreach"))]
    assert untouched == [], changed
