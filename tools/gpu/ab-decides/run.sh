# A/B that decides, on the lent GPU: the 16 cases (resnet18 and bert-base, bs32 and bs256, fp32 and bf16, train and
# infer, eager), an A/A job (--perf-ab HEAD) and a job against a planted host-side slowdown: every Conv2d and Linear
# the models build waits 20 us on the host before its forward (a forward pre-hook on the instances, so it lives in the
# head's model code, not in torch, which both sides of a process share). Both jobs with --benchmark-max-time 0.3 and
# --perf-ab-budget 200 (the device lease holds about ten minutes).
. tools/h200/prelude.sh
. tools/gpu/ab-decides/plant.sh
START=$(date +%s); cat /proc/loadavg; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
git init -q -b main && git add -A && git -c user.email=ci@example.com -c user.name=ci commit -qm base
CASES="--perf-device cuda --perf-model resnet18,bert-base --perf-batch-size 32,256 --perf-dtype fp32,bf16 --perf-mode train,infer --benchmark-max-time 0.3 --perf-ab-budget 200 tests/benchmarks/test_models.py"
ab_job() {  # name, timeout, options...
  local name=$1 limit=$2; shift 2; local S=$(date +%s)
  timeout -s INT $limit $PY $CASES "$@" > $OUT/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-S )) s"
  cp .perfsuite/ab.json $OUT/$name.json 2>/dev/null; rm -f .perfsuite/ab.json
  sed -n '/head against base/,/wrote/p' $OUT/$name.log | cut -c1-200 | head -30
}
ab_job aa 275 --perf-ab HEAD
plant 20
ab_job planted 275 --perf-ab HEAD~1
cat /proc/loadavg; echo "total $(( $(date +%s)-START )) s"
