"""`perfsuite bisect` as a user runs it, in scratch projects of 16 commits (a tiny conv net, fp32 inference, one torch
thread: the model of tools/ab/decides/run.py): commit 0 is the good one, 15 commits follow, each a comment, except
those that plant a host-side slowdown in the model's forward (each forward waits (f - 1) times its own time, so the
step is f times slower; a plant stays in every later commit) or break its import. Per trial: where the plants were,
what the bisect named, its judgements, seconds, exit status, and the load average before and after.

    python tools/bisect/trials.py single --trials 10 --out docs/records/bisect/single.json  # one x1.30 commit
    python tools/bisect/trials.py two --trials 1 --out docs/records/bisect/two.json         # two x1.15 commits
    python tools/bisect/trials.py broken --trials 1 --out docs/records/bisect/broken.json   # x1.30, a broken import
    python tools/bisect/trials.py same --trials 1 --out docs/records/bisect/same.json       # nothing changes

Positions are drawn with a seeded generator; trials run one at a time with this checkout's perfsuite (the interpreter
running this script).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = '''import time

import torch
import torch.nn.functional as F
from perfsuite import Workload, register_workload

SLOWDOWN = 1.0  # planted: each forward waits (SLOWDOWN - 1) x its own time


class TinyConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        started = time.perf_counter()
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        out = self.head(x.mean(dim=(2, 3)))
        if SLOWDOWN > 1.0:
            end = time.perf_counter() + (SLOWDOWN - 1.0) * (time.perf_counter() - started)
            while time.perf_counter() < end:
                pass
        return out


register_workload(Workload(
    name="tiny-conv", build_module=lambda profile: TinyConv(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 3, 32, 32),
    make_target=lambda profile, batch_size: torch.randint(0, 10, (batch_size,)),
    loss=lambda output, target: F.cross_entropy(output, target), batch_sizes={"smoke": (8,)},
))
'''
PYPROJECT = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer"
dtype = "fp32"
threads = 1
"""
COMMITS = 16
BROKEN_IMPORT = "import a_module_this_commit_forgot  # noqa: F401\n"


def git(root: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=u@example.com", "-c", "user.name=u", *arguments],
                          check=True, capture_output=True, text=True).stdout.strip()


def make_project(root: Path, slowdowns: dict[int, float], broken: set[int]) -> list[str]:
    """The project's 16 commits (oldest first): commit p multiplies the slowdown by slowdowns[p] from p on; a commit
    in `broken` fails to import (the next one fixes it)."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "test_perf.py").write_text("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    git(root, "init", "-q", "-b", "main")
    factor = 1.0
    commits = []
    for position in range(COMMITS):
        factor *= slowdowns.get(position, 1.0)
        text = MODEL.replace("SLOWDOWN = 1.0", f"SLOWDOWN = {factor:.4f}") + f"# commit {position}\n"
        (root / "conftest.py").write_text((BROKEN_IMPORT if position in broken else "") + text)
        git(root, "add", ".")
        subject = ("make the model slower" if position in slowdowns else
                   "a change that breaks the import" if position in broken else f"comment {position}")
        git(root, "commit", "-q", "-m", subject)
        commits.append(git(root, "rev-parse", "HEAD"))
    return commits


def trial(kind: str, rng: random.Random, number: int) -> dict:
    positions = list(range(1, COMMITS))
    slowdowns: dict[int, float]
    broken: set[int]
    if kind == "single":
        slowdowns, broken = {rng.choice(positions): 1.30}, set()
    elif kind == "two":
        slowdowns, broken = dict.fromkeys(rng.sample(positions, 2), 1.15), set()
    elif kind == "broken":
        slow, bad_import = rng.sample(positions, 2)
        slowdowns, broken = {slow: 1.30}, {bad_import}
    else:
        slowdowns, broken = {}, set()
    with tempfile.TemporaryDirectory(prefix="perfsuite-bisect-trial-") as folder:
        root = Path(folder) / "project"
        commits = make_project(root, slowdowns, broken)
        load_before = os.getloadavg()
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "perfsuite.cli", "bisect", "--good", commits[0], "--bad", commits[-1], "--",
             "--perf-model", "tiny-conv"], cwd=root, capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - started
        record_path = root / ".perfsuite" / "bisect" / "bisect.json"
        record = json.loads(record_path.read_text()) if record_path.is_file() else None
    found = record["finding"] if record else {}
    named = [change["first_bad"] for change in found.get("changes", [])]
    planted = sorted(slowdowns)
    return {
        "kind": kind, "trial": number, "planted": planted, "slowdowns": {str(p): f for p, f in slowdowns.items()},
        "broken": sorted(broken), "named": named,
        "candidates": [change["candidates"] for change in found.get("changes", [])],
        "errored": found.get("errored"), "reproduced": found.get("reproduced"), "gradual": found.get("gradual"),
        "correct": named == planted and sorted(found.get("errored") or []) == sorted(
            b for b in broken if any(step["head"] == b for step in record["steps"])) if record else False,
        "judgements": len(record["steps"]) if record else None, "seconds": round(seconds, 1),
        "exit_status": result.returncode, "load_before": load_before, "load_after": os.getloadavg(),
        "sentences": record["sentences"] if record else None,
        "steps": [{key: step[key] for key in ("head", "base", "purpose", "attempt", "status", "seconds")}
                  | {"floor": step["cases"][0]["floor"] if step["cases"] else None,
                     "ratio": step["cases"][0]["ratio"] if step["cases"] else None}
                  for step in record["steps"]] if record else None,
        "output_tail": result.stdout[-1500:] + result.stderr[-1500:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("single", "two", "broken", "same"))
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    trials = []
    for number in range(args.trials):
        trials.append(trial(args.kind, rng, number))
        last = trials[-1]
        print(f"{args.kind} trial {number}: planted {last['planted']} broken {last['broken']} named {last['named']} "
              f"candidates {last['candidates']} correct {last['correct']} {last['judgements']} judgements "
              f"{last['seconds']} s exit {last['exit_status']} load {last['load_before'][0]:.2f}", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"trials": trials}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
