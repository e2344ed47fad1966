"""The accuracy section on cases of your choice: `python -m perfsuite.selftest.figures --device cuda --models
resnet18,bert-base --dtype bf16 --batch-size 32 --modes infer,train --compile eager,inductor,reduce-overhead,cuda-graph
--out FILE.json` measures each case once warm, through the real measuring code (pipelined rounds timed by
pytest-benchmark), beside torch.utils.benchmark.Timer.blocked_autorange and the one-step-and-a-drain method, the
three alternated `--alternations` times (`perfsuite.selftest.measure.measure_accuracy`), and prints the table.

Each case is measured in a process of its own, so one case's compiled graphs and allocator do not carry into the
next; a case that cannot run here is listed with its reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfsuite.records import Case

KEYS = (("timer_blocked_s", "Timer blocked"), ("synced_s", "step+drain"), ("profiler_kernel_s", "GPU kernels"))


def measure_one(case: Case, max_time_s: float, warmup_steps: int, alternations: int) -> dict[str, Any]:
    from perfsuite.selftest.measure import measure_accuracy
    from perfsuite.selftest.plan import SelftestCase

    return measure_accuracy(SelftestCase(case.benchmark_id, case), max_time_s, warmup_steps, alternations)


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["case | steps a round | suite ms | " + " | ".join(f"{title} ms | diff" for _, title in KEYS)]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['name']} | {row['error'][:150]}")
            continue
        suite = row["suite_s"]
        cells = [row["name"], str(row["steps_per_round"]), f"{suite * 1e3:.4g}"]
        for key, _ in KEYS:
            value = row.get(key)
            cells += ["-", "-"] if value is None else [f"{value * 1e3:.4g}", f"{100 * (suite / value - 1):+.1f}%"]
        lines.append(" | ".join(cells))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsuite.selftest.figures", description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--modes", default="infer,train")
    parser.add_argument("--compile", default="eager")
    parser.add_argument("--max-time-s", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a case's JSON: measure it in this process
    args = parser.parse_args(argv)
    if args.one:
        row = measure_one(Case(**json.loads(args.one)), args.max_time_s, args.warmup, args.alternations)
        print(json.dumps(row))
        return 0
    rows = []
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            for compile_mode in args.compile.split(","):
                case = Case(args.device, args.dtype, model, args.batch_size, mode, args.profile, compile_mode)
                done = subprocess.run(
                    [sys.executable, "-m", "perfsuite.selftest.figures", "--one", json.dumps(case.__dict__),
                     "--max-time-s", str(args.max_time_s), "--warmup", str(args.warmup),
                     "--alternations", str(args.alternations)], capture_output=True, text=True, timeout=900,
                )
                lines = done.stdout.strip().splitlines()
                try:
                    row = json.loads(lines[-1])
                except (IndexError, json.JSONDecodeError):
                    row = {"name": case.benchmark_id, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps({"load_average": list(os.getloadavg()), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
