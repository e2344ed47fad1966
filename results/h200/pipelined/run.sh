# Pipelined rounds against Timer.blocked_autorange and the one-step-and-a-drain method, alternated 5 times in one
# warm process per case; then the sd15-unet bs1/bs2 and bert-base bs8/bs16 fp32 training pairs that read inverted
# once, with 3 processes each.
. results/h200/prelude.sh
START=$(date +%s); cat /proc/loadavg; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 420 python3 -m perfsuite.selftest.figures --device cuda --models resnet18,bert-base --dtype bf16 --batch-size 32 --profile standard --modes infer,train --compile eager,inductor,reduce-overhead,cuda-graph --alternations 5 --max-time-s 0.3 --out $OUT/figures.json 2>&1 | tail -20
echo "figures $(( $(date +%s)-START )) s"
for pair in "sd15-unet 1,2" "bert-base 8,16"; do set -- $pair; S=$(date +%s)
  timeout $(( 585 - ( $(date +%s) - START ) )) $PY --perf-device cuda --perf-profile standard --perf-dtype fp32 --perf-mode train --perf-model $1 --perf-batch-size $2 --perf-processes 3 --perf-isolation case --benchmark-max-time 0.3 tests/benchmarks/test_models.py --benchmark-json $OUT/inversions-$1.json > $OUT/inversions-$1.log 2>&1; echo "$1 rc=$? $(( $(date +%s)-S )) s"
  grep -E "^test_model|passed|failed" $OUT/inversions-$1.log | cut -c1-160
done
cat /proc/loadavg
