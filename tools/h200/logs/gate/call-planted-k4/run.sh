. tools/h200/prelude.sh
START=$(date +%s); cat /proc/loadavg; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONPATH=$PWD/tests/planted_slowdown:$PYTHONPATH PLANTED_DOUBLE=Conv2d,Linear timeout 380 $PY --perf-processes 4 --perf-isolation pass $GATE --benchmark-json $OUT/planted.json > $OUT/planted.log 2>&1; echo "planted rc=$? $(( $(date +%s)-START )) s"
grep -E "regressed|improved|unchanged|gate|passed|failed" $OUT/planted.log | cut -c1-240 | tail -24
cp .perfsuite/summary.md $OUT/planted-summary.md 2>/dev/null; cp .perfsuite/summary.json $OUT/planted-summary.json 2>/dev/null
S=$(date +%s)
timeout $(( 590 - ( $(date +%s) - START ) )) $PY --perf-device cuda --perf-model resnet18 --perf-batch-size 32 --perf-dtype fp32 --perf-mode infer,train --perf-compile eager,inductor,reduce-overhead,cuda-graph --benchmark-max-time 0.3 tests/benchmarks/test_models.py --benchmark-json $OUT/compile-resnet18-fp32.json --timeout 100 -rsfE --perf-update-baseline > $OUT/compile-resnet18-fp32.log 2>&1; echo "compile rc=$? $(( $(date +%s)-S )) s"
cp baselines/cuda/nvidia-h200.json $OUT/after-c1.json
grep -E "FAILED|SKIPPED|ERROR|passed|failed|Timeout" $OUT/compile-resnet18-fp32.log | cut -c1-250 | tail -12
python3 tools/h200/compile/table.py $OUT/compile-resnet18-fp32.json
cat /proc/loadavg
