. tools/h200/prelude.sh
START=$(date +%s); cat /proc/loadavg
run() { name=$1; shift; timeout $(( 585 - ( $(date +%s) - START ) )) $PY --perf-device cuda --perf-compile eager,inductor,reduce-overhead,cuda-graph --benchmark-max-time 0.3 tests/benchmarks/test_models.py --benchmark-json $OUT/compile-$name.json --timeout 200 -rsfE --perf-update-baseline "$@" > $OUT/compile-$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-START )) s"; cp baselines/cuda/nvidia-h200.json $OUT/after-c2.json; grep -E "FAILED|SKIPPED|ERROR|passed|failed|Timeout" $OUT/compile-$name.log | cut -c1-250 | tail -8; python3 tools/h200/compile/table.py $OUT/compile-$name.json; }
run bert-fp32 --perf-model bert-base --perf-batch-size 32 --perf-dtype fp32 --perf-mode infer,train
run unet-bf16 --perf-model sd15-unet --perf-batch-size 4 --perf-dtype bf16 --perf-mode infer
run unet-fp32 --perf-model sd15-unet --perf-batch-size 4 --perf-dtype fp32 --perf-mode infer
cat /proc/loadavg
