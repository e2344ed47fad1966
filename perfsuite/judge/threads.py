"""Whether a measuring process gets the CPU threads it asks for: pure, from the thread count and the machine's
figures, so that a step slowed by threads waiting for cores is announced instead of read as the model's speed."""

from __future__ import annotations

import math


def cores_free(cores: int, load_average: float) -> int:
    """The whole cores a measuring process can count on: the cores this process may run on less the 1-minute load
    average of the work already there (at least one)."""
    return max(1, math.floor(cores - load_average))


def thread_warning(threads: int, cores: int, load_average: float) -> str | None:
    """A warning when `threads` torch CPU threads exceed the cores free here (`cores`, the load average
    `load_average`), with the figures and the option that fixes it; None when they fit."""
    free = cores_free(cores, load_average)
    if threads <= free:
        return None
    return (
        f"perfsuite: warning: each measuring process runs {threads} torch CPU threads, but this machine gives it about "
        f"{free} core(s) ({cores} core(s), load average {load_average:.2f}); threads waiting for a core can make a "
        f"step many times slower and noisier: pass --perf-threads {free} (or threads = {free} in [tool.perfsuite])"
    )
