# Third call, on an H100 (the card whose reference file holds the step figure): what the second call left out, most
# needed first. The SD 1.5 standard matrix appended to the H100's reference (--perf-update-baseline); the pair that
# read inverted once on the H200 (sd15-unet bs1/bs2 fp32 training) in 3 processes (one shuffled pass over the pair a
# process); bert-base bf16 bs32 train compiled against Timer (reduce-overhead and cuda-graph, the two rows of item 1
# no call measured yet).
R=/tmp/step-figure; . tools/h100/step-figure/common.sh
RECORD=--perf-update-baseline
session standard-sd15 240 --perf-profile $PROFILE --perf-model sd15-unet,sd15-text2img,sd15-vae-decode,sd15-text-encoder \
  --perf-dtype fp32,bf16 --perf-mode train,infer $RECORD; pack
session inversions-sd15-unet 170 --perf-profile $PROFILE --perf-dtype fp32 --perf-mode train --perf-model sd15-unet \
  --perf-batch-size 1,2 --perf-processes 3 --perf-isolation pass $RECORD; pack
grep -E "^ *$DEV-fp32-sd15-unet-bs" $R/inversions-sd15-unet.log | cut -c1-200
S=$(date +%s); L=$(( $(left) - 15 )); [ $L -gt 140 ] && L=140
if [ $L -gt 40 ]; then
  timeout $L python3 -m perfsuite.selftest.figures --device $DEV --models bert-base --dtype bf16 --batch-size 32 \
    --profile $PROFILE --modes train --compile reduce-overhead,cuda-graph --alternations 3 --max-time-s $MAX_TIME_S \
    --out $R/figures-bert-train-graphs.json > $R/figures-bert-train-graphs.log 2>&1
  echo "figures-bert-train-graphs rc=$? $(( $(date +%s)-S )) s"; tail -4 $R/figures-bert-train-graphs.log
else echo "figures-bert-train-graphs not run: $(left) s left"; fi; pack
cat /proc/loadavg; echo "call-3 $(( $(date +%s)-START )) s"
