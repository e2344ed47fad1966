"""One process: time the ResNet18 smoke step (fp32, bs4, 1 thread) in consecutive windows and print the
window medians in milliseconds as one JSON line.

    python tools/gate/noise/worker.py infer 10 0.5    # mode, windows, seconds per window
"""

import json
import statistics
import sys
import time

import torch

from perfsuite.records import Case
from perfsuite.run.steps import prepare_case
from perfsuite.workloads import get_workload

WARMUP_STEPS = 20

torch.set_num_threads(1)
mode, windows, window_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
prepared = prepare_case(Case("cpu", "fp32", "resnet18", 4, mode, "smoke"), get_workload("resnet18"))
for _ in range(WARMUP_STEPS):
    prepared.timed_step()
medians_ms = []
for _ in range(windows):
    times_s = []
    end = time.perf_counter() + window_s
    while time.perf_counter() < end:
        start = time.perf_counter()
        prepared.timed_step()
        times_s.append(time.perf_counter() - start)
    medians_ms.append(statistics.median(times_s) * 1e3)
print(json.dumps(medians_ms))
