"""Rough edges a user's own project met, each fixed: output folders, collection, and hints that name only what a
user's project has and the options pytest really takes.

The in-process tests of this subject: tests/quick/test_user_project_edges.py."""

import json

import pytest

pytestmark = pytest.mark.slow

TINY = '''
import torch
from perfsuite import Workload, register_workload

register_workload(Workload(
    name="tiny", build_module=lambda profile: torch.nn.Linear(4, 4),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4), batch_sizes={"smoke": (2,)},
))
'''
QUICK = ("--benchmark-min-rounds", "3", "--benchmark-max-time", "0.01", "--perf-warmup", "1", "--perf-device", "cpu",
         "-p", "no:cacheprovider")


@pytest.fixture
def user_project(pytester):
    pytester.makeconftest(TINY)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    return pytester


def test_benchmark_json_into_a_missing_folder_is_written_and_the_tables_are_kept(user_project):
    result = user_project.runpytest_inprocess("--benchmark-only", "--benchmark-json", "out/runs/run.json", *QUICK)
    assert result.ret == 0
    assert json.loads((user_project.path / "out" / "runs" / "run.json").read_text())["benchmarks"]
    result.stdout.fnmatch_lines(["*perfsuite regression gate*"])


def test_dataloader_alone_in_a_user_project_collects_no_placeholder_case(user_project):
    result = user_project.runpytest_inprocess("--collect-only", "-q", "--perf-model", "dataloader", *QUICK)
    assert "NOTSET" not in result.stdout.str()
