# Sourced by call-1.sh and call-2.sh: the prelude (carried wheels, PYTHONPATH, $PY), the card, torch and the commit,
# `left`, the seconds a call has left of its LIMIT, and `session`, whose log and JSON go to $R ($OUT unless set).
# DEV, PROFILE, MAX_TIME_S and COMPILE_MODES default to the GPU run's values; a dry run on the CPU sets DEV=cpu
# PROFILE=smoke MAX_TIME_S=0.02 COMPILE_MODES=eager.
. tools/h200/prelude.sh
# Where perfsuite is installed (a dry run in a project venv), its entry point loads the plugin already.
python3 -c "import importlib.metadata as m; m.distribution('perfsuite')" 2>/dev/null && PY=${PY/-p perfsuite.plugin /}
DEV=${DEV:-cuda}; PROFILE=${PROFILE:-standard}; MAX_TIME_S=${MAX_TIME_S:-0.3}; LIMIT=${LIMIT:-580}; R=${R:-$OUT}; mkdir -p $R
COMPILE_MODES=${COMPILE_MODES:-eager,inductor,reduce-overhead,cuda-graph}
START=$(date +%s); cat /proc/loadavg; date -u +%FT%TZ
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
# A session cut at its limit is stopped as Ctrl-C stops it, keeping (and recording) the cases it finished.
# A case that hangs fails after 200 s where pytest-timeout is installed (it is on the GPU machine).
python3 -c "import pytest_timeout" 2>/dev/null && CASE_TIMEOUT="--timeout 200"
left() { echo $(( LIMIT - ( $(date +%s) - START ) )); }
session() {  # name, seconds at most, pytest options...: one pytest session, its log and JSON under $R
  local name=$1 limit=$2; shift 2; local S=$(date +%s)
  [ "$(left)" -lt 30 ] && { echo "$name not run: $(left) s left"; return; }
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  timeout -s INT -k 20 $limit $PY --perf-device $DEV --benchmark-max-time $MAX_TIME_S tests/benchmarks/test_models.py -rsfE \
    --benchmark-json $R/$name.json "$@" > $R/$name.log 2>&1
  echo "$name rc=$? $(( $(date +%s)-S )) s (limit $limit s)"
  grep -E "^perfsuite gate|passed|failed|Timeout|ERROR" $R/$name.log | cut -c1-200 | tail -4
}
keep_baselines() { tar czf $OUT/baselines.tgz baselines/$DEV $(ls -d baselines/archive 2>/dev/null); }
# $R and the baselines in one file, after each session: $OUT brings back at most 8 files.
pack() { tar czf $OUT/results.tgz -C $R . -C $PWD baselines/$DEV $(ls -d baselines/archive 2>/dev/null); }
