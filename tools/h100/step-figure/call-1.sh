# First call: item 1, the pipelined rounds against Timer.blocked_autorange and the one-step-and-a-drain method,
# alternated 3 times in one warm process per case (resnet18 and bert-base, bf16 bs32, infer and train, each compile
# mode); then the CUDA reference re-recorded with the step figure, starting the histories over: the standard matrix
# of resnet18 and bert-base in one process, and the bf16 bs32 cases in every compile mode (the compile table's run).
. tools/h100/step-figure/common.sh
S=$(date +%s)
timeout 330 python3 -m perfsuite.selftest.figures --device $DEV --models resnet18,bert-base --dtype bf16 --batch-size 32 \
  --profile $PROFILE --modes infer,train --compile $COMPILE_MODES --alternations 3 --max-time-s $MAX_TIME_S \
  --out $OUT/figures.json > $OUT/figures.log 2>&1
echo "figures rc=$? $(( $(date +%s)-S )) s"; tail -17 $OUT/figures.log
session standard-resnet18-bert 150 --perf-profile $PROFILE --perf-model resnet18,bert-base --perf-dtype fp32,bf16 \
  --perf-mode train,infer --perf-rebaseline
session compile-bf16-bs32 400 --perf-profile $PROFILE --perf-model resnet18,bert-base --perf-batch-size 32 \
  --perf-dtype bf16 --perf-mode infer,train --perf-compile $COMPILE_MODES $CASE_TIMEOUT --perf-rebaseline
python3 tools/h200/compile/table.py $OUT/compile-bf16-bs32.json
keep_baselines; cat /proc/loadavg; echo "call-1 $(( $(date +%s)-START )) s"
