"""The axes of the matrix: every value a case's device, dtype, mode and profile may take, declared once."""

from __future__ import annotations

from perfsuite.records import EAGER

DEVICES = ("cpu", "cuda", "mps")
DTYPES = ("fp32", "bf16", "fp16")
DEFAULT_DTYPES = ("fp32", "bf16")
PROFILES = ("smoke", "standard", "full")
# The profile when none is chosen: the article's sizes where an accelerator runs, scaled-down models on a CPU alone
# (the standard sizes take hours on a few CPU cores).
ACCELERATOR_DEFAULT_PROFILE = "standard"
CPU_DEFAULT_PROFILE = "smoke"
# The --perf-model name of the DataLoader throughput cases (tests/benchmarks/test_dataloader.py), beside the models.
DATALOADER_MODEL = "dataloader"
MODES = ("train", "infer")
# Variants of the two modes, selected with --perf-mode; each needs something of the workload (Workload.modes).
VARIANT_MODES = ("train-checkpoint", "train-channels-last", "infer-channels-last", "train-ddp")
ALL_MODES = MODES + VARIANT_MODES
# How the step runs: as written (eager), through torch.compile with the default inductor backend, through
# torch.compile's CUDA-graph mode (`mode="reduce-overhead"`), or as a plain torch.cuda.CUDAGraph replay of the step.
COMPILE_MODES = (EAGER, "inductor", "reduce-overhead", "cuda-graph")
DEFAULT_COMPILE_MODES = (EAGER,)
# The modes a compiled or graph-replayed step is measured in; the other variants stay eager.
COMPILABLE_MODES = ("train", "infer", "train-channels-last", "infer-channels-last")


def base_mode(mode: str) -> str:
    """`train` or `infer`: what a mode or variant runs."""
    return mode.split("-")[0]


def compile_mode_rank(compile_mode: str) -> int:
    """Where `compile_mode` sorts in tables: its place in COMPILE_MODES (eager first), a mode not declared there
    after them all."""
    return COMPILE_MODES.index(compile_mode) if compile_mode in COMPILE_MODES else len(COMPILE_MODES)
