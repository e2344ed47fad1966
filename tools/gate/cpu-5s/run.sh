#!/usr/bin/env bash
# The gate end to end with 5 s runs, from the repository root: tools/gate/cpu-5s/run.sh
# 1. record 3 times, judge unchanged 3 times, judge with every Conv2d doubled (tools/gate/gate-experiment.sh);
# 2. two more unchanged sessions and three more planted ones, alternating.
# The history goes to baselines/cpu/trial-5s-windows.json (kept in docs/records/gate/cpu-5s/ as
# history-trial-5s-windows.json); the logs, summaries and sessions.txt go there too.
set -uo pipefail
out=docs/records/gate/cpu-5s
opts="--perf-device cpu --perf-model resnet18 --perf-profile smoke --perf-dtype fp32 --perf-threads 1 \
--perf-machine trial-5s-windows --benchmark-max-time 5 tests/benchmarks/test_models.py"
tools/gate/gate-experiment.sh "$out" "$opts" 3 Conv2d 3
session() {  # session NAME [env assignments...]
  local name=$1; shift
  local start=$SECONDS
  # shellcheck disable=SC2086
  env "$@" pytest --benchmark-only -p no:cacheprovider --perf-processes 3 --perf-isolation pass $opts \
    >"$out/$name.log" 2>&1
  local status=$?
  cp .perfsuite/summary.json "$out/$name.summary.json" 2>/dev/null
  printf '%s exit=%s wall_s=%s load=%s\n' "$name" "$status" "$((SECONDS - start))" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sessions.txt"
}
planted=("PYTHONPATH=$PWD/tests/planted_slowdown" "PLANTED_DOUBLE=Conv2d")
session planted-Conv2d-2 "${planted[@]}"
session unchanged-4
session planted-Conv2d-3 "${planted[@]}"
session unchanged-5
session planted-Conv2d-4 "${planted[@]}"
