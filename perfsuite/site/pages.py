"""The site's pages as HTML text: pure functions, data in, strings out (no files, no plotting library).

Every page links `site.css` and `site.js` from the site's root (shipped with perfsuite, no network); the pages
read well without the script, which only adds the index's filters and sorting. Times show in the unit that reads
best (`12.3 ms`), ratios as `x1.042`, floors and bands as percentages.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from perfsuite.judge.conditions import changes_between
from perfsuite.render.comparison import display_table, legend_lines, short_label, summary_line
from perfsuite.render.conditions import change_text, conditions_text
from perfsuite.render.escape import html_text
from perfsuite.render.units import format_bytes, format_percent, format_ratio, format_seconds
from perfsuite.site.ab import AbCase, AbReading, AbSide
from perfsuite.site.bisect import BisectMark
from perfsuite.site.comparisons import ComparisonView
from perfsuite.site.history import CaseHistory, CaseSummary, HistorySession, Mark
from perfsuite.site.sources import SkippedFile
from perfsuite.store.archive import ArchivedVerdict, FileProblem

INDEX_PAGE = "index.html"
COMPARE_PAGE = "compare.html"
AB_PAGE = "ab.html"
CASES_FOLDER = "cases"
FILTERS = ("device", "machine", "model", "mode")
SPARKLINE_WIDTH, SPARKLINE_HEIGHT = 100, 20
ABSENT = "-"
# A case page's name stays far below the 255 bytes a file name may have, whatever the machine and model names.
MAX_PAGE_STEM_CHARS = 120
PAGE_HASH_CHARS = 12


@dataclass(frozen=True)
class SiteLinks:
    """What the navigation offers: the A/B page only when A/B files were given; how many problems were found."""

    has_ab: bool
    problem_count: int


def page(title: str, body: str, links: SiteLinks, generated_at: str, root: str = "") -> str:
    """A whole HTML page: `body` inside the site's navigation; `root` is the way back to the site's root from the
    page's folder (`../` for a case page)."""
    nav = [(f"{root}{INDEX_PAGE}", "Cases"), (f"{root}{COMPARE_PAGE}", "Comparison")]
    if links.has_ab:
        nav.append((f"{root}{AB_PAGE}", "A/B"))
    items = "".join(f'<a href="{html_text(href)}">{html_text(text)}</a>' for href, text in nav)
    if links.problem_count:
        items += (f'<a class="problems-link" href="{html_text(root)}{INDEX_PAGE}#problems">'
                  f"{links.problem_count} problem{'s' if links.problem_count != 1 else ''}</a>")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html_text(title)}</title>\n"
        f'<link rel="stylesheet" href="{html_text(root)}site.css">\n'
        "</head>\n<body>\n"
        f'<header><span class="brand">perfsuite history</span><nav>{items}</nav></header>\n'
        f"<main>\n{body}\n</main>\n"
        f"<footer>Built by <code>perfsuite site</code> at {html_text(generated_at)}.</footer>\n"
        f'<script src="{html_text(root)}site.js"></script>\n'
        "</body>\n</html>\n"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], attributes: str = "") -> str:
    """An HTML table; `headers` are text (escaped here), `rows` hold cells that are already HTML (`<td>...`)."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in headers)
    body = "\n".join(f"<tr>{''.join(cells)}</tr>" for cells in rows)
    return f"<table{attributes}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def cell(text: object, value: object = None, css: str = "") -> str:
    """A table cell of `text` (escaped); `value` is what the index sorts by (a number, or text)."""
    sort = "" if value is None else f' data-value="{html_text(value)}"'
    css_class = f' class="{html_text(css)}"' if css else ""
    return f"<td{sort}{css_class}>{html_text(text)}</td>"


# --- pieces -------------------------------------------------------------------------------------------------

def sparkline_svg(values_s: Sequence[float], width: int = SPARKLINE_WIDTH, height: int = SPARKLINE_HEIGHT) -> str:
    """A tiny inline SVG line of `values_s` (times in seconds, oldest first), the newest marked by a dot; higher
    is slower. Empty text for no values."""
    if not values_s:
        return ""
    low, high = min(values_s), max(values_s)
    span = high - low
    step = width / (len(values_s) - 1) if len(values_s) > 1 else 0.0

    def y(value: float) -> float:
        # 1 px of margin keeps the line's stroke inside the box.
        return height / 2 if span == 0 else 1 + (height - 2) * (high - value) / span

    points = " ".join(f"{i * step:.1f},{y(v):.1f}" for i, v in enumerate(values_s))
    last_x, last_y = (len(values_s) - 1) * step, y(values_s[-1])
    label = f"{len(values_s)} runs, {format_seconds(low)} to {format_seconds(high)}"
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="-2 -2 {width + 4} {height + 4}" role="img" '
        f'aria-label="{html_text(label)}"><polyline points="{points}" fill="none" stroke="currentColor" '
        f'stroke-width="1"/><circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="2"/></svg>'
    )


def floor_text(floor: float | None) -> str:
    """A floor (the smallest slowdown the runs can detect, a fraction) as `≥ 14%` (a space that does not break);
    `-` when unknown."""
    return ABSENT if floor is None else f"\u2265\u00a0{format_percent(floor)}"


def case_page_names(histories: Sequence[CaseHistory]) -> dict[tuple[str, str, str], str]:
    """The file name of each history's page, unique and safe in a URL: `<device>--<machine>--<benchmark id>.html`,
    ASCII; a name longer than MAX_PAGE_STEM_CHARS is cut and ends in a hash of the whole key instead."""
    names: dict[tuple[str, str, str], str] = {}
    taken: set[str] = set()
    for history in histories:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", "--".join(history.key)).strip("-.") or "case"
        if len(stem) > MAX_PAGE_STEM_CHARS:
            key = "\0".join(history.key).encode("utf-8", "surrogatepass")
            digest = hashlib.sha256(key).hexdigest()[:PAGE_HASH_CHARS]
            stem = f"{stem[:MAX_PAGE_STEM_CHARS - PAGE_HASH_CHARS - 1].rstrip('-.')}-{digest}"
        name, number = f"{stem}.html", 2
        while name in taken:
            name, number = f"{stem}-{number}.html", number + 1
        taken.add(name)
        names[history.key] = name
    return names


def problems_section(problems: Sequence[FileProblem], heading: str = "Files with problems", anchor: str = "") -> str:
    """The problems as a table (file, what is wrong, what to do), under the id `anchor` when given; empty text for
    none."""
    if not problems:
        return ""
    rows = [[cell(p.path), cell(p.problem), cell(p.remedy)] for p in problems]
    anchor_id = f' id="{html_text(anchor)}"' if anchor else ""
    return (
        f'<section{anchor_id} class="problems">\n<h2>{html_text(heading)} ({len(problems)})</h2>\n'
        "<p>These files, or entries of them, could not be used; the pages show everything else.</p>\n"
        + table(("file", "what is wrong", "what to do"), rows) + "\n</section>"
    )


# --- the index ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IndexRow:
    """One case on the index: its history, its summary and the link to its page."""

    history: CaseHistory
    summary: CaseSummary
    href: str


INDEX_COLUMNS = (
    ("device", "text"), ("machine", "text"), ("model", "text"), ("dtype", "text"), ("batch", "number"),
    ("mode", "text"), ("compile", "text"), ("profile", "text"), ("last", "number"), ("trend", "number"),
    ("floor", "number"), ("verdict", "text"), ("runs", "number"), ("history", "none"),
)


def index_row(row: IndexRow) -> str:
    """The `<tr>` of one case: the filter values as data attributes, the case's fields, the last median, the
    trend, the floor, the last verdict, the run count and the sparkline."""
    history, summary, case = row.history, row.summary, row.history.case
    verdict = summary.last_verdict
    cells = [
        cell(history.device), cell(history.machine),
        f'<td><a href="{html_text(row.href)}">{html_text(case.model)}</a></td>',
        cell(case.dtype), cell(case.batch_size, case.batch_size), cell(case.mode), cell(case.compile),
        cell(case.profile),
        cell(format_seconds(summary.last_median_s), f"{summary.last_median_s:.6g}"),
        cell(format_ratio(summary.trend), "" if summary.trend is None else f"{summary.trend:.6g}"),
        cell(floor_text(summary.floor), "" if summary.floor is None else f"{summary.floor:.6g}"),
        cell(verdict or ABSENT, verdict or "", f"verdict verdict-{verdict}" if verdict else ""),
        cell(summary.run_count, summary.run_count),
        f'<td><a href="{html_text(row.href)}" title="every run of this case">'
        f"{sparkline_svg(summary.sparkline_s)}</a></td>",
    ]
    filters = " ".join(f'data-{name}="{html_text(value)}"' for name, value in zip(
        FILTERS, (history.device, history.machine, case.model, case.mode), strict=True))
    row_id = html_text(f"{history.case.benchmark_id}--{history.machine}")
    return f'<tr {filters} id="{row_id}">{"".join(cells)}</tr>'


def filter_controls(rows: Sequence[IndexRow]) -> str:
    """One select per filter (device, machine, model, mode) with the values the rows hold."""
    values: dict[str, list[str]] = {name: [] for name in FILTERS}
    for row in rows:
        for name, value in zip(FILTERS, (row.history.device, row.history.machine, row.history.case.model,
                                         row.history.case.mode), strict=True):
            if value not in values[name]:
                values[name].append(value)
    selects = []
    for name in FILTERS:
        options = "".join(f'<option value="{html_text(v)}">{html_text(v)}</option>' for v in sorted(values[name]))
        selects.append(
            f'<label>{html_text(name)} <select name="{html_text(name)}" data-filter="{html_text(name)}">'
            f'<option value="">all</option>{options}</select></label>'
        )
    return (
        f'<form class="filters" id="filters" aria-label="filter the cases">{"".join(selects)}'
        f'<span id="shown" aria-live="polite">{len(rows)} of {len(rows)} cases</span></form>'
    )


def index_page(
    rows: Sequence[IndexRow], problems: Sequence[FileProblem], sources: Sequence[tuple[str, str]],
    skipped: Sequence[SkippedFile], links: SiteLinks, generated_at: str,
) -> str:
    """The index: one row per (device, machine, case) with filters and sortable columns, then the files with
    problems, then the files read (`sources`: path and what it held) and the files not read."""
    header = "".join(
        f'<th data-type="{kind}"><button type="button">{html_text(name)}</button></th>' if kind != "none"
        else f"<th>{html_text(name)}</th>"
        for name, kind in INDEX_COLUMNS
    )
    body_rows = "\n".join(index_row(r) for r in rows)
    machines = len({(r.history.device, r.history.machine) for r in rows})
    intro = (
        f"<h1>Benchmark histories</h1>\n<p>{len(rows)} cases on {machines} device/machine pair"
        f"{'s' if machines != 1 else ''}. <em>last</em>: the newest session's median step time; <em>trend</em>: "
        "that median over the median of up to 20 earlier runs of the same torch and model config; <em>floor</em> "
        "and <em>verdict</em>: what the gate said of the newest session (where archived). A case on two machines is "
        "two rows.</p>"
    )
    cases_table = (
        f'<table id="cases" class="cases sortable">\n<thead><tr>{header}</tr></thead>\n'
        f"<tbody>\n{body_rows}\n</tbody>\n</table>"
        if rows else "<p>No case histories were found in the files given.</p>"
    )
    read = table(("file", "what it held"), ([cell(path), cell(what)] for path, what in sources)) if sources else ""
    not_read = table(("file", "why it was not read"), ([cell(s.path), cell(s.reason)] for s in skipped))
    source_section = (
        '<section id="sources">\n<h2>Files read</h2>\n' + (read or "<p>None.</p>")
        + ("\n<h3>Files not read</h3>\n" + not_read if skipped else "") + "\n</section>"
    )
    body = "\n".join(part for part in (
        intro, filter_controls(rows) if rows else "", cases_table, problems_section(problems, anchor="problems"),
        source_section,
    ) if part)
    return page("perfsuite: benchmark histories", body, links, generated_at)


# --- a case -------------------------------------------------------------------------------------------------

def case_facts(history: CaseHistory) -> str:
    """The case's identity, its machine and what changed over its history, as a definition list."""
    case, sessions = history.case, history.sessions
    torch_versions = list(dict.fromkeys(s.torch_version for s in sessions))
    digests = list(dict.fromkeys(s.config_digest for s in sessions))
    figures = list(dict.fromkeys(s.figure for s in sessions))
    identity = ", ".join(f"{k}: {v}" for k, v in sorted(history.identity.items())) or ABSENT
    facts = (
        ("device", history.device), ("machine", f"{history.machine} ({identity})"), ("model", case.model),
        ("dtype", case.dtype), ("batch size", case.batch_size), ("mode", case.mode), ("compile", case.compile),
        ("profile", case.profile), ("memory figure", history.memory_figure),
        ("torch versions", " -> ".join(torch_versions)), ("config digests", " -> ".join(digests)),
        ("figures", " -> ".join(figures)),
        ("runs", f"{len(history.runs)} in {len(sessions)} sessions, {sessions[0].recorded_at} to "
                 f"{sessions[-1].recorded_at}"),
    )
    return '<dl class="facts">' + "".join(f"<dt>{html_text(k)}</dt><dd>{html_text(v)}</dd>" for k, v in facts) + "</dl>"


def verdict_text(verdict: ArchivedVerdict) -> str:
    """A verdict in a few words: `regressed x1.230 [1.180, 1.290], floor ≥ 14%, band 10%`."""
    bounds = "" if verdict.ci_low is None or verdict.ci_high is None else (
        f" [{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]")
    return (f"{verdict.status} {format_ratio(verdict.ratio)}{bounds}, floor {floor_text(verdict.floor)}, "
            f"band {format_percent(verdict.tolerance)}")


def sessions_table(history: CaseHistory) -> str:
    """Every session, newest first: when, commit, torch, kind, the figure its rounds measured, its runs' medians
    (every run), their median, the rounds timed, samples/s at that median, memory, the machine's conditions around
    its runs, and the verdict judged then with
    its explanation by the ops against the history's op summary recorded before (where the gate gave one)."""
    rows = []
    for session in reversed(history.sessions):
        verdict = session.verdict
        run_medians = ", ".join(format_seconds(r.median_s) for r in session.runs)
        rows.append([
            cell(session.recorded_at), cell(session.commit or ABSENT), cell(session.torch_version),
            cell(session.kind), cell(session.figure, css=f"figure figure-{session.figure}"), cell(run_medians),
            cell(format_seconds(session.median_s)),
            cell(sum(r.rounds for r in session.runs)), cell(f"{session.samples_per_s:.4g}"),
            cell(format_bytes(session.memory_bytes)), cell(session_conditions_text(session)),
            cell(ABSENT, css="") if verdict is None else (
                f'<td class="verdict verdict-{html_text(verdict.status)}">{html_text(verdict_text(verdict))}'
                f"{_explanation_list(verdict.explanation)}</td>"),
        ])
    return table(("recorded at", "commit", "torch", "session", "figure", "run medians", "median", "rounds", "samples/s",
                  "memory", "conditions", "verdict"), rows, ' class="runs"')


def session_conditions_text(session: HistorySession) -> str:
    """A session's conditions in words: its first reading, and each speed fact that moved during it; "not recorded"
    for runs recorded before perfsuite read them."""
    readings = session.conditions
    if not readings:
        return "not recorded"
    moved = changes_between(readings[:1], readings)
    return conditions_text(readings[0]) + "".join(f"; then {change_text(change, 'it began', 'it ran')}"
                                                  for change in moved)


def marks_list(found: Sequence[Mark], history: CaseHistory) -> str:
    """The marks of a history as a list: when, at which commit, what."""
    if not found:
        return ("<p>No torch version, config, figure or conditions change, rebaseline, regression or improvement in "
                "this history.</p>")
    items = []
    for mark in found:
        session = history.sessions[mark.index]
        items.append(f'<li class="mark mark-{html_text(mark.kind)}">{html_text(session.recorded_at)} '
                     f"({html_text(session.commit or 'no commit')}): {html_text(mark.label)}</li>")
    return f'<ul class="marks">{"".join(items)}</ul>'


def case_page(
    history: CaseHistory, summary: CaseSummary, found_marks: Sequence[Mark], plot_svg: str | None,
    plot_note: str | None, links: SiteLinks, generated_at: str, bisects: Sequence[BisectMark] = (),
) -> str:
    """The page of one case on one machine: its facts, the summary figures, the plot (or `plot_note` where none
    could be drawn), the marks, what the bisects that followed it found, and every run."""
    title = f"{history.case.benchmark_id} on {history.machine}"
    headline = (
        f"last {format_seconds(summary.last_median_s)}, "
        f"trend {format_ratio(summary.trend)}, verdict {summary.last_verdict or ABSENT}, "
        f"floor {floor_text(summary.floor)}, {summary.run_count} runs"
    )
    figure = (
        f'<figure class="plot">{plot_svg}<figcaption>Each point is a run\'s median step time, its bar the IQR of '
        "the run's stored rounds; the line joins the sessions' medians. Dashed lines: torch version, config or "
        "figure changes (step: steps back to back and one drain a round; latency: one step and a drain) and "
        "rebaselines; triangles: sessions judged regressed (up) or improved (down), with the ratio."
        "</figcaption></figure>"
        if plot_svg else f'<p class="note">{html_text(plot_note or "No plot.")}</p>'
    )
    body = "\n".join((
        f'<p><a href="../{INDEX_PAGE}">All cases</a></p>', f"<h1>{html_text(title)}</h1>",
        f'<p class="headline">{html_text(headline)}</p>', case_facts(history), figure,
        "<h2>Marks</h2>", marks_list(found_marks, history), bisect_section(bisects),
        "<h2>Sessions, newest first</h2>", sessions_table(history),
    ))
    return page(f"perfsuite: {title}", body, links, generated_at, root="../")


def bisect_section(bisects: Sequence[BisectMark]) -> str:
    """What each bisect of the case found (first bad commit or release, and its sentences); empty text for none."""
    if not bisects:
        return ""
    items = []
    for mark in bisects:
        named = ", ".join(mark.named) or "no commit named"
        sentences = "".join(f"<li>{html_text(line)}</li>" for line in mark.sentences)
        items.append(f'<li class="bisect"><strong>bisect {html_text(mark.started_at or "")}: '
                     f"{html_text(named)}</strong> <small>({html_text(str(mark.path.name))})</small>"
                     f"<ul>{sentences}</ul></li>")
    return "<h2>Bisect</h2>\n<ul>" + "".join(items) + "</ul>"


# --- the comparison -----------------------------------------------------------------------------------------

def comparison_section(view: ComparisonView) -> str:
    """One compared pair: what each side is, the geometric mean, the legend and the table."""
    comparison = view.comparison
    assert comparison is not None  # only compared pairs have a section
    shown = display_table(comparison)
    rows = [[cell(v) for v in record] for record in shown.itertuples(index=False)]
    legend = "".join(f"<li>{html_text(line)}</li>" for line in legend_lines(comparison))
    return (
        f"<section class=\"comparison\">\n<h2>A: {html_text(short_label(view.a))} &mdash; "
        f"B: {html_text(short_label(view.b))}"
        f"</h2>\n<p>A: {html_text(view.a.description)}<br>B: {html_text(view.b.description)}</p>\n"
        f"<p><strong>{html_text(summary_line(comparison))}</strong></p>\n<ul class=\"legend\">{legend}</ul>\n"
        + table(list(shown.columns), rows, ' class="compare"') + "\n</section>"
    )


def comparison_page(
    views: Sequence[ComparisonView], problems: Sequence[FileProblem], links: SiteLinks, generated_at: str
) -> str:
    """Each machine that is not CUDA next to the CUDA baselines and the published figures, as `perfsuite compare`
    joins them; the pairs that could not be compared, each with the reason."""
    compared = [v for v in views if v.comparison is not None]
    not_compared = [v for v in views if v.comparison is None]
    intro = (
        "<h1>Comparison</h1>\n<p>Each machine that is not CUDA (MPS first) against the CUDA baselines and the "
        "published figures, joined case by case as <code>perfsuite compare</code> joins them (from the baseline "
        "files' windows). B/A is B's time over A's time, the article's CUDA time / MPS time: 0.71 means A runs at "
        "71% of B's speed. Published figures are claims copied from the article, not measurements.</p>"
    )
    sections = [comparison_section(v) for v in compared] or ["<p>No pair of result sets could be compared.</p>"]
    if not_compared:
        items = "".join(
            f"<li><strong>A: {html_text(short_label(v.a))} ({html_text(v.a.name)}), B: {html_text(short_label(v.b))} "
            f"({html_text(v.b.name)})</strong><pre>{html_text(v.why_not)}</pre></li>"
            for v in not_compared
        )
        sections.append(f'<section id="not-compared">\n<h2>Not compared</h2>\n<ul>{items}</ul>\n</section>')
    if not views:
        sections = ["<p>No machine that is not CUDA, or no CUDA side, was found in the files given: nothing to "
                    "compare. Pass an MPS or CPU baseline folder and baselines/ (CUDA and the published figures).</p>"]
    body = "\n".join((intro, *sections, problems_section(problems, "Files of published figures with problems")))
    return page("perfsuite: comparison", body, links, generated_at)


# --- A/B ------------------------------------------------------------------------------------------------------

def _side_text(name: str, side: AbSide) -> str:
    facts = [f"revision {side.revision}" if side.revision else "", f"Python {side.python}" if side.python else "",
             f"torch {side.torch_version}" if side.torch_version else ""]
    return f"{name}: {side.label or 'unnamed'}" + "".join(f", {f}" for f in facts if f)


def _case_text(entry: AbCase) -> str:
    fields: Mapping[str, str | int] = entry.case
    if entry.benchmark_id:
        return entry.benchmark_id
    return " ".join(str(fields[k]) for k in ("device", "dtype", "model", "batch_size", "mode") if k in fields) or "?"


def _explanation_list(lines: Sequence[str]) -> str:
    """A case's explanation by the ops, a list item per line (nothing where it has none)."""
    if not lines:
        return ""
    return '<ul class="explanation">' + "".join(f"<li>{html_text(line)}</li>" for line in lines) + "</ul>"


def ab_section(reading: AbReading, label: str) -> str:
    """One A/B file: both sides, a row per good case (status, medians, ratio with its bounds, floor, band, the
    largest output difference, the message and the explanation by the ops), then its bad entries."""
    summary = reading.summary
    if summary is None:
        return (f"<section class=\"ab\">\n<h2>{html_text(label)}</h2>\n"
                + problems_section(reading.problems, "Not read") + "\n</section>")
    rows = []
    for entry in summary.cases:
        bounds = ("" if entry.ci_low is None or entry.ci_high is None
                  else f" [{entry.ci_low:.3f}, {entry.ci_high:.3f}]")
        difference = entry.largest_output_difference
        rows.append([
            cell(_case_text(entry)), cell(entry.status or ABSENT, css=f"verdict verdict-{entry.status}"),
            cell(format_seconds(entry.base_median_s)), cell(format_seconds(entry.head_median_s)),
            cell(format_ratio(entry.ratio) + bounds), cell(floor_text(entry.floor)),
            cell(format_percent(entry.tolerance)), cell(ABSENT if difference is None else f"{difference:.3g}"),
            f"<td>{html_text(entry.message or '')}{_explanation_list(entry.explanation)}</td>",
        ])
    counts = ", ".join(f"{sum(1 for c in summary.cases if c.status == s)} {s}"
                       for s in dict.fromkeys(c.status or "no status" for c in summary.cases))
    return (
        f"<section class=\"ab\">\n<h2>{html_text(label)}</h2>\n"
        f"<p>{html_text(_side_text('base', summary.base))}<br>{html_text(_side_text('head', summary.head))}<br>"
        f"started {html_text(summary.started_at or 'at an unstated time')}; {len(summary.cases)} cases"
        f"{': ' + html_text(counts) if counts else ''}</p>\n"
        + table(("case", "status", "base median", "head median", "head/base", "floor", "band",
                 "largest output difference", "message"), rows, ' class="ab-cases"')
        + "\n" + problems_section(reading.problems, "Entries left out") + "\n</section>"
    )


def ab_page(readings: Sequence[tuple[str, AbReading]], links: SiteLinks, generated_at: str) -> str:
    """The A/B results given with --ab, one section per file (`readings`: the file's name and what was read)."""
    intro = (
        "<h1>A/B results</h1>\n<p>Base and head measured case by case; head/base is the head's median over the "
        "base's, with its confidence bounds; floor is the smallest slowdown the runs could detect.</p>"
    )
    body = "\n".join((intro, *(ab_section(reading, name) for name, reading in readings)))
    return page("perfsuite: A/B results", body, links, generated_at)

