# One device call: where a launch-bound step's time goes between the places perfsuite measures it
# (tools/gpu/worker_step/run.py, the four launch-bound bs32 cases an A/A job left undecided or noisy), then an A/A
# job of the eight bs32 cases at the defaults on the same machine, to set the job's windows beside it.
#   bash tools/gpu/worker_step/call.sh     (carry .whl: diffusers, importlib_metadata, zipp)
. tools/h200/prelude.sh
LIMIT_S=${LIMIT_S:-570}; START=$(date +%s)
cat /proc/loadavg; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; nproc
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.get_num_threads())"
timeout 240 python3 tools/gpu/worker_step/run.py --device cuda --passes 10 --out $OUT/worker-step.json \
  --cases bf16:resnet18:32:train,bf16:bert-base:32:infer,fp32:resnet18:32:infer,bf16:bert-base:32:train \
  2>&1 | tee $OUT/worker-step.log | grep -v Warning; echo "worker-step rc=$? $(( $(date +%s)-START )) s"
cat /proc/loadavg
left=$(( LIMIT_S - ($(date +%s) - START) ))
if [ $left -gt 120 ]; then
  JOBS=aa BATCH=32 LIMIT_S=$left bash tools/gpu/ab-decides/defaults.sh 2>&1 | grep -v "^\s*$" | tail -40
else echo "aa not run: $left s left"; fi
echo "call $(( $(date +%s)-START )) s"
