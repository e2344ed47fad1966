# Sourced by the A/B runs on the H200: the prelude (carried wheels, PYTHONPATH), a git repository of the working
# tree (the device copy has none), and the 16 cases of the issue: resnet18 and bert-base, bs32 and bs256, fp32 and
# bf16, train and infer, eager.
. tools/h200/prelude.sh
START=$(date +%s); cat /proc/loadavg; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys, torch, scipy, accelerate, transformers; print(sys.version.split()[0], torch.__version__)"
git init -q -b main && git add -A && git -c user.email=ci@example.com -c user.name=ci commit -qm base
CASES="--perf-device cuda --perf-model resnet18,bert-base --perf-batch-size 32,256 --perf-dtype fp32,bf16 --perf-mode train,infer --benchmark-max-time 0.15 --perf-processes 4 tests/benchmarks/test_models.py"
ab_job() {  # name, timeout, options...
  local name=$1 limit=$2; shift 2; local S=$(date +%s)
  timeout $limit $PY $CASES "$@" > $OUT/$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-S )) s"
  cp .perfsuite/ab.json $OUT/$name.json 2>/dev/null; rm -f .perfsuite/ab.json
  sed -n '/head against base/,/wrote/p' $OUT/$name.log | cut -c1-190 | head -24
}
plant() {  # every Conv2d and Linear forward waits 20 us on the host first: a host-side slowdown of known size
  cat >> perfsuite/workloads/random_weights.py <<'PLANT'


import time as _time


def _planted_wait(original):
    def forward(self, *args, **kwargs):
        end_s = _time.perf_counter() + 20e-6
        while _time.perf_counter() < end_s:
            pass
        return original(self, *args, **kwargs)

    return forward


for _module_class in (torch.nn.Conv2d, torch.nn.Linear):
    _module_class.forward = _planted_wait(_module_class.forward)
PLANT
  git -c user.email=ci@example.com -c user.name=ci commit -qam planted
}
