. tools/h200/prelude.sh
START=$(date +%s); cat /proc/loadavg
timeout 555 $PY --perf-device cuda --perf-model resnet18,bert-base --perf-batch-size 32 --perf-dtype bf16 --perf-mode infer,train --perf-compile eager,inductor,reduce-overhead,cuda-graph --benchmark-max-time 0.3 tests/benchmarks/test_models.py --benchmark-json $OUT/compile.json --timeout 100 -rsfE --perf-update-baseline > $OUT/compile.log 2>&1; echo "compile rc=$? $(( $(date +%s)-START )) s"
cp baselines/cuda/nvidia-h200.json $OUT/after-compile.json
grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|Timeout" $OUT/compile.log | cut -c1-250 | tail -25
python3 - <<'PY'
import json, os
try:
    d = json.load(open(os.environ["OUT"] + "/compile.json"))
except Exception as e:
    print("no json", e); raise SystemExit
for b in d["benchmarks"]:
    e = b["extra_info"]
    print(f'{b["name"][11:-1]:45s} med {b["stats"]["median"]*1e3:8.3f} ms  sps {e.get("samples_per_s") or 0:9.1f} busy {e.get("gpu_busy_fraction")} first {e.get("compile_first_call_s")} graphs {e.get("compile_graphs")} breaks {e.get("compile_graph_breaks")} diff {e.get("compile_check_largest_difference")}')
PY
cat /proc/loadavg
