# One device call: the conditions run (tools/gpu/conditions/run.sh, about 4 minutes), then the explain run
# (tools/gpu/explain/run.sh) with what is left of the call. Each runs in a fresh git repository of this copy.
#   bash tools/gpu/conditions/call.sh     (carry .whl: diffusers, importlib_metadata, zipp)
START=$(date +%s)
bash tools/gpu/conditions/run.sh
left=$(( ${CALL_S:-585} - ($(date +%s) - START) ))
echo "explain: $left s left"
if [ $left -gt 150 ]; then
  rm -rf .git .perfsuite
  LIMIT_S=$(( left - 30 )) BUDGET_S=$(( left - 100 )) bash tools/gpu/explain/run.sh
fi
echo "call $(( $(date +%s) - START )) s"
