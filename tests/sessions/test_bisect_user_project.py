"""`perfsuite bisect` end to end in a user's own project, run as a user runs it: a scratch git repository with one
registered model whose forward a commit makes 1.5 times slower. The bisect names that commit, skips and names a commit
that fails to import, writes its log, record and Markdown; a range in which nothing changed stops after the first
judgement and says the slowdown does not reproduce, with the floor."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.scratch_project import run_perfsuite_in_process

pytestmark = pytest.mark.slow

MODEL = '''import time

import torch
from perfsuite import Workload, register_workload

SLOWDOWN = 1.0  # each forward waits (SLOWDOWN - 1) x its own time


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(256, 256)

    def forward(self, x):
        started = time.perf_counter()
        out = torch.relu(self.layer(x))
        end = time.perf_counter() + (SLOWDOWN - 1.0) * (time.perf_counter() - started)
        while time.perf_counter() < end:
            pass
        return out


register_workload(Workload(
    name="small", build_module=lambda profile: Small(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 256), batch_sizes={"smoke": (32,)},
))
'''
PYPROJECT = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer"
dtype = "fp32"
threads = 1
"""


def git(root: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=u@example.com", "-c", "user.name=u", *arguments],
                          check=True, capture_output=True, text=True).stdout.strip()


def project(root: Path, commits: list[tuple[str, str]]) -> list[str]:
    """A project whose commits each write conftest.py as given (subject, text); their hashes, oldest first."""
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "test_perf.py").write_text("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    git(root, "init", "-q", "-b", "main")
    hashes = []
    for subject, text in commits:
        (root / "conftest.py").write_text(text)
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", subject)
        hashes.append(git(root, "rev-parse", "HEAD"))
    return hashes


def bisect(root: Path, good: str) -> subprocess.CompletedProcess[str]:
    """`perfsuite bisect` in this process (its judgements, A/B jobs, run in processes of their own all the same),
    each judgement with windows a fifth of pytest-benchmark's default length: a step of about 0.1 ms fills them with
    rounds, and the changes here are far outside (or far inside) the band."""
    return run_perfsuite_in_process(root, "bisect", "--good", good, "--bad", "HEAD", "--", "--perf-model", "small",
                                    "--benchmark-max-time", "0.2")


def test_the_slow_commit_is_named_and_a_commit_that_fails_to_import_is_skipped_and_named(tmp_path):
    root = tmp_path / "project"
    hashes = project(root, [
        ("a model", MODEL),
        ("break the import", "import a_module_this_commit_forgot\n" + MODEL),
        ("make it slower", MODEL.replace("SLOWDOWN = 1.0", "SLOWDOWN = 1.5")),
        ("a comment", MODEL.replace("SLOWDOWN = 1.0", "SLOWDOWN = 1.5") + "# a comment\n"),
    ])
    result = bisect(root, hashes[0])
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((root / ".perfsuite" / "bisect" / "bisect.json").read_text())
    (change,) = record["finding"]["changes"]
    assert change["first_bad"] == 2 and change["candidates"] == [1, 2] and change["alone"] == "regressed"
    assert record["finding"]["errored"] == [1]
    assert f"skipped, could not be measured (does not build or import?): {hashes[1][:12]} break the import" \
        in result.stdout
    assert "a_module_this_commit_forgot" in result.stdout
    assert len(record["steps"]) <= 5
    log = (root / ".perfsuite" / "bisect" / "bisect.log").read_text()
    assert "--perf-ab=" in log and "ModuleNotFoundError" in log
    assert "# perfsuite bisect" in (root / ".perfsuite" / "bisect" / "bisect.md").read_text()
    # The checkouts the bisect made are gone again; the project's own tree is untouched.
    assert not any((root / ".perfsuite" / "ab").iterdir()) if (root / ".perfsuite" / "ab").exists() else True
    assert git(root, "worktree", "list").count("\n") == 0
    assert git(root, "status", "--porcelain") == ""


def test_a_range_that_does_not_differ_stops_after_the_first_judgement_saying_so_with_its_floor(tmp_path):
    root = tmp_path / "project"
    hashes = project(root, [("a model", MODEL), ("a comment", MODEL + "# one\n"), ("another", MODEL + "# two\n")])
    result = bisect(root, hashes[0])
    assert result.returncode == 1, result.stdout + result.stderr
    record = json.loads((root / ".perfsuite" / "bisect" / "bisect.json").read_text())
    assert len(record["steps"]) == 1 and record["finding"]["reproduced"] == "unchanged"
    assert "does not reproduce here (floor " in result.stdout
