"""Build the site: read the sources, make the pages, write them into a self-contained folder.

The folder holds `index.html`, `compare.html`, `ab.html` (with A/B files), `cases/*.html`, `site.css` and
`site.js`, and nothing that needs a network or a server: open index.html from disk, upload the folder as a CI
artifact, or push it to a Pages branch. It is built beside the output folder and swapped in whole, so a reader
never sees half a site; an existing folder is replaced only when perfsuite built it (it holds `MARKER`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from perfsuite.errors import UsageError
from perfsuite.render.comparison import PlottingUnavailable
from perfsuite.site import pages
from perfsuite.site.ab import read_ab_file
from perfsuite.site.bisect import BisectMark, read_bisect_file
from perfsuite.site.comparisons import compare_pairs, measured_sets, plan_pairs, published_sets
from perfsuite.site.history import CaseHistory, marks, merge_histories, summarize
from perfsuite.site.plots import HistoryPlotter
from perfsuite.site.sources import Sources, read_sources
from perfsuite.store.archive import FileProblem

MARKER = ".perfsuite-site"
STATIC_FILES = ("site.css", "site.js")
SPARKLINE_RUNS = 60


@dataclass(frozen=True)
class SiteReport:
    """What was built: the folder, the number of case pages, every problem found (also named on the pages), the
    note on plots that could not be drawn (None when they were), and the index page's size in bytes."""

    output_dir: Path
    cases: int
    problems: tuple[FileProblem, ...]
    plot_note: str | None
    index_bytes: int


def source_lines(sources: Sources) -> list[tuple[str, str]]:
    """What each file or archive folder read held, for the index: a line per baseline file and published table,
    one per archive machine folder (it may hold thousands of files)."""
    lines = [
        (str(s.path), f"baseline file: {len(s.baseline.entries)} case{'s' if len(s.baseline.entries) != 1 else ''} of "
                      f"{s.machine}")
        for s in sources.baselines
    ]
    lines += [(str(path), "published figures (for the comparison)") for path in sources.references]
    folders: dict[Path, int] = {}
    for archived in sources.archived:
        folders[archived.path.parent] = folders.get(archived.path.parent, 0) + 1
    lines += [(f"{folder}/", f"archive: {count} session file{'s' if count != 1 else ''}")
              for folder, count in sorted(folders.items())]
    return lines


def build_site(
    inputs: Sequence[Path], output_dir: Path, ab_files: Sequence[Path] = (), now: datetime | None = None,
    bisect_files: Sequence[Path] = (),
) -> SiteReport:
    """Build the site of `inputs` (baseline folders and files, archives) and the A/B files into `output_dir`; the
    bisect records' findings are marked on the pages of the cases they followed.

    Raises UsageError when `output_dir` exists and is not a site perfsuite built; OSError when it cannot be
    written. Bad input files never raise: they are named on the pages and in the report.
    """
    output_dir = Path(output_dir)
    check_output_dir(output_dir)
    generated_at = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    sources = read_sources(inputs)
    histories = merge_histories(sources.archived, sources.baselines)
    problems = list(sources.problems)
    measured, measured_problems = measured_sets(sources.baselines)
    published, published_problems = published_sets(sources.references)
    compare_problems = measured_problems + published_problems
    problems += compare_problems
    views = compare_pairs(plan_pairs(measured, published))
    ab_readings = [(str(path), read_ab_file(path)) for path in ab_files]
    for _, reading in ab_readings:
        problems += reading.problems
    bisect_readings = [read_bisect_file(path) for path in bisect_files]
    for bisect_reading in bisect_readings:
        problems += bisect_reading.problems
    bisect_marks = [reading.mark for reading in bisect_readings if reading.mark is not None]
    links = pages.SiteLinks(has_ab=bool(ab_files), problem_count=len(problems))
    names = pages.case_page_names(histories)

    staging = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}.", suffix=".new"))
    try:
        plot_note = _write_case_pages(staging, histories, names, links, generated_at, bisect_marks)
        rows = [
            pages.IndexRow(h, summarize(h, SPARKLINE_RUNS), f"{pages.CASES_FOLDER}/{names[h.key]}") for h in histories
        ]
        index = pages.index_page(rows, problems, source_lines(sources), sources.skipped, links, generated_at)
        _write(staging / pages.INDEX_PAGE, index)
        _write(staging / pages.COMPARE_PAGE, pages.comparison_page(views, compare_problems, links, generated_at))
        if ab_files:
            _write(staging / pages.AB_PAGE, pages.ab_page(ab_readings, links, generated_at))
        for name in STATIC_FILES:
            _write(staging / name, resources.files("perfsuite.site").joinpath("static", name).read_text("utf-8"))
        _write(staging / MARKER, "Built by `perfsuite site`; the next build replaces this folder.\n")
        os.chmod(staging, 0o755)
        _swap_in(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return SiteReport(output_dir, len(histories), tuple(problems), plot_note, len(index.encode("utf-8")))


def _write_case_pages(
    folder: Path, histories: Sequence[CaseHistory], names: dict[tuple[str, str, str], str], links: pages.SiteLinks,
    generated_at: str, bisect_marks: Sequence[BisectMark] = (),
) -> str | None:
    """Write a page per history; returns why there are no plots (matplotlib missing), else None."""
    (folder / pages.CASES_FOLDER).mkdir()
    try:
        plotter: HistoryPlotter | None = HistoryPlotter()
        plot_note = None
    except PlottingUnavailable as missing:
        plotter, plot_note = None, str(missing)
    for history in histories:
        found = marks(history)
        plot_svg = None if plotter is None else plotter.svg(history, found)
        text = pages.case_page(history, summarize(history, SPARKLINE_RUNS), found, plot_svg, plot_note, links,
                               generated_at, [m for m in bisect_marks if history.case.benchmark_id in m.benchmark_ids])
        _write(folder / pages.CASES_FOLDER / names[history.key], text)
    return plot_note


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def check_output_dir(output_dir: Path) -> None:
    """Raise UsageError unless `output_dir` is absent, empty, or a site perfsuite built (it holds MARKER)."""
    if output_dir.is_symlink() or (output_dir.exists() and not output_dir.is_dir()):
        raise UsageError(f"-o {output_dir}: it exists and is not a folder; name a new folder for the site")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not (output_dir / MARKER).is_file():
        raise UsageError(
            f"-o {output_dir}: the folder holds files that perfsuite site did not write (no {MARKER} in it), and "
            "building would replace them; name a new or empty folder"
        )
    output_dir.parent.mkdir(parents=True, exist_ok=True)


def _swap_in(staging: Path, output_dir: Path) -> None:
    """Put the built folder in place of `output_dir`: the old site is renamed aside first and removed after."""
    old = None
    if output_dir.exists():
        old = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}.", suffix=".old"))
        os.rmdir(old)
        os.rename(output_dir, old)
    try:
        os.rename(staging, output_dir)
    except BaseException:
        if old is not None:
            with contextlib.suppress(OSError):
                os.rename(old, output_dir)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

