"""A case's history as an SVG plot drawn with matplotlib (an optional extra: `pip install 'perfsuite[plot]'`).

The x axis is the sessions in time order, labelled with their date and commit; each run is a point at its median
step time with a bar over the IQR of its stored rounds, and a line joins the sessions' medians. Torch version,
config and figure changes and rebaselines are dashed vertical lines; regressions and improvements are triangles with
their ratio. A second panel shows the memory figure where runs measured one. The page's caption is the legend (a
legend redrawn on every plot costs a fifth of the drawing).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np

from perfsuite.render.comparison import PlottingUnavailable
from perfsuite.render.escape import plot_text
from perfsuite.site.history import CaseHistory, Mark, run_quartiles_s

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

INSTALL_HINT = "the history plots need matplotlib, which is not installed: pip install 'perfsuite[plot]'"
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
MAX_TICKS = 8
# Beyond this many labels the newest ones are written and the older marks drawn without text.
MAX_LABELS = 12
LINE_MARKS = {"torch": "#b35900", "config": "#7a4fb3", "figure": "#117a65", "rebaseline": "#555555",
              "conditions": "#a04000"}
VERDICT_MARKS = {"regressed": ("^", "#c0392b"), "improved": ("v", "#1e8449")}
RUN_COLOUR, SPREAD_COLOUR, SESSION_COLOUR = "#1f4e79", "#9cb8d3", "#1f4e79"


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit a typical time of `seconds` reads best in, and its scale: (`ms`, 1e-3) for 0.0123."""
    for unit, scale in TIME_UNITS:
        if seconds >= scale:
            return unit, scale
    return TIME_UNITS[-1]


def tick_indices(sessions: int, most: int = MAX_TICKS) -> list[int]:
    """Up to `most` evenly spaced session indices to label, the first and the last included."""
    if sessions <= most:
        return list(range(sessions))
    return sorted({int(round(i)) for i in np.linspace(0, sessions - 1, most)})


def run_positions(runs_per_session: Sequence[int]) -> np.ndarray:
    """Where each run stands on the x axis: the runs of session i spread evenly over i-0.3 .. i+0.3."""
    positions = [
        np.full(1, float(index)) if count == 1 else index + np.linspace(-0.3, 0.3, count)
        for index, count in enumerate(runs_per_session)
    ]
    return np.concatenate(positions) if positions else np.empty(0)


def segments(x: np.ndarray, y_low: np.ndarray, y_high: np.ndarray, half_width: float = 0.0
             ) -> tuple[np.ndarray, np.ndarray]:
    """Many short segments as one line broken by NaN: from (x - half_width, y_low) to (x + half_width, y_high) for
    each item. One path of n pieces draws in a fraction of the time of n markers or n collection items."""
    xs = np.column_stack((x - half_width, x + half_width, np.full(len(x), np.nan))).ravel()
    ys = np.column_stack((y_low, y_high, np.full(len(x), np.nan))).ravel()
    return xs, ys


def _svg_style() -> AbstractContextManager[None]:
    import matplotlib

    # Text as text (smaller, searchable); fixed ids and no date make one history draw the same SVG every time.
    return matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "perfsuite-site", "font.size": 8.0})


class HistoryPlotter:
    """Draws case histories as SVG on one reused matplotlib figure per layout (with and without a memory panel):
    making a figure's axes and ticks costs more than drawing a history on them, and a site has hundreds.

    Raises PlottingUnavailable on creation when matplotlib is not installed.
    """

    def __init__(self) -> None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PlottingUnavailable(INSTALL_HINT) from None
        self._layouts: dict[bool, _Layout] = {}

    def svg(self, history: CaseHistory, found_marks: Sequence[Mark]) -> str:
        """The history of one case as an `<svg>` element (no XML prolog), ready to inline in a page."""
        sessions = history.sessions
        runs = history.runs
        x = run_positions([len(s.runs) for s in sessions])
        medians_s = np.array([r.median_s for r in runs])
        unit, scale = time_unit(float(np.median(medians_s)))
        medians = medians_s / scale
        quartiles = run_quartiles_s(runs) / scale
        session_medians = np.array([s.median_s for s in sessions]) / scale
        memory = np.array([np.nan if r.memory_bytes is None else r.memory_bytes / 2**20 for r in runs])
        has_memory = bool(np.isfinite(memory).any())
        # A run's tick: at most two thirds of the space between the runs of a session (they spread over 0.6), and
        # short beside a session's width when there are few.
        tick = min(0.06, 0.2 / max(1, max(len(s.runs) for s in sessions) - 1))
        with _svg_style():
            layout = self._layouts.get(has_memory) or self._layouts.setdefault(has_memory, _Layout(has_memory))
            layout.clear_marks()
            layout.spread.set_data(*segments(x, quartiles[:, 0], quartiles[:, 1]))
            layout.runs.set_data(*segments(x, medians, medians, tick))
            layout.sessions.set_data(np.arange(len(sessions)), session_medians)
            layout.marks = _draw_marks(layout.axes, found_marks, session_medians)
            layout.axes.set_ylabel(f"step time ({unit})")
            layout.axes.set_ylim(0, 1.12 * float(max(quartiles.max(), medians.max())))
            if layout.memory is not None and layout.memory_axes is not None:
                layout.memory.set_data(*segments(x, memory, memory, tick))
                layout.memory_axes.set_ylim(0, 1.15 * float(np.nanmax(memory)))
            ticks = tick_indices(len(sessions))
            layout.bottom_axes.set_xticks(
                ticks, [_tick_label(sessions[i].recorded_at, sessions[i].commit) for i in ticks])
            layout.bottom_axes.set_xlim(-0.7, len(sessions) - 0.3)
            text = io.StringIO()
            layout.figure.savefig(text, format="svg", metadata={"Date": None})
        svg = text.getvalue()
        return svg[svg.index("<svg"):]


class _Layout:
    """One figure with the lines every history has: the runs' IQR bars, their medians, the sessions' medians, and
    in the memory layout a panel of the runs' memory figures."""

    def __init__(self, with_memory: bool) -> None:
        from matplotlib.backends.backend_svg import FigureCanvasSVG
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(9.0, 4.6 if with_memory else 3.3))
        FigureCanvasSVG(self.figure)
        if with_memory:
            self.axes, memory_axes = self.figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
            self.memory_axes: Axes | None = memory_axes
        else:
            self.axes, self.memory_axes = self.figure.subplots(), None
        (self.spread,) = self.axes.plot([], [], color=SPREAD_COLOUR, linewidth=1.4)
        (self.runs,) = self.axes.plot([], [], color=RUN_COLOUR, linewidth=2.2)
        (self.sessions,) = self.axes.plot([], [], color=SESSION_COLOUR, linewidth=0.8, alpha=0.6)
        self.axes.grid(axis="y", color="#e5e5e5", linewidth=0.6)
        self.memory: Line2D | None = None
        self.bottom_axes = self.axes
        if self.memory_axes is not None:
            (self.memory,) = self.memory_axes.plot([], [], color="#6c3483", linewidth=1.6)
            self.memory_axes.set_ylabel("MiB")
            self.memory_axes.grid(axis="y", color="#e5e5e5", linewidth=0.6)
            self.bottom_axes = self.memory_axes
        self.figure.subplots_adjust(left=0.08, right=0.96, top=0.9, bottom=0.16 if with_memory else 0.2,
                                    hspace=0.08)
        self.marks: list[Artist] = []

    def clear_marks(self) -> None:
        """Remove the previous history's marks."""
        for artist in self.marks:
            artist.remove()
        self.marks = []


def _tick_label(recorded_at: str, commit: str | None) -> str:
    return f"{plot_text(recorded_at[:10])}\n{plot_text(commit or '')}".rstrip()


def _draw_marks(axes: Axes, found_marks: Sequence[Mark], session_medians: np.ndarray) -> list[Artist]:
    """Draw `found_marks` on `axes`; returns the artists drawn."""
    drawn: list[Artist] = []
    # Marks of one session (a torch upgrade and its rebaseline) share one line and one label.
    lines: dict[int, list[Mark]] = {}
    for mark in found_marks:
        if mark.kind in LINE_MARKS:
            lines.setdefault(mark.index, []).append(mark)
    for count, (index, together) in enumerate(lines.items()):
        colour = LINE_MARKS[together[0].kind]
        drawn.append(axes.axvline(index - 0.5, color=colour, linestyle="--", linewidth=0.9))
        if count >= len(lines) - MAX_LABELS:
            drawn.append(axes.annotate(
                plot_text(", ".join(m.label for m in together)), (index - 0.5, 1.0), xycoords=("data", "axes fraction"),
                rotation=90, va="top", ha="right", fontsize=6.5, color=colour,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5}))
    verdicts = [m for m in found_marks if m.kind in VERDICT_MARKS]
    for kind, (symbol, colour) in VERDICT_MARKS.items():
        indices = [m.index for m in verdicts if m.kind == kind]
        if indices:
            drawn += axes.plot(indices, session_medians[indices], linestyle="none", marker=symbol, markersize=7,
                               color=colour)
    for mark in verdicts[-MAX_LABELS:]:
        drawn.append(axes.annotate(
            plot_text(mark.label.split(" ")[-1]), (mark.index, session_medians[mark.index]), textcoords="offset points",
            xytext=(0, 7 if mark.kind == "regressed" else -11), ha="center", fontsize=6.5,
            color=VERDICT_MARKS[mark.kind][1]))
    return drawn
