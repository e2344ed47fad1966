"""Puts the MPS double in place in every Python process started with this folder on PYTHONPATH, so a command and
the subprocesses it starts (`perfsuite coverage --runtime` and its probe) all see the pretend Mac.

MPS_DOUBLE_FALLBACK_OPS (comma-separated aten op names, e.g. aten::convolution) chooses the ops that fall back to
the CPU as MPSFallback.mm makes them.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mps_double import MpsDouble  # noqa: E402  (after the path that finds it)

double = MpsDouble()
double.install(setattr)  # the process is the double's for its lifetime: nothing to restore
double.allocate(64 * 2**20)
# Held for the process's lifetime: a context manager that is garbage-collected leaves its block.
tensors_on_cpu = double.tensors_on_cpu()
tensors_on_cpu.__enter__()
fallback_ops = [op.strip() for op in os.environ.get("MPS_DOUBLE_FALLBACK_OPS", "").split(",") if op.strip()]
falling_back = double.falls_back(fallback_ops)
if fallback_ops:
    falling_back.__enter__()

calls_file = os.environ.get("MPS_DOUBLE_CALLS_FILE")
if calls_file:
    import atexit
    import json

    def _append_calls() -> None:
        """One JSON line per process: its pid and the bindings it called, for tests of processes it started."""
        with open(calls_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "calls": list(double.calls)}) + "\n")

    atexit.register(_append_calls)
