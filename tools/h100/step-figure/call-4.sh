# Fourth call, on an H100 (the card whose reference file holds the step figure): what the third call's 240 s left
# out of the SD 1.5 standard matrix (the text-to-image pipeline, the VAE decode and the text encoder; the UNet's 12
# cases are in), appended to the H100's reference (--perf-update-baseline); then the pair that read inverted once on
# the H200 (sd15-unet bs1/bs2 fp32 training) in 3 processes (one shuffled pass over the pair a process), cut twice
# before in its second process, with what is left of the call.
R=/tmp/step-figure; . tools/h100/step-figure/common.sh
RECORD=--perf-update-baseline
session standard-sd15-rest 400 --perf-profile $PROFILE --perf-model sd15-text2img,sd15-vae-decode,sd15-text-encoder \
  --perf-dtype fp32,bf16 --perf-mode train,infer $RECORD; pack
session inversions-sd15-unet 170 --perf-profile $PROFILE --perf-dtype fp32 --perf-mode train --perf-model sd15-unet \
  --perf-batch-size 1,2 --perf-processes 3 --perf-isolation pass $RECORD; pack
grep -E "^ *$DEV-fp32-sd15-unet-bs" $R/inversions-sd15-unet.log | cut -c1-200
cat /proc/loadavg; echo "call-4 $(( $(date +%s)-START )) s"
