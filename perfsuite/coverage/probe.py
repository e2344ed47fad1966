"""The runtime probe: run one workload on MPS and report what fell back to the CPU.

Started by `perfsuite.coverage.runtime.run_runtime_check` with PYTORCH_ENABLE_MPS_FALLBACK=1 and
PYTORCH_MPS_LOG_PROFILE_INFO in its environment, so both hold from before torch's import. It writes a
phase marker line to stderr before each phase (MPSProfiler's per-call lines go to stderr too, in order),
and one JSON line to stdout at the end: the torch version, every warning with its phase, and the error
that stopped the run, if any.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import traceback
import warnings
from collections.abc import Iterator

from perfsuite.coverage.runtime import PHASE_MARKER


def main(argv: list[str] | None = None) -> int:
    """Run the probe; 0 when the workload ran, 3 when it raised (the error is in the report), 2 on misuse."""
    parser = argparse.ArgumentParser(prog="python -m perfsuite.coverage.probe", description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--modes", default="infer,train")
    parser.add_argument("--import", dest="user_module", help="module that registers the workload")
    parser.add_argument("--import-from", help="directory of that module")
    args = parser.parse_args(argv)
    if os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK") != "1":
        print("the probe needs PYTORCH_ENABLE_MPS_FALLBACK=1 in its environment, set before torch is imported; "
              "run it through perfsuite.coverage.runtime.run_runtime_check", file=sys.stderr)
        return 2

    import torch

    from perfsuite.coverage.trace import default_batch_size, run_phases
    from perfsuite.workloads import get_workload

    if args.user_module:
        sys.path.insert(0, args.import_from or os.getcwd())
        importlib.import_module(args.user_module)
    workload = get_workload(args.model)
    modes = tuple(m for m in args.modes.split(",") if m in workload.modes)
    # The fallback warns through TORCH_WARN_ONCE; warn_always makes every call warn.
    torch.set_warn_always(True)
    recorded: list[dict] = []
    phase = {"label": "build"}

    @contextlib.contextmanager
    def enter_phase(label: str) -> Iterator[None]:
        phase["label"] = label
        print(f"{PHASE_MARKER}{label}", file=sys.stderr, flush=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
                # The phase's queued work (and its fallback log lines) ends before the next marker.
                torch.mps.synchronize()
            finally:
                recorded.extend({"phase": label, "message": str(w.message)} for w in caught)

    report: dict = {"torch_version": torch.__version__, "model": workload.name, "warnings": recorded, "error": None}
    status = 0
    try:
        run_phases(workload, args.profile, default_batch_size(workload, args.profile), modes, "mps", enter_phase)
    except Exception as error:  # any failure goes back to the parent in the report
        report["error"] = {"phase": phase["label"], "type": type(error).__name__, "message": str(error),
                           "traceback": traceback.format_exc()}
        status = 3
    sys.stderr.flush()
    print(json.dumps(report), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
