"""The site's pages as text: data in, HTML out. The values a reader relies on (times, trends, floors, verdicts,
the filters' options, every session, every bad file) are where they should be, escaped."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.records import Case, StoredRun
from perfsuite.site import pages
from perfsuite.site.ab import ab_summary_from_json
from perfsuite.site.history import CaseHistory, CaseSummary, HistorySession, Mark
from perfsuite.store.archive import ArchivedVerdict, FileProblem

LINKS = pages.SiteLinks(has_ab=False, problem_count=0)


def history(machine: str = "ci-m2-max", device: str = "mps", model: str = "resnet18", mode: str = "train",
            sessions: int = 2) -> CaseHistory:
    case = Case(device, "bf16", model, 64, mode, "standard")
    found = []
    for index in range(sessions):
        at = f"2026-12-0{index + 1}T10:00:00Z"
        runs = tuple(StoredRun(m, 40, (m * 0.9, m, m * 1.1), 3 * 2**30, at, f"c{index}") for m in (0.0123, 0.0125))
        verdict = ArchivedVerdict("regressed", 1.23, 1.18, 1.29, 0.14, 0.1) if index == sessions - 1 else None
        found.append(HistorySession(at, f"c{index}", "2.13.0", "cfg", "update", 64, runs, verdict, "f.json"))
    return CaseHistory(device, machine, case, "mps_driver_allocated_bytes", {"name": machine}, tuple(found))


SUMMARY = CaseSummary(last_median_s=0.0124, trend=1.0417, last_verdict="regressed", floor=0.14, run_count=4,
                      sparkline_s=(0.010, 0.012, 0.011, 0.0124))


def rows_of(html: str) -> list[str]:
    return re.findall(r"<tr data-device=.*?</tr>", html)


def test_a_sparkline_has_a_point_per_run_the_slowest_on_top_and_the_newest_marked():
    svg = pages.sparkline_svg([0.010, 0.030, 0.020], width=100, height=20)
    points = re.search(r'points="([^"]+)"', svg).group(1).split()
    assert points == ["0.0,19.0", "50.0,1.0", "100.0,10.0"]
    assert '<circle cx="100.0" cy="10.0"' in svg
    assert 'aria-label="3 runs, 10 ms to 30 ms"' in svg


def test_a_sparkline_of_equal_times_is_flat_and_of_no_times_is_empty():
    assert 'points="0.0,10.0 100.0,10.0"' in pages.sparkline_svg([0.01, 0.01])
    assert pages.sparkline_svg([]) == ""


def test_an_index_row_shows_the_figures_and_carries_the_filter_values():
    row = pages.index_row(pages.IndexRow(history(), SUMMARY, "cases/x.html"))
    assert 'data-device="mps" data-machine="ci-m2-max" data-model="resnet18" data-mode="train"' in row
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[8:13] == ["12.4 ms", "x1.042", "\u2265\u00a014%", "regressed", "4"]
    assert 'data-value="0.0124"' in row and 'class="verdict verdict-regressed"' in row


def test_the_filters_offer_each_value_the_rows_hold_once():
    rows = [pages.IndexRow(history(machine=m, model=k), SUMMARY, "x.html")
            for m, k in (("b-mac", "resnet18"), ("a-mac", "bert-base"), ("a-mac", "resnet18"))]
    controls = pages.filter_controls(rows)
    machine = re.search(r'data-filter="machine">(.*?)</select>', controls).group(1)
    assert re.findall(r'value="([^"]*)"', machine) == ["", "a-mac", "b-mac"]
    assert "3 of 3 cases" in controls


def test_the_index_lists_every_case_and_names_each_bad_file():
    rows = [pages.IndexRow(history(machine=m), SUMMARY, f"cases/{m}.html") for m in ("m1", "m2", "m3")]
    problem = FileProblem(Path("baselines/cpu/vm.json"), "is not valid JSON (line 3)", "Restore it.")
    html = pages.index_page(rows, [problem], [("baselines/cpu/vm.json", "baseline file")], [], LINKS, "now")
    assert len(rows_of(html)) == 3
    problems = html.split('id="problems"')[1]
    assert "baselines/cpu/vm.json" in problems and "is not valid JSON (line 3)" in problems
    assert "Restore it." in problems


def test_text_from_files_is_escaped():
    html = pages.index_page([pages.IndexRow(history(machine="<script>alert(1)</script>"), SUMMARY, "x.html")],
                            [], [], [], LINKS, "now")
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_case_page_shows_the_plot_every_session_newest_first_and_the_verdict():
    page = pages.case_page(history(sessions=3), SUMMARY, [Mark(2, "regressed", "regressed x1.23")],
                           '<svg id="plot"></svg>', None, LINKS, "now")
    assert '<svg id="plot"></svg>' in page
    sessions = re.findall(r"<td>(2026-12-0\dT10:00:00Z)</td>", page)
    assert sessions == ["2026-12-03T10:00:00Z", "2026-12-02T10:00:00Z", "2026-12-01T10:00:00Z"]
    assert "regressed x1.230 [1.180, 1.290], floor \u2265\u00a014%, band 10%" in page
    assert "12.3 ms, 12.5 ms" in page
    assert "2026-12-03T10:00:00Z (c2): regressed x1.23" in page
    assert 'href="../site.css"' in page and 'src="../site.js"' in page


def test_a_case_page_without_a_plot_says_why():
    page = pages.case_page(history(), SUMMARY, [], None, "install matplotlib: pip install 'perfsuite[plot]'", LINKS,
                           "now")
    assert "pip install &#x27;perfsuite[plot]&#x27;" in page and "<svg" not in page


def test_case_page_names_are_unique_and_safe_in_a_url():
    names = pages.case_page_names([history(machine="mac mini/1"), history(machine="mac mini 1")])
    assert sorted(names.values()) == ["mps--mac-mini-1--mps-bf16-resnet18-bs64-train-2.html",
                                      "mps--mac-mini-1--mps-bf16-resnet18-bs64-train.html"]


def test_the_ab_section_shows_each_case_and_names_the_bad_entries():
    document = {"schema": "perfsuite-ab", "schema_version": 1,
                "base": {"label": "main", "revision": "abc"}, "head": {"label": "working tree"},
                "cases": [{"benchmark_id": "cpu-fp32-resnet18-bs4-infer-smoke", "status": "regressed",
                           "base_median_s": 0.004, "head_median_s": 0.006, "ratio": 1.5, "ci_low": 1.4,
                           "ci_high": 1.6, "floor": 0.6, "tolerance": 0.1},
                          {"benchmark_id": "bad", "ratio": -1}]}
    html = pages.ab_section(ab_summary_from_json(document, Path("ab.json")), "ab.json")
    assert "base: main, revision abc" in html and "head: working tree" in html
    assert "x1.500 [1.400, 1.600]" in html and "4 ms" in html and "6 ms" in html and "\u2265\u00a060%" in html
    assert "cases[1] (bad): &#x27;ratio&#x27; should be a finite number &gt; 0, got -1" in html


@pytest.mark.parametrize("problem_count, expected", [(0, None), (1, "1 problem<"), (3, "3 problems<")])
def test_the_navigation_counts_the_problems(problem_count, expected):
    page = pages.page("t", "", pages.SiteLinks(has_ab=True, problem_count=problem_count), "now")
    assert 'href="ab.html"' in page
    assert (expected in page) if expected else ("problems-link" not in page)


def test_a_case_page_shows_which_figure_each_session_measured_and_marks_the_change():
    latency, step = history(sessions=2).sessions
    changed = CaseHistory("mps", "ci-m2-max", history().case, "mps_driver_allocated_bytes", {"name": "ci-m2-max"},
                          (replace(latency, figure="latency"), replace(step, figure="step")))
    page = pages.case_page(changed, SUMMARY, [Mark(1, "figure", "figure latency -> step")], "<svg></svg>", None,
                           LINKS, "now")
    figures = re.findall(r'<td class="figure figure-(\w+)">', page)
    assert figures == ["step", "latency"]  # newest first
    assert '<li class="mark mark-figure">2026-12-02T10:00:00Z (c1): figure latency -&gt; step</li>' in page
    assert "<dt>figures</dt><dd>latency -&gt; step</dd>" in page


def test_case_page_names_of_long_keys_are_cut_and_told_apart_by_a_hash():
    """A machine name of 220 bytes is valid (the limit is 229): its pages' names must still fit in a file name."""
    long = "m" * 220
    names = pages.case_page_names([history(machine=long + "-a"), history(machine=long + "-b")])
    assert len(set(names.values())) == 2
    assert all(len(name.encode()) <= pages.MAX_PAGE_STEM_CHARS + len(".html") for name in names.values())
    assert all(re.fullmatch(r"mps--m+-[0-9a-f]{12}\.html", name) for name in names.values())


def test_the_ab_section_lists_a_cases_explanation_by_the_ops_and_still_reads_version_1():
    case = {"benchmark_id": "cpu-fp32-wide-bs64-infer-smoke", "status": "regressed", "ratio": 1.5,
            "explanation": {"lines": ["why, by the ops (host self time a step)", "aten::addmm: calls 2 -> 4 a step"]}}
    document = {"schema": "perfsuite-ab", "schema_version": 2, "cases": [case, {**case, "explanation": {"lines": 3}}]}
    reading = ab_summary_from_json(document, Path("ab.json"))
    html = pages.ab_section(reading, "ab.json")
    assert '<ul class="explanation"><li>why, by the ops (host self time a step)</li>' in html
    assert "<li>aten::addmm: calls 2 -&gt; 4 a step</li>" in html
    assert "&#x27;explanation&#x27; should be an object whose &#x27;lines&#x27; is a list of text" in html
    old = ab_summary_from_json({**document, "schema_version": 1, "cases": [{"status": "unchanged"}]}, Path("a.json"))
    assert old.summary is not None and old.summary.cases[0].explanation == () and not old.problems
