"""What a window's time should be: single steps of the A/B jobs' small cases (tools/ab/decides: a tiny conv net,
bs8, one torch thread, built by perfsuite as an A/B side builds it), each timed alone for `--seconds` in a process of
its own, then cut into A/A window pairs of 0.125 s (the default window: --benchmark-max-time 1.0 over 8 windows),
ABBA, as an A/B block alternates its sides. Per case and per window statistic (a quantile of the window's steps), the
spread of a pair's log ratio (standard deviation of the 20%-winsorised log ratios: what a block's trimmed mean
sees) and the seconds of windows it takes to bring a block's error to 1% (spread^2 x seconds a pair / 0.01^2).

    python tools/ab/window_statistic/run.py --seconds 40 --out docs/records/ab/window-statistic/quiet.json

Both "sides" of a pair are the same code: any difference between them is the machine's.
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

import numpy as np
from scipy.stats import mstats

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root, where tools/ is
from tools.bisect.trials import MODEL  # noqa: E402

CASES = (("fp32", "train"), ("bf16", "train"), ("fp32", "infer"), ("bf16", "infer"))
QUANTILES = (0.5, 0.3, 0.2, 0.1, 0.05, 0.0)
WINDOW_S = 0.125
TIMELINE = """
import json, sys, time
from perfsuite.records import Case
from perfsuite.run.measure import open_case
from perfsuite.run.plan import MeasureSettings, RoundSettings
import torch
torch.set_num_threads(1)
exec(open(sys.argv[1]).read())
case = Case(device="cpu", dtype=sys.argv[2], model="tiny-conv", batch_size=8, mode=sys.argv[3], profile="smoke")
warm = open_case(case, MeasureSettings(warmup_steps=10, count_flops=False), RoundSettings())
run_step, times_s, end_s = warm.prepared.run_step, [], time.perf_counter() + float(sys.argv[4])
while time.perf_counter() < end_s:
    started_s = time.perf_counter()
    run_step()
    times_s.append(time.perf_counter() - started_s)
print(json.dumps(times_s))
"""


def timeline(model_file: Path, dtype: str, mode: str, seconds: float) -> list[float]:
    """The times of single steps of the case, timed back to back for `seconds` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", TIMELINE, str(model_file), dtype, mode, str(seconds)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def spreads(times_s: list[float]) -> dict[str, dict[str, float]]:
    """Per quantile: the winsorised spread of A/A window-pair log ratios and the window seconds for a 1% error."""
    steps = np.asarray(times_s)
    per_window = max(1, round(WINDOW_S / float(np.median(steps))))
    windows = steps[: len(steps) // per_window * per_window].reshape(-1, per_window)
    found = {}
    for quantile in QUANTILES:
        values = np.quantile(windows, quantile, axis=1)
        count = len(values) // 2 * 2
        log_ratios = np.log(values[1:count:2] / values[0:count:2])
        spread = float(np.sqrt(np.var(mstats.winsorize(log_ratios, limits=(0.2, 0.2)))))
        found[f"q{quantile}"] = {"spread": spread, "seconds_for_1_percent": spread ** 2 * 2 * WINDOW_S / 1e-4}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        model_file = Path(folder) / "tiny_conv.py"
        model_file.write_text(MODEL)
        for dtype, mode in CASES:
            load_before = os.getloadavg()
            times_s = timeline(model_file, dtype, mode, args.seconds)
            median_step_s, found, load_after = float(np.median(times_s)), spreads(times_s), os.getloadavg()
            results.append({"dtype": dtype, "mode": mode, "steps": len(times_s), "median_step_s": median_step_s,
                            "load_before": load_before, "load_after": load_after, "spreads": found})
            print(f"{dtype} {mode}: {len(times_s)} steps, median {1e3 * median_step_s:.2f} ms; pair spread "
                  + ", ".join(f"{name} {100 * value['spread']:.2f}% ({value['seconds_for_1_percent']:.1f} s)"
                              for name, value in found.items())
                  + f"; load {load_before[0]:.2f} -> {load_after[0]:.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"window_s": WINDOW_S, "seconds": args.seconds, "measured": time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime()), "cases": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
