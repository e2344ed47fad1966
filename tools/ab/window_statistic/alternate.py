"""Why a worker holding both sides of an A/B job fixes its heap (perfsuite.run.heap): two copies of a small step
(tools/ab/decides' tiny conv net, bs8, one torch thread) take turns in one process in windows of 0.125 s, ABBA, as an
A/B block's sides do; each window's time is the lower decile of its single steps (perfsuite.run.ab.window_time_s).
Per condition, the spread of a window pair's log ratio (standard deviation of the 20%-winsorised log ratios) and the
pairs off by more than 10%:
- `default`: glibc's malloc as it comes;
- `steady`: perfsuite.run.heap.steady_heap() first, as the worker does;
- `same`: one copy taking turns with itself (what is left without a second model's heap).

    python tools/ab/window_statistic/alternate.py --seconds 30 --repeats 2 \
        --out docs/records/ab/window-statistic/heap.json

Each condition runs in a process of its own, in turn, `--repeats` times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CONDITIONS = ("default", "steady", "same")
PAIRS = """
import json, sys, time
import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import mstats
from perfsuite.run.ab import window_time_s
from perfsuite.run.heap import steady_heap

condition, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
heap = steady_heap() if condition == "steady" else None
torch.set_num_threads(1)


class TinyConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


def make_step():
    model, inputs, target = TinyConv(), torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(inputs), target).backward()
        optimizer.step()

    def infer():
        with torch.no_grad():
            model(inputs)

    return train if mode == "train" else infer


def window(step, window_s=0.125):
    times_s, end_s = [], time.perf_counter() + window_s
    while not times_s or time.perf_counter() < end_s:
        started_s = time.perf_counter()
        step()
        times_s.append(time.perf_counter() - started_s)
    return window_time_s(times_s)


base = make_step()
head = base if condition == "same" else make_step()
for _ in range(50):
    base()
    head()
log_ratios, end_s, index = [], time.perf_counter() + seconds, 0
while time.perf_counter() < end_s:
    if index % 2 == 0:
        base_s = window(base)
        head_s = window(head)
    else:
        head_s = window(head)
        base_s = window(base)
    log_ratios.append(float(np.log(head_s / base_s)))
    index += 1
spread = float(np.sqrt(np.var(mstats.winsorize(np.array(log_ratios), limits=(0.2, 0.2)))))
off = sum(abs(x) > 0.1 for x in log_ratios)
print(json.dumps({"pairs": len(log_ratios), "spread": spread, "off_by_10_percent": off, "heap": heap}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--mode", choices=("train", "infer"), default="train")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    runs = []
    for repeat in range(args.repeats):
        for condition in CONDITIONS:
            load_before = os.getloadavg()
            done = subprocess.run([sys.executable, "-c", PAIRS, condition, args.mode, str(args.seconds)],
                                  capture_output=True, text=True, check=True)
            found = json.loads(done.stdout.splitlines()[-1])
            runs.append({"condition": condition, "repeat": repeat, "mode": args.mode, **found,
                         "load_before": load_before, "load_after": os.getloadavg()})
            print(f"{condition} {args.mode}: {found['pairs']} pairs, spread {100 * found['spread']:.2f}%, "
                  f"{found['off_by_10_percent']} off by >10%; load {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}",
                  flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seconds": args.seconds, "measured": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                         time.gmtime()),
                                    "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
