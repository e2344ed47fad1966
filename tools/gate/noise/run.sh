#!/usr/bin/env bash
# Where the run-to-run noise lives: 10 processes one after another, each timing the ResNet18 smoke infer step
# (fp32, bs4, 1 thread) in ten consecutive 0.5 s windows; one JSON line of window medians (ms) per process.
# Run from the repository root: results/gate/noise/run.sh; then results/gate/noise/analyse.py.
set -euo pipefail
here=results/gate/noise
echo "start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$here/sessions.txt"
for _ in $(seq 1 10); do python "$here/worker.py" infer 10 0.5; done > "$here/out.jsonl"
echo "end $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$here/sessions.txt"
