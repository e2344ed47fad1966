#!/usr/bin/env bash
# The gate end to end, as a user runs it: record a history of 3 sessions x K processes, judge unchanged code
# N times, then judge with every forward of the named torch.nn modules run twice (tests/planted_slowdown).
# Each session's terminal output goes to OUT/<step>.log and its summary to OUT/<step>.summary.json; one line per
# session (exit status, wall seconds, load average) goes to OUT/sessions.txt.
#
#   tools/gate/gate-experiment.sh OUT "PYTEST OPTIONS" [UNCHANGED_RUNS] [PLANTED_MODULES] [PROCESSES]
# e.g.
#   tools/gate/gate-experiment.sh /tmp/gate-cpu "--perf-device cpu --perf-model resnet18 --perf-profile smoke \
#       --perf-dtype fp32 --perf-threads 1 --perf-machine shared-2core-vm" 3 Conv2d
set -uo pipefail
out=$1; options=$2; unchanged=${3:-3}; planted=${4:-Conv2d}; processes=${5:-3}
mkdir -p "$out"
session() {  # session NAME [extra options...]
  local name=$1; shift
  local start=$SECONDS
  # shellcheck disable=SC2086
  pytest --benchmark-only -p no:cacheprovider --perf-processes "$processes" --perf-isolation pass $options "$@" \
    >"$out/$name.log" 2>&1
  local status=$?
  cp .perfsuite/summary.json "$out/$name.summary.json" 2>/dev/null
  printf '%s exit=%s wall_s=%s load=%s\n' "$name" "$status" "$((SECONDS - start))" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sessions.txt"
}
session record-1 --perf-rebaseline
session record-2 --perf-update-baseline
session record-3 --perf-update-baseline
for i in $(seq 1 "$unchanged"); do session "unchanged-$i"; done
PYTHONPATH="$PWD/tests/planted_slowdown${PYTHONPATH:+:$PYTHONPATH}" PLANTED_DOUBLE=$planted session "planted-$planted"
