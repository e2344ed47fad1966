# One device call: where a launch-bound step's time goes between the places perfsuite measures it
# (tools/gpu/worker_step/run.py, the four launch-bound bs32 cases an A/A job left undecided or noisy), then A/A jobs
# of the eight bs32 cases on the same machine: at the defaults (windows of 0.125 s) and with --benchmark-max-time 0.3
# (windows of 0.0375 s, the setting whose first H100 job read floors of 0.2-3.3%).
#   bash tools/gpu/worker_step/call.sh     (carry .whl: diffusers, importlib_metadata, zipp)
. tools/h200/prelude.sh
LIMIT_S=${LIMIT_S:-575}; START=$(date +%s)
cat /proc/loadavg; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; nproc
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.get_num_threads())"
timeout 200 python3 tools/gpu/worker_step/run.py --device cuda --passes 8 --out $OUT/worker-step.json \
  --cases bf16:resnet18:32:train,bf16:bert-base:32:infer,fp32:resnet18:32:infer,bf16:bert-base:32:train \
  2>&1 | tee $OUT/worker-step.log | grep -v Warning; echo "worker-step rc=$? $(( $(date +%s)-START )) s"
cat /proc/loadavg
left=$(( LIMIT_S - ($(date +%s) - START) ))
half=$(( left / 2 + 20 ))
if [ $left -gt 120 ]; then
  JOBS=aa BATCH=32 LIMIT_S=$half bash tools/gpu/ab-decides/defaults.sh 2>&1 | tail -14
  left=$(( LIMIT_S - ($(date +%s) - START) ))
  for f in $OUT/aa-1.log $OUT/aa-1.json; do [ -f $f ] && mv $f ${f/aa-1/aa-defaults}; done
  JOBS=aa BATCH=32 LIMIT_S=$left EXTRA="--benchmark-max-time 0.3" bash tools/gpu/ab-decides/defaults.sh 2>&1 | tail -14
  for f in $OUT/aa-1.log $OUT/aa-1.json; do [ -f $f ] && mv $f ${f/aa-1/aa-max-time-0.3}; done
else echo "aa not run: $left s left"; fi
echo "call $(( $(date +%s)-START )) s"
