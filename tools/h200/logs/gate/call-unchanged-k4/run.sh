. tools/h200/prelude.sh
START=$(date +%s); cat /proc/loadavg
timeout 340 $PY --perf-processes 4 --perf-isolation pass $GATE > $OUT/unchanged.log 2>&1; echo "unchanged rc=$? $(( $(date +%s)-START )) s"
grep -E "regressed|improved|unchanged|gate|passed|failed" $OUT/unchanged.log | cut -c1-220 | tail -24
cp .perfsuite/summary.md $OUT/unchanged-summary.md 2>/dev/null
S=$(date +%s)
timeout $(( 585 - ( $(date +%s) - START ) )) $PY --perf-processes 3 --perf-isolation pass --perf-device cuda --perf-profile smoke --benchmark-max-time 0.3 tests/benchmarks/test_models.py --perf-update-baseline --benchmark-json $OUT/smoke.json > $OUT/smoke.log 2>&1; echo "smoke rc=$? $(( $(date +%s)-S )) s"; tail -3 $OUT/smoke.log | cut -c1-200
cp baselines/cuda/nvidia-h200.json $OUT/after-smoke.json
cat /proc/loadavg
