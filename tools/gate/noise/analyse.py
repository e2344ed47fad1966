"""Split the run-to-run spread of docs/records/gate/noise/out.jsonl into the machine's changes within a process
(between consecutive windows) and a part that belongs to the process (one-way variance components on logs)."""

import json
import math
import sys
from pathlib import Path

import numpy as np

path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/records/gate/noise/out.jsonl")
logs = np.log(np.array([json.loads(line) for line in path.read_text().splitlines() if line.strip()]))
processes, windows = logs.shape
within = math.sqrt(float(np.mean(logs.var(axis=1, ddof=1))))
means = logs.mean(axis=1)
per_process = math.sqrt(max(float(means.var(ddof=1)) - within**2 / windows, 0.0))
print(f"{processes} processes x {windows} windows")
print(f"sd of window medians inside a process: {within:.3f}")
print(f"sd of the processes' mean: {float(means.std(ddof=1)):.3f}; per-process component: {per_process:.3f}")
print(f"sd of single windows across processes: {float(logs[:, 0].std(ddof=1)):.3f}")
for run_windows in (1, 2, 10):
    predicted = math.sqrt(per_process**2 + within**2 / run_windows)
    print(f"predicted sd of a run of {run_windows * 0.5:g} s: {predicted:.3f}")
