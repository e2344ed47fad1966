# A/B verdicts explained by their ops, on the lent GPU: resnet18 bf16, bs32 and bs256, train and infer, eager, against
# a planted device-side change: every BatchNorm2d the models build runs twice (its forward applied to its own output,
# an instance attribute set in the head's model code, not in torch, which both sides of a process share). One job
# with --perf-ab-explain all; then, per case, whether the diff's device times (the change of each op's own kernels,
# summed) add up to the measured change within 20% where the device is busy (the explanation's basis is "device").
# LIMIT_S (500) cuts the job, BUDGET_S (200) is its --perf-ab-budget. DEV=cpu dry-runs it on the CPU at smoke sizes (bs 2 and 4, fp32, infer) to show the script works; run it in a copy
# of the repository without .git (it commits there), as the device machine's copy is.
set -u
DEV=${DEV:-cuda}
if [ -d .git ]; then echo "run this in a copy of the repository without .git: it commits the planted change"; exit 2; fi
if [ "$DEV" = cuda ]; then
  . tools/h200/prelude.sh
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  CASES="--perf-device cuda --perf-model resnet18 --perf-batch-size 32,256 --perf-dtype bf16 --perf-mode train,infer"
else
  set -o pipefail; export PYTHONUNBUFFERED=1; OUT=${OUT:-/tmp/explain-dry-run}; mkdir -p $OUT
  PY="${PYBIN:-python3} -m pytest -p no:cacheprovider --benchmark-only"  # an installed perfsuite registers its plugin
  CASES="--perf-device cpu --perf-model resnet18 --perf-profile smoke --perf-batch-size 2,4 --perf-dtype fp32 --perf-mode infer --perf-threads 1"
fi
START=$(date +%s); cat /proc/loadavg
${PYBIN:-python3} -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
git init -q -b main && git add -A && git -c user.email=ci@example.com -c user.name=ci commit -qm base
cat >> perfsuite/workloads/random_weights.py <<'PLANT'


_unplanted_build_on_meta = globals().get("_unplanted_build_on_meta", build_on_meta)


def _twice(self, x):
    once = type(self).forward
    return once(self, once(self, x))


def _norm_twice(norm):
    norm.forward = _twice.__get__(norm)


def build_on_meta(factory):  # noqa: F811
    module = _unplanted_build_on_meta(factory)
    for child in module.modules():
        if isinstance(child, torch.nn.BatchNorm2d):
            _norm_twice(child)
    return module
PLANT
git -c user.email=ci@example.com -c user.name=ci commit -qam "planted: every BatchNorm2d runs twice"
S=$(date +%s)
timeout -s INT ${LIMIT_S:-500} $PY $CASES --benchmark-max-time 0.3 --perf-ab-budget ${BUDGET_S:-200} --perf-ab HEAD~1 --perf-ab-explain all \
  tests/benchmarks/test_models.py > $OUT/explain.log 2>&1
echo "job rc=$? $(( $(date +%s)-S )) s"
cp .perfsuite/ab.json $OUT/explain.json 2>/dev/null
sed -n '/head against base/,/wrote/p' $OUT/explain.log | cut -c1-220 | head -60
${PYBIN:-python3} - $OUT/explain.json <<'CHECK'
import json, sys
summary = json.load(open(sys.argv[1]))
measuring = summary["measuring"]
print(f"job {measuring['spent_s']:.0f} s, of it {measuring['explaining_s']:.1f} s profiling ops "
      f"({100 * measuring['explaining_s'] / measuring['spent_s']:.1f}%)")
checked = 0
for case in summary["cases"]:
    why = case["explanation"]
    if why is None:
        print(f"{case['benchmark_id']}: {case['status']}, no explanation: {case['explanation_error']}")
        continue
    measured = why["measured_change_s"]
    diff = why["profiled_change_s"]
    if measured is None or measured == 0:
        print(f"{case['benchmark_id']}: {case['status']}, no measured change to compare: {why['lines']}")
        continue
    def named(op):
        calls = "" if None in (op["base_calls"], op["head_calls"]) else f" {op['base_calls']:g}->{op['head_calls']:g} calls"
        return f"{op['name']}{calls} {1e3 * (op['head_s'] - op['base_s']):+.3f} ms"
    kinds = f"{why['basis']} basis, top: " + ", ".join(named(op) for op in why["top"])
    line = (f"{case['benchmark_id']}: {case['status']} x{case['ratio'] or 0:.3f}, measured {1e3 * measured:+.3f} ms a "
            f"step, the diff's {why['basis']} times sum to {1e3 * diff:+.3f} ms ({kinds})")
    if why["basis"] == "device":
        checked += 1
        within = abs(diff - measured) <= 0.2 * abs(measured)
        line += f": {'ADDS UP' if within else 'DOES NOT ADD UP'} within 20% ({100 * (diff / measured - 1):+.0f}%)"
    print(line)
print(f"{checked} GPU-busy case(s) checked" if checked else "no GPU-busy case (no device basis): nothing to check")
CHECK
cat /proc/loadavg; echo "total $(( $(date +%s)-START )) s"
