set -o pipefail; export PYTHONUNBUFFERED=1; mkdir -p /tmp/site
for w in .whl/*.whl; do m=$(basename $w | cut -d- -f1); python3 -c "import $m" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $w; done
export PYTHONPATH=/tmp/site:$PWD
PY="python3 -m pytest -p perfsuite.plugin -p no:cacheprovider --benchmark-only"
GATE="--perf-device cuda --perf-model resnet18,bert-base --perf-batch-size 32,256 --perf-dtype fp32,bf16 --perf-mode train,infer --benchmark-max-time 0.3 tests/benchmarks/test_models.py"
