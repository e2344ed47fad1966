# The conditions behind every CUDA number, on the lent GPU (read-only: no setting of the card is changed). Three parts,
# about 4 minutes in all:
# 1. NVML as perfsuite reads it (perfsuite.run.devices.nvml through the CUDA backend) while a bf16 matmul keeps the
#    GPU busy, beside `nvidia-smi -q -d PERFORMANCE,CLOCK` read at the same moment, then idle after a pause.
# 2. A recording gate session on resnet18 bf16 at bs32 and bs256, train and infer (bs256 train GPU-busy, bs32 infer
#    launch-bound), with
#    nvidia-smi sampled every 2 s in the background while its cases run; every case's record (pytest-benchmark's JSON,
#    the baseline file, the archive) must carry the NVML conditions before and after its rounds.
# 3. A judging session on the same cases against that history: the conditions compared case by case.
# What it cannot show: a capped session against an uncapped history (the lender forbids changing the card's power or
# clock settings); tests/quick/test_conditions.py checks that rule on NVML readings as recorded.
# DEV=cpu dry-runs parts 2 and 3 on the CPU at smoke sizes to show the script works.
set -u
DEV=${DEV:-cuda}
if [ "$DEV" = cuda ]; then
  . tools/h200/prelude.sh
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
  CASES="--perf-device cuda --perf-model resnet18 --perf-dtype bf16 --perf-batch-size 32,256 --perf-mode train,infer"
else
  set -o pipefail; export PYTHONUNBUFFERED=1; OUT=${OUT:-/tmp/conditions-dry-run}; mkdir -p $OUT
  PY="${PYBIN:-python3} -m pytest -p no:cacheprovider --benchmark-only"
  CASES="--perf-device cpu --perf-model resnet18 --perf-profile smoke --perf-dtype fp32 --perf-batch-size 2 --perf-mode train,infer --perf-threads 1"
fi
PYTHON=${PYBIN:-python3}
START=$(date +%s); cat /proc/loadavg
$PYTHON -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
$PYTHON -c "import pynvml; print('nvidia-ml-py', getattr(pynvml, '__version__', '?'))" 2>&1 | tail -1

if [ "$DEV" = cuda ]; then
  echo "== 1. NVML through perfsuite's reader beside nvidia-smi, busy then idle"
  $PYTHON - <<'PROBE' 2>&1 | tee $OUT/probe.log
import subprocess, time
import torch
from perfsuite.render.conditions import conditions_text
from perfsuite.run.devices import backend

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.perf_counter() + 8
while time.perf_counter() < end:  # 8 s of back-to-back matmuls: the clocks settle under load
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
for _ in range(40):  # queued work that keeps the GPU busy while both read
    a @ a
smi = subprocess.Popen(["nvidia-smi", "-q", "-d", "PERFORMANCE,CLOCK"], stdout=subprocess.PIPE, text=True)
busy = backend("cuda").conditions()
print("perfsuite, busy:", conditions_text(busy))
print(smi.communicate()[0])
torch.cuda.synchronize()
time.sleep(5)
print("perfsuite, 5 s idle:", conditions_text(backend("cuda").conditions()))
PROBE
  ( while true; do date -u +%H:%M:%S; nvidia-smi -q -d PERFORMANCE,CLOCK | grep -E "Active|SM  |Clocks Event Reasons" | grep -v "Not Active"; sleep 2; done ) > $OUT/nvidia-smi-during-gate.log 2>&1 &
  SAMPLER=$!
fi

echo "== 2. recording session"
S=$(date +%s)
timeout -s INT 240 $PY $CASES --benchmark-max-time 1.0 --perf-update-baseline --perf-baseline-dir $OUT/baselines \
  --perf-summary-dir $OUT/record --benchmark-json $OUT/record-benchmarks.json tests/benchmarks/test_models.py \
  > $OUT/record.log 2>&1
echo "record rc=$? $(( $(date +%s)-S )) s"
grep -E "^perfsuite: (conditions|before|for steadier)|recorded|archived|nothing recorded|will not record" $OUT/record.log | cut -c1-400
[ "$DEV" = cuda ] && kill $SAMPLER 2>/dev/null

echo "== 3. judging session against that history"
S=$(date +%s)
timeout -s INT 200 $PY $CASES --benchmark-max-time 1.0 --perf-baseline-dir $OUT/baselines \
  --perf-summary-dir $OUT/judge --benchmark-json $OUT/judge-benchmarks.json tests/benchmarks/test_models.py \
  > $OUT/judge.log 2>&1
echo "judge rc=$? $(( $(date +%s)-S )) s"
sed -n '/perfsuite regression gate/,$p' $OUT/judge.log | cut -c1-400 | head -30

echo "== every case's record: the conditions before and after its rounds"
$PYTHON - $OUT <<'CHECK'
import json, pathlib, sys
from perfsuite.records import conditions_from_json
from perfsuite.render.conditions import conditions_text

out = pathlib.Path(sys.argv[1])
missing = 0
for name in ("record-benchmarks.json", "judge-benchmarks.json"):
    path = out / name
    if not path.exists():
        print(f"{name}: not written"); missing += 1; continue
    for bench in json.loads(path.read_text())["benchmarks"]:
        info = bench["extra_info"]
        for when in ("conditions_before", "conditions_after"):
            if info.get(when) is None:
                print(f"{name} {bench['name']}: NO {when}"); missing += 1; continue
            reading = conditions_from_json(info[when], when)
            print(f"{name} {bench['name']} {when}: {conditions_text(reading)}")
for baseline in sorted((out / "baselines").glob("*/*.json")):
    entries = json.loads(baseline.read_text())["entries"]
    for benchmark_id, entry in entries.items():
        without = [i for i, run in enumerate(entry["runs"]) if not run.get("conditions_before") or not run.get("conditions_after")]
        print(f"{baseline.name} {benchmark_id}: {len(entry['runs'])} run(s), runs without conditions: {without or 'none'}")
        missing += len(without)
summary = out / "judge" / "summary.json"
if summary.exists():
    document = json.loads(summary.read_text())
    for verdict in document["verdicts"]:
        print(f"{verdict['benchmark_id']}: {verdict['status']}; conditions {verdict['conditions']}")
print("every record carries its conditions" if not missing else f"{missing} record(s) WITHOUT conditions")
CHECK
[ "$DEV" = cuda ] && tail -40 $OUT/nvidia-smi-during-gate.log
echo "total $(( $(date +%s)-START )) s"; cat /proc/loadavg
