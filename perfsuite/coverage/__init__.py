"""Operator coverage: find every op of a model that would fall back to the CPU on MPS.

- `trace`: record the aten ops a workload runs, per phase, with call counts (on the CPU, with MPS's choices);
- `support` and `facts`: the MPS support table of the installed torch (its native_functions.yaml, parsed by
  torchgen, plus `mps_facts.json` for what the yaml does not show);
- `assess`: each traced op with its verdict; `allowlist`: the reviewed fallbacks in baselines/;
- `runtime` and `probe`: on a Mac, run the workload on MPS and report every op that actually fell back;
- `render` and `command`: `perfsuite coverage` / `python -m perfsuite.coverage`.
"""
