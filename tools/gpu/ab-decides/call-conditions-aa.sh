# One device call where only one is to be had: the conditions run (tools/gpu/conditions/run.sh, about 4 minutes),
# then an A/A job of the eight launch-bound bs32 cases at the defaults with what is left (their blocks record the
# card's conditions too).
#   bash tools/gpu/ab-decides/call-conditions-aa.sh     (carry .whl: diffusers, importlib_metadata, zipp)
START=$(date +%s)
bash tools/gpu/conditions/run.sh
left=$(( ${CALL_S:-585} - ($(date +%s) - START) ))
echo "A/A of the bs32 cases: $left s left"
if [ $left -gt 120 ]; then
  rm -rf .git .perfsuite
  JOBS=aa BATCH=32 LIMIT_S=$(( left - 10 )) bash tools/gpu/ab-decides/defaults.sh
fi
echo "call $(( $(date +%s) - START )) s"
