"""The axes of the matrix: every value a case's device, dtype, mode and profile may take, declared once."""

from __future__ import annotations

DEVICES = ("cpu", "cuda", "mps")
DTYPES = ("fp32", "bf16", "fp16")
DEFAULT_DTYPES = ("fp32", "bf16")
PROFILES = ("smoke", "standard", "full")
MODES = ("train", "infer")
# Variants of the two modes, selected with --perf-mode; each needs something of the workload (Workload.modes).
VARIANT_MODES = ("train-checkpoint", "train-channels-last", "infer-channels-last", "train-ddp")
ALL_MODES = MODES + VARIANT_MODES


def base_mode(mode: str) -> str:
    """`train` or `infer`: what a mode or variant runs."""
    return mode.split("-")[0]
