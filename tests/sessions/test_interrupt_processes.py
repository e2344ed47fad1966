"""Ctrl-C while cases are measured in fresh processes (`--perf-processes 2`) keeps every case that both processes
finished: judged, in the summary and results.md, and recorded; a case with fewer runs than processes is never
recorded, and the summary does not claim that nothing was judged."""

import json
import re

import pytest

pytestmark = pytest.mark.slow

# The Nth worker process to run the model sends SIGINT to the session (its parent), as Ctrl-C in a terminal would,
# and waits to be stopped. Workers run one at a time: 3 cases x 2 passes; the 5th worker is the 2nd of pass 2, so
# exactly one case has both runs when the session stops.
STOPPING = '''
import os
import signal
import sys
import time

import torch
from perfsuite import Workload, register_workload

_counted = []


class StopsTheSession(torch.nn.Module):
    def forward(self, x):
        if "perfsuite/run/worker" in sys.argv[0].replace(os.sep, "/") and not _counted:
            _counted.append(True)
            with open(os.environ["WORKER_LOG"], "a") as log:
                log.write(f"{os.getpid()}\\n")
            with open(os.environ["WORKER_LOG"]) as log:
                workers = len(log.read().split())
            if workers == int(os.environ["STOP_AT_WORKER"]):
                os.kill(os.getppid(), signal.SIGINT)
                time.sleep(60)
        time.sleep(0.002)
        return x * 2


register_workload(Workload(
    name="stopper",
    build_module=lambda profile: StopsTheSession(),
    make_inputs=lambda profile, batch_size: torch.ones(batch_size, 4),
    batch_sizes={"smoke": (1, 2, 3), "standard": (1, 2, 3)},
))
'''
RUN = ("--benchmark-only", "--perf-device", "cpu", "--perf-dtype", "fp32", "--perf-model", "stopper",
       "--perf-profile", "standard", "--benchmark-min-rounds", "5", "--benchmark-max-time", "0.02",
       "--perf-processes", "2", "--perf-machine", "interrupted-vm", "-p", "no:cacheprovider")


def cases_in(text: str) -> set[str]:
    """The cases named in `text` (results.md names a case without its device, under the device's heading)."""
    return set(re.findall(r"stopper-bs\d", text))


def test_ctrl_c_with_two_processes_keeps_the_case_both_finished_and_records_no_partial_run(
    pytester, monkeypatch, tmp_path, sigint_not_ignored
):
    monkeypatch.setenv("WORKER_LOG", str(tmp_path / "workers.log"))
    monkeypatch.setenv("STOP_AT_WORKER", "5")
    pytester.makeconftest(STOPPING)
    pytester.makepyfile("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    pytester.makepyprojecttoml("[tool.perfsuite]\n")
    result = pytester.runpytest_subprocess(*RUN, "--perf-update-baseline")

    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*interrupted: the files hold the 1 of 3 cases measured before the stop*"])
    folder = pytester.path / ".perfsuite"
    summary = json.loads((folder / "summary.json").read_text())
    (finished,) = [verdict["benchmark_id"] for verdict in summary["verdicts"]]
    markdown = (folder / "summary.md").read_text()
    assert "no benchmarks judged" not in markdown.lower() and cases_in(markdown) == cases_in(finished)
    assert cases_in((folder / "results.md").read_text()) == cases_in(finished)
    # The baseline and the archive get the finished case with both runs; the cases with one run are left out.
    baseline = json.loads((pytester.path / "baselines" / "cpu" / "interrupted-vm.json").read_text())
    assert list(baseline["entries"]) == [finished] and len(baseline["entries"][finished]["runs"]) == 2
    (archived,) = (pytester.path / "baselines" / "archive" / "cpu" / "interrupted-vm").glob("*.json")
    assert [c["benchmark_id"] for c in json.loads(archived.read_text())["cases"]] == [finished]
