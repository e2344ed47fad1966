# A/B that decides, on the lent GPU, at the defaults (no --benchmark-max-time, no --perf-ab-budget): the 16 cases
# (resnet18 and bert-base, bs32 and bs256, fp32 and bf16, train and infer, eager). JOBS names the jobs of this call,
# in order: `aa` is an A/A job (--perf-ab HEAD); `planted` plants a host-side wait of PLANT_US microseconds before
# every Conv2d and Linear forward the head's models build (a pre-hook on the instances: head code, not torch) and
# judges it against its parent. Each job's log and ab.json come back under $OUT; a job is cut at LIMIT_S (SIGINT).
#   JOBS="aa aa" bash tools/gpu/ab-decides/defaults.sh   (BATCH=32: only the launch-bound bs32 cases; EXTRA: more
# pytest options for every job, e.g. EXTRA="--benchmark-max-time 0.3")
. tools/h200/prelude.sh
. tools/gpu/ab-decides/plant.sh
JOBS=${JOBS:-aa}; PLANT_US=${PLANT_US:-10}; LIMIT_S=${LIMIT_S:-580}; BATCH=${BATCH:-32,256}
START=$(date +%s); cat /proc/loadavg; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
git init -q -b main && git add -A && git -c user.email=ci@example.com -c user.name=ci commit -qm base
CASES="--perf-device cuda --perf-model resnet18,bert-base --perf-batch-size $BATCH --perf-dtype fp32,bf16 --perf-mode train,infer tests/benchmarks/test_models.py"
number=0
for kind in $JOBS; do
  number=$((number + 1)); name=$kind-$number; left=$(( LIMIT_S - ($(date +%s) - START) ))
  [ $left -lt 60 ] && { echo "$name not run: $left s left"; continue; }
  if [ $kind = planted ]; then plant $PLANT_US; base=HEAD~1; else base=HEAD; fi
  S=$(date +%s); cat /proc/loadavg
  timeout -s INT -k 20 $left $PY $CASES $EXTRA --perf-ab $base > $OUT/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-S )) s"
  cp .perfsuite/ab.json $OUT/$name.json 2>/dev/null; rm -f .perfsuite/ab.json
  grep -E "^perfsuite A/B (passed|FAILED)|^ *cuda-.*(unchanged|regressed|improved|inconclusive)" $OUT/$name.log | cut -c1-160 | head -20
  if [ $kind = planted ]; then git -c user.email=ci@example.com -c user.name=ci revert --no-edit HEAD > /dev/null; fi
done
cat /proc/loadavg; echo "total $(( $(date +%s)-START )) s"
