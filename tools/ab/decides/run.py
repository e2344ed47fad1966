"""A/B jobs as a user runs them, in a scratch project of 4 small cases (a tiny conv net, fp32 and bf16, infer and train,
one torch thread): comment-only commits judged with `pytest --benchmark-only --perf-ab HEAD~1` at the defaults (A/A),
and commits that plant a host-side slowdown of a given factor in the model's forward (each forward waits (f - 1) times
its own time, so the inference step is f times slower and the training step less). Per job: exit status, seconds,
the load average before and after, and every case's verdict from ab.json.

    python tools/ab/decides/run.py --aa 20 --planted 1.10:10 --planted 1.05:10 --out docs/records/ab/decides/jobs.json

Jobs run in a shuffled order (seeded), one at a time, with this checkout's perfsuite (the interpreter running this).
`--summary FILE` prints what such a file holds per factor: jobs, red jobs, verdicts by status, jobs that caught the
plant (a regressed verdict), seconds a job and the load averages seen.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root, where tools/ is
from tools.bisect.trials import MODEL, git  # noqa: E402

PYPROJECT = """[tool.perfsuite]
device = "cpu"
profile = "smoke"
mode = "infer,train"
dtype = "fp32,bf16"
threads = 1
"""


def make_project(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "conftest.py").write_text(MODEL)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "test_perf.py").write_text("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "a model")


def job(root: Path, factor: float, number: int) -> dict:
    """Commit a change (a comment, or the planted factor), judge it against its parent, and revert the plant."""
    conftest = root / "conftest.py"
    if factor == 1.0:
        conftest.write_text(conftest.read_text() + f"# comment {number}\n")
    else:
        conftest.write_text(MODEL.replace("SLOWDOWN = 1.0", f"SLOWDOWN = {factor}"))
    git(root, "commit", "-q", "-am", f"job {number}")
    load_before = os.getloadavg()
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-only",
                             "--perf-ab", "HEAD~1"], cwd=root, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    summary = json.loads((root / ".perfsuite" / "ab.json").read_text())
    if factor != 1.0:
        conftest.write_text(MODEL)
        git(root, "commit", "-q", "-am", f"revert job {number}")
    outcome = [line for line in result.stdout.splitlines() if line.startswith("perfsuite A/B ")]
    return {
        "factor": factor, "exit_status": result.returncode, "seconds": round(seconds, 1),
        "load_before": load_before, "load_after": os.getloadavg(), "outcome": outcome[-1] if outcome else None,
        "measuring": summary.get("measuring"),
        "cases": [{key: case.get(key) for key in ("benchmark_id", "status", "ratio", "ci_low", "ci_high", "floor",
                                                   "blocks", "windows", "seconds", "between_blocks", "within_block")}
                  for case in summary["cases"]],
    }


def summary(jobs: list[dict]) -> list[str]:
    """Per factor: the jobs, how many failed, the verdicts by status, the jobs that caught the plant, seconds, load."""
    lines = []
    for factor in sorted({job["factor"] for job in jobs}):
        chosen = [job for job in jobs if job["factor"] == factor]
        statuses = Counter(case["status"] for job in chosen for case in job["cases"])
        caught = sum(any(case["status"] == "regressed" for case in job["cases"]) for job in chosen)
        seconds = sorted(job["seconds"] for job in chosen)
        loads = [job["load_before"][0] for job in chosen] + [job["load_after"][0] for job in chosen]
        lines.append(
            f"x{factor:.2f}: {len(chosen)} jobs, {sum(job['exit_status'] != 0 for job in chosen)} red; verdicts "
            f"{dict(sorted(statuses.items()))}; caught in {caught} of {len(chosen)}; seconds a job median "
            f"{statistics.median(seconds):.0f}, {seconds[0]:.0f}-{seconds[-1]:.0f}, {sum(s <= 60 for s in seconds)} "
            f"within 60 s; load {min(loads):.2f}-{max(loads):.2f}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", type=Path, help="print the summary of a file this wrote, and measure nothing")
    parser.add_argument("--aa", type=int, default=20)
    parser.add_argument("--planted", action="append", default=[], metavar="FACTOR:JOBS")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.summary is not None:
        print("\n".join(summary(json.loads(args.summary.read_text())["jobs"])))
        return 0
    if args.out is None:
        parser.error("--out FILE is needed to measure (or --summary FILE to summarise one)")
    order = [1.0] * args.aa
    for planted in args.planted:
        factor, count = planted.split(":")
        order += [float(factor)] * int(count)
    random.Random(args.seed).shuffle(order)
    jobs = []
    with tempfile.TemporaryDirectory(prefix="perfsuite-ab-decides-") as folder:
        root = Path(folder) / "project"
        make_project(root)
        for number, factor in enumerate(order):
            jobs.append(job(root, factor, number))
            last = jobs[-1]
            print(f"job {number} factor {factor}: exit {last['exit_status']} {last['seconds']} s load "
                  f"{last['load_before'][0]:.2f} {last['outcome']}", flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"jobs": jobs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
