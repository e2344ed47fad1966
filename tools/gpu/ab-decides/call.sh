# One device call: an A/A job of the 16 cases at the defaults (tools/gpu/ab-decides/defaults.sh), then the planted
# job (a 10 us host wait before every Conv2d and Linear forward of the head's models) on the launch-bound bs32 cases,
# with what is left of the call. Each job records the card's conditions per block (ab.json).
#   bash tools/gpu/ab-decides/call.sh     (carry .whl: diffusers, importlib_metadata, zipp)
START=$(date +%s)
JOBS=aa LIMIT_S=${AA_LIMIT_S:-370} bash tools/gpu/ab-decides/defaults.sh
left=$(( ${CALL_S:-585} - ($(date +%s) - START) ))
echo "planted: $left s left"
if [ $left -gt 120 ]; then
  rm -rf .git .perfsuite
  JOBS=planted BATCH=32 LIMIT_S=$(( left - 10 )) bash tools/gpu/ab-decides/defaults.sh
fi
echo "call $(( $(date +%s) - START )) s"
