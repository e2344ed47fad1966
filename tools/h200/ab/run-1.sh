# A/A (head against itself) once, then a planted host-side slowdown against its base.
. tools/h200/ab/common.sh
ab_job aa1 285 --perf-ab HEAD
plant
ab_job planted 285 --perf-ab HEAD~1
cat /proc/loadavg; echo "total $(( $(date +%s)-START )) s"
