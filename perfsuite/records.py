"""The result of one benchmark case, as the runner hands it to the gate, and how its units read.

A `CaseResult` is data only: every timed round in seconds, the throughput, one memory figure and the
facts that decide whether two results may be compared at all (device, profile, config digest, torch
version). Its statistics (median, IQR) are computed from the rounds, never stored separately, so they
cannot disagree with them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MEMORY_FIGURES = ("cuda_max_allocated_bytes", "mps_driver_allocated_bytes", "cpu_peak_rss_bytes")


def check_round_times(round_times_s: Sequence[float] | np.ndarray, where: str) -> None:
    """Raise ValueError unless `round_times_s` is non-empty and every time is a finite number of seconds > 0.

    `where` names the benchmark (and the side: current, baseline) for the message.
    """
    try:
        values = np.asarray(round_times_s, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: round times must be numbers of seconds, got {round_times_s!r:.80}") from None
    if values.size == 0:
        raise ValueError(f"{where}: no timed rounds; a benchmark needs at least one round to be judged")
    bad = values[~(np.isfinite(values) & (values > 0))]
    if bad.size:
        raise ValueError(
            f"{where}: round times must be finite and > 0 seconds, got {bad[:3].tolist()!r}"
            f"{' and more' if bad.size > 3 else ''}; a zero or NaN time means the timer or the device "
            "synchronisation failed, so this result cannot be judged: re-run the benchmark"
        )


@dataclass(frozen=True)
class CaseResult:
    """One benchmark case measured in this session.

    `round_times_s` holds every timed round in seconds (device work finished inside each round);
    `reference_round_times_s` optionally holds the rounds of a small fixed reference workload timed in
    the same session, used to normalise machine drift between sessions.
    """

    benchmark_id: str
    device: str
    dtype: str
    model: str
    batch_size: int
    mode: str
    profile: str
    round_times_s: tuple[float, ...]
    samples_per_s: float
    memory_figure: str
    memory_bytes: int | None
    flops_per_step: int | None
    tflops_per_s: float | None
    config_digest: str
    torch_version: str
    reference_round_times_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        # Tuples keep the dataclass hashable and immutable even when a list was passed in.
        object.__setattr__(self, "round_times_s", tuple(float(t) for t in self.round_times_s))
        object.__setattr__(self, "reference_round_times_s", tuple(float(t) for t in self.reference_round_times_s))
        check_round_times(self.round_times_s, self.benchmark_id)
        if self.reference_round_times_s:
            check_round_times(self.reference_round_times_s, f"{self.benchmark_id} (reference workload)")

    @property
    def rounds(self) -> int:
        """How many rounds were timed."""
        return len(self.round_times_s)

    @property
    def median_s(self) -> float:
        """Median round time in seconds."""
        return float(np.median(self.round_times_s))

    @property
    def iqr_s(self) -> float:
        """Interquartile range of the round times in seconds (numpy's linear interpolation)."""
        q1, q3 = np.percentile(self.round_times_s, [25, 75])
        return float(q3 - q1)

    @property
    def reference_median_s(self) -> float | None:
        """Median round time of the reference workload in seconds, or None when it was not timed."""
        if not self.reference_round_times_s:
            return None
        return float(np.median(self.reference_round_times_s))


def format_seconds(seconds: float | None) -> str:
    """A duration for people: `850 µs`, `12.3 ms`, `1.20 s` (three significant figures); `-` for None."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{_three_figures(seconds / scale)} {unit}"
    return f"{_three_figures(seconds / 1e-9)} ns"


def format_bytes(size_bytes: int | None) -> str:
    """A memory size for people in binary units: `512 MiB`, `1.50 GiB`; `-` for None."""
    if size_bytes is None:
        return "-"
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{_three_figures(value)} {unit}"
        value /= 1024
    return f"{_three_figures(value)} TiB"


def _three_figures(value: float) -> str:
    # `.3g` would write 1500 as 1.5e+03; whole numbers from 100 up read better without an exponent.
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
