# Second call (the baselines of the first carried in): the standard matrix of the SD 1.5 models re-recorded with the
# step figure in one process; item 2, the two pairs that read inverted once (sd15-unet bs1/bs2 and bert-base bs8/bs16,
# fp32 training) measured in 3 processes each (one shuffled pass over the pair a process) and appended to their new
# histories; then the smoke profile of every model re-recorded, so a CPU smoke run compares with the step figure.
. results/h200/step-figure/common.sh
session standard-sd15 200 --perf-profile $PROFILE --perf-model sd15-unet,sd15-text2img,sd15-vae-decode,sd15-text-encoder \
  --perf-dtype fp32,bf16 --perf-mode train,infer --perf-rebaseline
for pair in "sd15-unet 1,2" "bert-base 8,16"; do set -- $pair
  session inversions-$1 150 --perf-profile $PROFILE --perf-dtype fp32 --perf-mode train --perf-model $1 \
    --perf-batch-size $2 --perf-processes 3 --perf-isolation pass --perf-update-baseline
  grep -E "^ *$DEV-fp32-$1-bs" $OUT/inversions-$1.log | cut -c1-200
done
session smoke 150 --perf-profile smoke --perf-rebaseline
keep_baselines; cat /proc/loadavg; echo "call-2 $(( $(date +%s)-START )) s"
