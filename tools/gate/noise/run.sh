#!/usr/bin/env bash
# Where the run-to-run noise lives: 10 processes one after another, each timing the ResNet18 smoke infer step
# (fp32, bs4, 1 thread) in ten consecutive 0.5 s windows; one JSON line of window medians (ms) per process.
# Run from the repository root: tools/gate/noise/run.sh; then tools/gate/noise/analyse.py. The records (sessions.txt,
# out.jsonl) go to docs/records/gate/noise/.
set -euo pipefail
here=tools/gate/noise
records=docs/records/gate/noise
mkdir -p "$records"
echo "start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$records/sessions.txt"
for _ in $(seq 1 10); do python "$here/worker.py" infer 10 0.5; done > "$records/out.jsonl"
echo "end $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$records/sessions.txt"
