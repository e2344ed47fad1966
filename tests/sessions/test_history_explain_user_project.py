"""Verdicts against a history explained by their ops, in a user's own project run as a user runs it (the scratch git
repository of test_ab_explain_user_project.py): a recording session at the first commit stores each case's op summary
beside its runs; at a commit that runs every norm layer twice the verdict is explained against that summary, said to
be from another session, with the norm op's calls doubled (terminal, summary.json and summary.md, the archive and the
site's case page); a host-side wait per module regresses and the default explains it as host time outside the ops; a
comment-only commit gets no explanation and no op change; a history recorded without summaries gets the one-line note
and the gate still judges. The norm run twice adds about half to a 1-2 ms step, which a busy shared machine does not
always call regressed against one recorded session (x1.47, p = 0.21 in one run here; one session's runs count as one
draw of the machine's state): that test explains every case (`all`), as the A/B one does. The default is checked on
a certain regression: a 3 ms wait per module, one process a side, which the gate's uncalibrated rule calls regressed
(beyond twice the slowest recorded run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.site.build import build_site
from tests.scratch_project import git
from tests.sessions.test_ab_explain_user_project import COMMENT, HOST_WAIT, NORM_TWICE, normed_project
from tests.sessions.test_ab_user_project import ab

pytestmark = pytest.mark.slow
BENCHMARK_ID = "cpu-fp32-normed-bs16-infer-smoke"
# Three processes a session where the profiles of several worker processes are merged; one (in the pytest process)
# where the verdict must be certain.
PROCESSES = ("--perf-processes", "3")
ONE_PROCESS = ("--perf-processes", "1")
# A wait of 3 ms after every module's forward (the model and its four norms): 15 ms on a 1-4 ms step.
LONG_HOST_WAIT = (HOST_WAIT[0], HOST_WAIT[1].replace("300e-6", "3e-3"))


def record_first_commit(project: Path, *options: str) -> str:
    """Record a baseline at the project's first commit (the model as committed), then go back to main; the first
    commit's short hash."""
    git(project, "checkout", "-q", "HEAD~1")
    result = ab(project, "--perf-update-baseline", *options)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    first = git(project, "rev-parse", "--short", "HEAD").strip()
    git(project, "checkout", "-q", "main")
    return first


def verdict_of(project: Path) -> dict[str, Any]:
    (verdict,) = json.loads((project / ".perfsuite" / "summary.json").read_text())["verdicts"]
    return verdict


def stored_entry(project: Path) -> dict[str, Any]:
    (path,) = (project / "baselines" / "cpu").glob("*.json")
    return json.loads(path.read_text())["entries"][BENCHMARK_ID]


def test_a_norm_run_twice_is_explained_by_the_norm_op_called_twice_against_the_summary_of_another_session(tmp_path):
    project = normed_project(tmp_path, NORM_TWICE)
    first = record_first_commit(project, *PROCESSES)
    recorded = stored_entry(project)["op_profile"]
    assert recorded["commit"] == first and recorded["steps"] >= 4
    norm = next(op for op in recorded["ops"] if op["name"] == "aten::native_layer_norm")
    assert norm["calls"] == 4 * recorded["steps"]

    # judged against the history, then recorded
    result = ab(project, "--perf-update-baseline", *PROCESSES, "--perf-history-explain", "all")

    verdict = verdict_of(project)
    assert verdict["status"] != "improved", result.stdout[-3000:] + result.stderr[-3000:]
    why = verdict["explanation"]
    assert why is not None, (verdict["explanation_note"], result.stdout[-3000:])
    assert why["against"].startswith("the op summary recorded in another session (") and f"commit {first}" in (
        why["against"])
    doubled = next(op for op in why["calls_changed"] if op["name"] == "aten::native_layer_norm")
    assert (doubled["base_calls"], doubled["head_calls"]) == (4, 8)
    assert why["new_ops"] == [] and why["gone_ops"] == []
    if verdict["ratio"] > 1:  # the ops named are those that changed the way the timed steps did
        assert why["top"][0]["name"] == "aten::native_layer_norm", why["lines"]
    # the line of the calls changed, which every place shows whichever way the timed steps moved
    calls = "aten::native_layer_norm 4 -> 8"
    assert calls in result.stdout  # under the case in the terminal
    assert f"another session ({recorded['recorded_at']}, commit {first})" in result.stdout
    assert calls.replace(">", "&gt;") in (project / ".perfsuite" / "summary.md").read_text()
    (archived,) = (project / "baselines" / "archive" / "cpu").glob("*/*-" + git(
        project, "rev-parse", "--short", "HEAD").strip() + "-*.json")
    (case,) = json.loads(archived.read_text())["cases"]
    assert any(calls in text for text in case["verdict"]["explanation"])
    # the history now keeps this session's summary, newer than the first
    assert stored_entry(project)["op_profile"]["commit"] != first
    build_site([project / "baselines"], tmp_path / "site")
    (page,) = [p for p in (tmp_path / "site").rglob("*.html") if BENCHMARK_ID in p.read_text() and "case" in str(p)]
    assert '<ul class="explanation">' in page.read_text() and calls.replace(">", "&gt;") in page.read_text()


def test_a_host_side_wait_per_module_regresses_and_the_default_explains_it_as_host_time_outside_the_ops(tmp_path):
    project = normed_project(tmp_path, LONG_HOST_WAIT)
    record_first_commit(project, *ONE_PROCESS)
    result = ab(project, *ONE_PROCESS)
    verdict = verdict_of(project)
    assert verdict["status"] == "regressed" and result.returncode == 1, result.stdout[-3000:]
    why = verdict["explanation"]
    assert why["top"][0]["name"] == "(host time outside ops)", why["lines"]
    base_s, head_s = why["host_outside_ops_s"]
    assert head_s - base_s > 5 * 2.5e-3, why["lines"]  # five modules (the model and its four norms) wait 3 ms
    assert why["calls_changed"] == [] and why["new_ops"] == [], why["lines"]
    assert "host time outside ops (Python, hooks, waits)" in result.stdout


def test_a_comment_only_commit_gets_no_explanation_and_no_op_change(tmp_path):
    project = normed_project(tmp_path, COMMENT)
    record_first_commit(project, *ONE_PROCESS)
    result = ab(project, *ONE_PROCESS)
    verdict = verdict_of(project)
    if verdict["status"] in ("unchanged", "uncalibrated"):  # the default explains only a changed verdict
        assert verdict["explanation"] is None and verdict["explanation_note"] is None
        assert "why, by the ops" not in result.stdout and "op summary" not in result.stdout
    else:  # one run against one on a loaded machine: a sub-millisecond step can read x2 by noise alone
        assert verdict["status"] in ("regressed", "improved"), result.stdout[-3000:]
        why = verdict["explanation"]
        assert why["calls_changed"] == [] and why["new_ops"] == [] and why["gone_ops"] == [], why["lines"]
    # every case explained: no op changed its calls, none is new or gone
    result = ab(project, *ONE_PROCESS, "--perf-history-explain", "all")
    why = verdict_of(project)["explanation"]
    assert why["calls_changed"] == [] and why["new_ops"] == [] and why["gone_ops"] == [], why["lines"]
    assert "calls changed: none; new ops: none; gone: none" in result.stdout


def test_a_history_recorded_without_op_summaries_says_so_in_one_line_and_the_gate_still_judges(tmp_path):
    project = normed_project(tmp_path, LONG_HOST_WAIT)
    record_first_commit(project, *ONE_PROCESS, "--perf-history-explain", "none")
    assert "op_profile" not in stored_entry(project)
    result = ab(project, *ONE_PROCESS)
    verdict = verdict_of(project)
    assert verdict["status"] == "regressed" and result.returncode == 1, result.stdout[-3000:]
    assert verdict["explanation"] is None
    assert verdict["explanation_note"].startswith("no op summary of this case is recorded in its history yet")
    assert result.stdout.count("no op summary of this case is recorded") == 1
