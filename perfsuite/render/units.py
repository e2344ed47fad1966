"""Units for people: durations, memory sizes and ratios at three significant figures. Inside the code every
time is in seconds and every size in bytes; only these functions turn them into text."""

from __future__ import annotations

import math


def format_seconds(seconds: float | None) -> str:
    """A duration for people: `850 µs`, `12.3 ms`, `1.20 s` (three significant figures); `-` for None."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{three_figures(seconds / scale)} {unit}"
    return f"{three_figures(seconds / 1e-9)} ns"


def format_bytes(size_bytes: int | None) -> str:
    """A memory size for people in binary units: `512 MiB`, `1.50 GiB`; `-` for None."""
    if size_bytes is None:
        return "-"
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{three_figures(value)} {unit}"
        value /= 1024
    return f"{three_figures(value)} TiB"


def format_ratio(ratio: float | None) -> str:
    """A ratio for people: `x1.23`, `x0.00412` (three significant figures, never rounded to zero); `-` for None."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"x{ratio:.3f}" if abs(ratio) >= 0.01 else f"x{ratio:.3g}"


def format_time_ratio(ratio: float | None) -> str:
    """A ratio of two times for people: two decimals as the source article prints them (`0.71`, `1.40`), two
    significant figures below 0.1 so that a small ratio never reads 0.00 (`0.031`, `0.0031`, `3.1e-05`); `-`
    for None."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.2f}" if abs(ratio) >= 0.1 else f"{ratio:.2g}"


def format_percent(fraction: float | None) -> str:
    """A fraction as a percentage for people: whole percents from 1% up (`23%`, `140%`), two significant figures
    below (`0.31%`), so that a small share never reads 0%; `-` for None."""
    if fraction is None or not math.isfinite(fraction):
        return "-"
    percent = fraction * 100
    return f"{percent:.0f}%" if abs(percent) >= 1 else f"{percent:.2g}%"


def three_figures(value: float) -> str:
    """`value` at three significant figures; whole numbers from 100 up without an exponent."""
    # `.3g` would write 1500 as 1.5e+03.
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
