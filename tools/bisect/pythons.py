"""`perfsuite bisect --pythons` end to end: environments holding torch 2.12.0 and 2.13.0 (CPU), a scratch project with
the tiny conv net of tools/bisect/trials.py (fp32 inference, one torch thread), bisected twice:

- `real`: the model as it is: whatever the two releases do to it;
- `planted`: the forward waits 0.3 x its own time under torch 2.13 or newer (planted, so that there is a slowdown
  whose release is known): the bisect must name torch 2.13.0.

    python tools/bisect/pythons.py --pythons /tmp/bisect-torch-2.12/bin/python /tmp/bisect-torch-2.13/bin/python \
        --out docs/records/bisect/pythons.json

Each environment needs perfsuite installed (every one but the first runs pytest as the head side).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, where tools/ is
from tools.bisect.trials import MODEL, PYPROJECT, git  # noqa: E402

PLANT = '''
if tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13):
    SLOWDOWN = 1.3  # planted: this release's forward waits 0.3 x its own time
'''


def bisect(kind: str, pythons: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="perfsuite-bisect-pythons-") as folder:
        root = Path(folder) / "project"
        root.mkdir()
        model = MODEL.replace("\n\nclass TinyConv", PLANT + "\n\nclass TinyConv", 1) if kind == "planted" else MODEL
        (root / "conftest.py").write_text(model)
        (root / "pyproject.toml").write_text(PYPROJECT)
        (root / "test_perf.py").write_text("def test_model(perf_run, perf_case):\n    perf_run(perf_case)\n")
        git(root, "init", "-q", "-b", "main")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "a model")
        load_before = os.getloadavg()
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "perfsuite.cli", "bisect", "--pythons", *pythons, "--",
                                 "--perf-model", "tiny-conv"], cwd=root, capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - started
        record_path = root / ".perfsuite" / "bisect" / "bisect.json"
        record = json.loads(record_path.read_text()) if record_path.is_file() else None
    return {"kind": kind, "exit_status": result.returncode, "seconds": round(seconds, 1),
            "load_before": load_before, "load_after": os.getloadavg(),
            "positions": record["positions"] if record else None,
            "sentences": record["sentences"] if record else None,
            "steps": [{key: step[key] for key in ("head", "base", "purpose", "status", "seconds")}
                      | {"cases": step["cases"]} for step in record["steps"]] if record else None,
            "output_tail": result.stdout[-2500:] + result.stderr[-1500:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pythons", nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    runs = []
    for kind in ("real", "planted"):
        runs.append(bisect(kind, args.pythons))
        print(f"{kind}: exit {runs[-1]['exit_status']} {runs[-1]['seconds']} s load {runs[-1]['load_before'][0]:.2f}: "
              f"{runs[-1]['sentences']}", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
