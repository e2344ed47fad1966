"""The A/B path on `--perf-device mps` under the MPS double (tests/mps_double/site puts it in every process, the
side workers included): both sides build, warm and time their windows through the MPS bindings, draining the device
at round ends, and a layer run twice at head is judged regressed. Plumbing, not Metal: the steps run on the CPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.scratch_project import commit
from tests.sessions.test_ab_user_project import MODEL, PAIRS, TWICE, ab, wide_project

pytestmark = pytest.mark.slow
DOUBLE_SITE = Path(__file__).resolve().parents[1] / "mps_double" / "site"


def test_a_layer_run_twice_is_regressed_on_the_doubled_mps_with_each_side_syncing_at_round_ends(tmp_path, monkeypatch):
    project = wide_project(tmp_path)
    (project / "conftest.py").write_text(MODEL.replace("        x = torch.relu(self.big(x))  # LAYER\n", TWICE))
    commit(project, "run the layer twice")
    calls = project.parent / "calls.jsonl"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(DOUBLE_SITE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPS_DOUBLE_CALLS_FILE", str(calls))
    # A session of its own: the double, on PYTHONPATH, stands in for MPS from the interpreter's start.
    result = ab(project, "--perf-ab", "HEAD~1", "--perf-device", "mps", own_process=True)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    (case,) = json.loads((project / ".perfsuite" / "ab.json").read_text())["cases"]
    assert case["benchmark_id"] == "mps-fp32-wide-bs64-infer-smoke" and case["status"] == "regressed"
    # each block's rounds hold the same steps on both sides (a drain shared by fewer steps would read as slower)
    steps = [block["steps_per_round"] for block in case["process_pairs"]]
    assert all(block["base"] == block["head"] >= 1 for block in steps), steps
    workers = [json.loads(line) for line in calls.read_text().splitlines()]
    measuring = [w for w in workers if w["calls"].count("deviceSynchronize") > 10]
    # PAIRS warm processes, each holding both sides, measured (the check worker before them builds nothing)
    assert len(measuring) == PAIRS, [len(w["calls"]) for w in workers]
    assert json.loads((project / ".perfsuite" / "ab.json").read_text())["measuring"]["in_one_process"]
