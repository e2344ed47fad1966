"""Where a launch-bound step's time goes between the places perfsuite measures it: the same case, opened warm in
each place at once, timed in windows of the A/B job's size (rounds of the same steps), the places taking turns in a
shuffled order every pass:

- `direct`: this process (what the selftest's accuracy section measures);
- `direct+watcher`: this process with a thread that wakes once a second, as a worker's orphan watch does;
- `gate-worker`: a measuring worker process (`perfsuite.run.worker`, no sides: the gate's);
- `ab-base`, `ab-head`: one worker holding both sides of an A/A job (the repository as both), as an A/B job's.

On the GPU an A/B job's launch-bound windows read 20-48% apart and the steps twice as long as the accuracy section
measured (docs/records/gpu/ab-decides/README.md); this says which of these places is slow, and how steady each is.

    python tools/gpu/worker_step/run.py --device cuda --cases bf16:resnet18:32:train,bf16:bert-base:32:infer \
        --passes 10 --out worker-step.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPOSITORY))

from perfsuite.records import Case  # noqa: E402
from perfsuite.run.ab import WINDOWS, most_round_s, window_time_s  # noqa: E402
from perfsuite.run.measure import open_case  # noqa: E402
from perfsuite.run.plan import MeasureSettings, RoundSettings, most_steps_per_round  # noqa: E402
from perfsuite.run.wire import WorkerSide, WorkerSpec  # noqa: E402
from perfsuite.run.workers import Workers  # noqa: E402
from perfsuite.workloads import MODEL_MODULES  # noqa: E402

PLACES = ("direct", "direct+watcher", "gate-worker", "ab-base", "ab-head")


def parse_case(text: str, device: str, profile: str) -> Case:
    dtype, model, batch_size, mode = text.split(":")
    return Case(device, dtype, model, int(batch_size), mode, profile)


def measure_case(case: Case, passes: int, window_s: float, folder: Path, seed: int) -> dict[str, Any]:
    """Open `case` in every place, then `passes` shuffled passes of one window per place; the windows' times."""
    settings, rounds = MeasureSettings(warmup_steps=10, count_flops=False), RoundSettings()
    direct = open_case(case, settings, rounds)
    longest = RoundSettings(1, most_round_s(rounds.max_time_s))
    steps = min(direct.steps_per_round, most_steps_per_round(direct.step_s, longest))
    pool = Workers(folder, 600)
    gate = pool.start(WorkerSpec(settings, rounds, None, sys_path=(str(REPOSITORY),)), 0, "gate")
    sides = (WorkerSide("base", str(REPOSITORY), {}), WorkerSide("head", str(REPOSITORY), {}))
    both = pool.start(WorkerSpec(settings, rounds, None, sides=sides, head_root=str(REPOSITORY),
                                 model_modules=tuple(MODEL_MODULES)), 1, "base+head", harness=True)
    watching = threading.Event()

    def watcher() -> None:
        while True:
            watching.wait()
            time.sleep(1.0)

    threading.Thread(target=watcher, daemon=True).start()
    try:
        for worker, side in ((gate, None), (both, "base"), (both, "head")):
            reply = worker.request({"op": "open", "case": case.__dict__, **({"side": side} if side else {})})
            if not reply["ok"]:
                raise RuntimeError(f"{side or 'gate'}: {reply['outcome']}")

        def in_worker(worker: Any, side: str | None) -> Callable[[], list[float]]:
            def timed() -> list[float]:
                reply = worker.request({"op": "window", "duration_s": window_s, "steps": steps,
                                        **({"side": side} if side else {})})
                return list(reply["times_s"])
            return timed

        def direct_window(watched: bool) -> Callable[[], list[float]]:
            def timed() -> list[float]:
                (watching.set if watched else watching.clear)()
                direct.steps_per_round = steps
                return direct.time_rounds(window_s)
            return timed

        timers = {"direct": direct_window(False), "direct+watcher": direct_window(True),
                  "gate-worker": in_worker(gate, None), "ab-base": in_worker(both, "base"),
                  "ab-head": in_worker(both, "head")}
        windows: dict[str, list[list[float]]] = {place: [] for place in PLACES}
        order = random.Random(seed)
        for _ in range(passes):
            for place in order.sample(PLACES, len(PLACES)):
                windows[place].append(timers[place]())
        watching.clear()
    finally:
        pool.stop_all()
        direct.close()
    return {"case": case.benchmark_id, "steps_per_round": steps, "window_s": window_s, "windows": windows}


def summary(result: dict[str, Any]) -> list[str]:
    lines = [f"{result['case']}: {result['steps_per_round']} steps a round, windows of {result['window_s']:.3f} s"]
    for place, windows in result["windows"].items():
        times_ms = [1e3 * window_time_s(times) for times in windows]
        rounds = statistics.median(len(times) for times in windows)
        lines.append(f"  {place:15} window ms median {statistics.median(times_ms):8.3f}  min {min(times_ms):8.3f}  "
                     f"max {max(times_ms):8.3f}  rounds a window {rounds:g}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--profile", default="standard")
    parser.add_argument("--cases", default="bf16:resnet18:32:train,bf16:bert-base:32:infer")
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--window-s", type=float, default=1.0 / WINDOWS)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for text in arguments.cases.split(","):
            started_s = time.perf_counter()
            result = measure_case(parse_case(text, arguments.device, arguments.profile), arguments.passes,
                                  arguments.window_s, Path(folder), arguments.seed)
            result["seconds"] = time.perf_counter() - started_s
            results.append(result)
            print("\n".join(summary(result)), f"({result['seconds']:.0f} s)", flush=True)
            if arguments.out:
                arguments.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
