# A/A (head against itself) twice more.
. tools/h200/ab/common.sh
ab_job aa2 285 --perf-ab HEAD
ab_job aa3 285 --perf-ab HEAD
cat /proc/loadavg; echo "total $(( $(date +%s)-START )) s"
