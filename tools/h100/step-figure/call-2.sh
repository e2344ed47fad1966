# Second call, on the card of the first (an H100; its pytest sessions stopped at their start: pytest-benchmark 5.2
# there hands --benchmark-json over as an open file, fixed since). The card had no baseline file, so the runs are
# appended (--perf-update-baseline: a card's first file starts with them; a history of the latency figure would
# refuse them, naming --perf-rebaseline). In order of need, each session cut to what is left of the call: the
# standard matrix of resnet18 and bert-base in one process; the smoke profile of every model (what a CPU smoke run
# compares with); item 2, the pairs that read inverted once (sd15-unet bs1/bs2, bert-base bs8/bs16, fp32 training)
# in 3 processes each (one shuffled pass over the pair a process); the bf16 bs32 cases in every compile mode (the
# compile table's run); the three cases of item 1 the first call's 330 s left out; the SD 1.5 standard matrix.
R=/tmp/step-figure; . tools/h100/step-figure/common.sh
RECORD=--perf-update-baseline
session standard-resnet18-bert 150 --perf-profile $PROFILE --perf-model resnet18,bert-base --perf-dtype fp32,bf16 \
  --perf-mode train,infer $RECORD; pack
session smoke 80 --perf-profile smoke $RECORD; pack
for pair in "sd15-unet 1,2" "bert-base 8,16"; do set -- $pair
  session inversions-$1 80 --perf-profile $PROFILE --perf-dtype fp32 --perf-mode train --perf-model $1 \
    --perf-batch-size $2 --perf-processes 3 --perf-isolation pass $RECORD; pack
  grep -E "^ *$DEV-fp32-$1-bs" $R/inversions-$1.log | cut -c1-200
done
session compile-bf16-bs32 200 --perf-profile $PROFILE --perf-model resnet18,bert-base --perf-batch-size 32 \
  --perf-dtype bf16 --perf-mode infer,train --perf-compile $COMPILE_MODES $CASE_TIMEOUT $RECORD; pack
python3 tools/h200/compile/table.py $R/compile-bf16-bs32.json
S=$(date +%s); L=$(( $(left) - 20 )); [ $L -gt 130 ] && L=130
if [ $L -gt 30 ]; then
  timeout $L python3 -m perfsuite.selftest.figures --device $DEV --models bert-base --dtype bf16 --batch-size 32 \
    --profile $PROFILE --modes train --compile ${COMPILE_MODES#eager,} --alternations 3 --max-time-s $MAX_TIME_S \
    --out $R/figures-bert-train.json > $R/figures-bert-train.log 2>&1
  echo "figures-bert-train rc=$? $(( $(date +%s)-S )) s"; tail -4 $R/figures-bert-train.log
else echo "figures-bert-train not run: $(left) s left"; fi; pack
session standard-sd15 200 --perf-profile $PROFILE --perf-model sd15-unet,sd15-text2img,sd15-vae-decode,sd15-text-encoder \
  --perf-dtype fp32,bf16 --perf-mode train,infer $RECORD; pack
cat /proc/loadavg; echo "call-2 $(( $(date +%s)-START )) s"
