"""Progress while a session runs: the estimate of what is left and the lines that show it. Pure functions."""

from __future__ import annotations

from perfsuite.records import AbBlockProgress, AbProgress, ProcessProgress
from perfsuite.render.escape import terminal_text


def remaining_s(elapsed_s: float, done: int, total: int) -> float | None:
    """An estimate of the seconds left when `done` of `total` steps took `elapsed_s`; None before the first."""
    return None if done == 0 else elapsed_s / done * (total - done)


def format_duration(seconds: float) -> str:
    """41 s, 3 min 25 s, 1 h 02 min."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """`perfsuite: 3/18 benchmarks in 41 s, about 3 min 25 s left`: the estimate is the mean time per benchmark so far
    times the benchmarks left."""
    left = remaining_s(elapsed_s, done, total)
    estimate = "" if left is None or done == total else f", about {format_duration(left)} left"
    return f"perfsuite: {done}/{total} benchmarks in {format_duration(elapsed_s)}{estimate}"


def process_progress_line(progress: ProcessProgress) -> str:
    """`perfsuite: process 2/3 measured cpu-fp32-resnet18-bs4-infer-smoke (5/12, about 40 s left)`."""
    left = remaining_s(progress.elapsed_s, progress.done, progress.total)
    shown = "" if left is None else f", about {left:.0f} s left"
    return (
        f"perfsuite: process {progress.pass_index}/{progress.passes} measured {terminal_text(progress.benchmark_id)} "
        f"({progress.done}/{progress.total}{shown})"
    )


def ab_progress_line(progress: AbProgress) -> str:
    """`perfsuite A/B: cpu-fp32-tiny-bs1-infer-smoke block 2: head/base 1.004 over 8 window pairs (decided) (41 s of
    300 s)`, a block that failed with its message, or a case whose ops could not be profiled."""
    key = terminal_text(progress.benchmark_id)
    if not isinstance(progress, AbBlockProgress):
        return f"perfsuite A/B: {key}: could not profile its ops: {progress.message}"
    if progress.failure is not None:
        return f"perfsuite A/B: {key} block {progress.block}: {progress.failure}"
    return (
        f"perfsuite A/B: {key} block {progress.block}: head/base {progress.head_over_base:.3f} "
        f"over {progress.window_pairs} window pairs{' (decided)' if progress.decided else ''} "
        f"({progress.elapsed_s:.0f} s of {progress.budget_s:.0f} s)"
    )
