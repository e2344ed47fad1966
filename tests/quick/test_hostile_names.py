"""Hostile names through every renderer of names: the terminal tables and sentences (gate, results, A/B, progress,
compare, the site's problems), the Markdown a CI job posts (summary.md, results.md, ab.md, comparison.md) and the
site's HTML. Names carry HTML, Markdown pipes, double spaces, control characters (NUL, ESC, C1, lone surrogates,
bidirectional overrides), GitHub workflow commands (`::error ...::`, `##[error]`), mathtext and long runs; nothing
reaches a target unescaped: no raw control character, no line a runner would read as a command, no HTML element
or handler of the name's, no extra table column, and each page and chart is still written."""

from __future__ import annotations

import contextlib
import dataclasses
import html
import io
import json
import re
import tempfile
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.cli import main
from perfsuite.judge.ab import judge_ab
from perfsuite.judge.stats import RunComparison
from perfsuite.judge.verdicts import Verdict
from perfsuite.records import (
    AbBlockProgress,
    AbMeasurement,
    AbPair,
    AbProfileFailed,
    AbSide,
    Case,
    Measurement,
    ProcessProgress,
    Run,
)
from perfsuite.render import ab, results, summary
from perfsuite.render.escape import html_text, markdown_text, plot_text, terminal_text
from perfsuite.render.progress import ab_progress_line, process_progress_line
from perfsuite.store.archive import ArchivedCase, ArchivedSession, ArchivedVerdict, write_session
from perfsuite.store.baselines import stored_run

REPOSITORY = Path(__file__).resolve().parents[2]
COMPARE_FIXTURE = REPOSITORY / "tests" / "fixtures" / "compare" / "run-mps-smoke.json"
PIECES = (
    "<img src=x onerror=alert(1)>", "</td><script>alert(1)</script>", "|", "  ", "x|  y", "\n::error title=t::owned",
    "::warning::w", "  ::notice::n", "##[error]e", "\x00", "\x1b[2J", "\x1b]0;title\x07", "\r", "\t", "\x85", "\x9b",
    "\u202e", "\u2066", "\u2028", "\udcff", "*_`[a](javascript:x)~", "&amp;", "'\"", "$\\frac{$", "$x$", "\\", "é",
    "a" * 220,
)
names = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(st.characters(exclude_categories=()), max_size=3)), min_size=1,
    max_size=4,
).map("".join)
BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
DANGEROUS_TAGS = {"img", "iframe", "object", "embed", "frame", "applet", "base"}  # the site writes none of them


def raw_controls(text: str, allowed: str) -> list[str]:
    """The characters of `text` a terminal, a browser or a runner would act on or hide (besides `allowed`)."""
    return sorted({repr(c) for c in text if c not in allowed and (
        unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in BIDI_CONTROLS)})


def terminal_problems(text: str) -> list[str]:
    """What in `text` would act in a terminal or a GitHub job log: control characters (a newline only between the
    renderer's own lines) and lines a runner reads as workflow commands."""
    problems = raw_controls(text, allowed="\n")
    problems += [f"workflow command in {line!r:.100}" for line in text.split("\n")
                 if line.lstrip().startswith("::") or "##[" in line]
    return problems


def table_cells(row: str) -> int:
    """How many cell separators a GitHub-flavoured Markdown table row holds (`\\|` and `\\\\` are escapes)."""
    return sum(token == "|" for token in re.findall(r"\\.|\|", row))


def markdown_problems(text: str) -> list[str]:
    """What in `text` would not read as written in a job summary: anything of `terminal_problems`, raw HTML, and a
    table row with more or fewer cells than its header."""
    problems = terminal_problems(text) + [f"raw HTML at {text[i:i + 40]!r}" for i in range(len(text))
                                          if text[i] == "<"]
    header = None
    for line in text.split("\n"):
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = table_cells(line)
        elif table_cells(line) != header:
            problems.append(f"a row of {table_cells(line)} separators under a header of {header}: {line!r:.100}")
    return problems


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        handlers = [name for name, _ in attrs if name.startswith("on")]
        script = tag == "script" and not any(name == "src" and value and value.endswith("site.js")
                                              for name, value in attrs)
        links = [value for name, value in attrs if name in ("href", "src") and value
                 and not re.fullmatch(r"[\w./#-]*", value)]
        if tag in DANGEROUS_TAGS or script or handlers or links:
            self.problems.append(f"<{tag} {attrs!r:.120}>")


def html_problems(page: str) -> list[str]:
    """Raw control characters in an HTML page, and elements, handlers or links that are not the site's own."""
    elements = _Elements()
    elements.feed(page)
    return raw_controls(page, allowed="\t\n") + elements.problems


def run_of(case: Case, torch_version: str = "2.13.0") -> Run:
    return Run(case, (0.010, 0.011, 0.012), 4, None, "cpu_peak_rss_bytes", 2**20, "abc", torch_version, 1, 10)


def gate_verdicts(name: str, reason: str) -> list[Verdict]:
    comparison = RunComparison(
        outcome="regressed", ratio=1.3, current_runs=3, baseline_runs=5, baseline_sessions=5, calibrated=True,
        log_sd=0.02, degrees_of_freedom=4, ci_low=1.25, ci_high=1.35, p_value_slower=1e-9, p_value_faster=1.0,
        detectable_slowdown=0.12, noise_slowdown=0.05, processes_needed=3,
    )
    regressed = Verdict(
        benchmark_id=name, status="regressed", baseline_median_s=0.0123, current_median_s=0.016, ratio=1.3,
        ci_low=1.25, ci_high=1.35, p_value=1e-9, tolerance=0.10, current_runs=3, baseline_runs=5,
        detectable_slowdown=0.12, processes_needed=None, samples_per_s=250.0, tflops_per_s=None,
        gpu_busy_fraction=None, memory_status="unchanged", memory_figure="cpu_peak_rss_bytes",
        baseline_memory_bytes=2**20, current_memory_bytes=2**20, memory_ratio=1.0, memory_tolerance=0.10,
        comparison=comparison, baseline_source=reason,
    )
    changed = dataclasses.replace(regressed, benchmark_id=name + "-changed", status="incompatible", comparison=None,
                                  reasons=(reason,), change_fails=True)
    return [regressed, changed]


def ab_verdicts(case: Case, reason: str) -> tuple[list, dict[str, AbMeasurement]]:
    pairs = tuple(AbPair(((0.01, 0.013),) * 3, run_of(case), run_of(case), 1.0, 1.0) for _ in range(3))
    measurement = AbMeasurement(case, pairs, 0.0)
    errored_case = dataclasses.replace(case, batch_size=8)
    verdicts = [judge_ab(measurement, [], 0.10, 0.10, family_size=2),
                judge_ab(AbMeasurement(errored_case, ()), [reason], 0.10, 0.10, family_size=2)]
    return verdicts, {case.benchmark_id: measurement}


def write_hostile_archive(baselines: Path, name: str) -> None:
    """Two sessions of one case whose model, machine name, commit and torch version are `name`, and one session file
    whose machine slug is `name` (it lies in the wrong folder, so the site names it as a problem)."""
    case = Case("cpu", "fp32", name, 4, "infer", "smoke")
    for day, torch_version in ((1, "2.12.0"), (2, name)):
        at = f"2026-01-0{day}T00:00:00Z"
        runs = tuple(stored_run([0.010, 0.011, 0.012], None, at, name) for _ in range(2))
        verdict = ArchivedVerdict("regressed", 1.2, 1.1, 1.3, 0.1, 0.1)
        session = ArchivedSession(
            device="cpu", machine_slug="vm", machine={"name": name}, recorded_at=at, commit=name,
            torch_version=torch_version, kind="update",
            cases=(ArchivedCase(case, "digest", None, "cpu_peak_rss_bytes", 4, runs, verdict),),
        )
        path = write_session(baselines / "archive", session)
    document = json.loads(path.read_text())
    document["machine_slug"] = name
    (path.parent / "misplaced.json").write_text(json.dumps(document))


def hostile_ab_file(path: Path, name: str) -> Path:
    side = {"label": name, "revision": name, "python": name, "torch_version": name}
    case = {"benchmark_id": name, "status": "regressed", "ratio": 1.3, "ci_low": 1.2, "ci_high": 1.4,
            "base_median_s": 0.01, "head_median_s": 0.013, "message": name}
    path.write_text(json.dumps({"schema": "perfsuite-ab", "schema_version": 1, "started_at": name, "base": side,
                                "head": side, "cases": [case, {"benchmark_id": name, "ratio": name}]}))
    return path


def site_outputs(name: str) -> tuple[list[str], str]:
    """The pages of a site built from `name`'s archive and A/B file, and what `perfsuite site` printed."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_hostile_archive(root / "baselines", name)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            status = main(["site", str(root / "baselines"), "--ab", str(hostile_ab_file(root / "ab.json", name)),
                           "-o", str(root / "site")])
        assert status == 0, printed.getvalue()
        pages = [page.read_text(encoding="utf-8") for page in sorted((root / "site").rglob("*.html"))]
    return pages, printed.getvalue()


# --- the escaping functions ---------------------------------------------------------------------------------------

def test_each_target_gets_its_own_escapes():
    hostile = "x|  y<img src=x onerror=alert(1)>\n::error::z\x00\x1b[31m$a$"
    assert terminal_text(hostile) == "x|  y<img src=x onerror=alert(1)>\\n::error::z\\x00\\x1b[31m$a$"
    assert terminal_text("::error title=t::owned") == "\\x3a:error title=t::owned"
    assert terminal_text("##[error]e") == "#\\x23[error]e"
    assert html_text(hostile) == "x|  y&lt;img src=x onerror=alert(1)&gt;\n::error::z\\x00\\x1b[31m$a$"
    assert markdown_text(hostile) == "x\\|  y&lt;img src=x onerror=alert(1)&gt;\\\\n::error::z\\\\x00\\\\x1b\\[31m$a$"
    assert plot_text(hostile) == "x|  y<img src=x onerror=alert(1)>\\n::error::z\\x00\\x1b[31m\\$a\\$"


def test_markdown_keeps_underscores_inside_words_and_escapes_those_that_could_emphasise():
    assert markdown_text("mps_driver_allocated_bytes") == "mps_driver_allocated_bytes"
    assert markdown_text("_a_ *b* `c` [d](e) ~f~") == "\\_a\\_ \\*b\\* \\`c\\` \\[d\\](e) \\~f\\~"


@given(names)
def test_terminal_text_is_safe_and_changes_nothing_in_its_own_output(name):
    shown = terminal_text(name)
    assert terminal_problems(shown) == [] and "\n" not in shown
    assert terminal_text(shown) == shown


# --- ab.md and the A/B terminal table -----------------------------------------------------------------------------

def test_ab_md_builds_its_table_from_the_records_so_pipes_and_double_spaces_keep_the_columns():
    case = Case("cpu", "fp32", "x|  y <b>*z*</b> [l](u) a_b _c_", 4, "infer", "smoke")
    verdicts, measurements = ab_verdicts(case, "boom")
    label = "<img_src=x_onerror=alert(1)>"
    side = AbSide(label, "abc", "/usr/bin/python3", "2.13.0")
    markdown = ab.summary_markdown(verdicts, measurements, side, side)
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(rows) == 4 and {table_cells(row) for row in rows} == {len(ab.TABLE_COLUMNS) + 1}
    first_cell = re.findall(r"(?:\\.|[^|])+", rows[2])[0].strip()
    assert html.unescape(re.sub(r"\\(.)", r"\1", first_cell)) == case.benchmark_id
    assert "<img" not in markdown and "- base: &lt;img_src=x_onerror=alert(1)&gt; (abc)" in markdown
    assert markdown_problems(markdown) == []


@settings(max_examples=60, deadline=None)
@given(name=names, label=names, reason=names)
def test_the_ab_table_ab_md_and_sentences_escape_every_name(name, label, reason):
    case = Case("cpu", "fp32", name, 4, "infer", "smoke")
    verdicts, measurements = ab_verdicts(case, reason)
    side = AbSide(label, label, label, label)
    terminal = (ab.render_sides(side, side) + ab.render_table(verdicts, measurements)
                + "".join(ab.ab_message(v) + "\n" for v in verdicts) + ab.outcome_line(verdicts))
    assert terminal_problems(terminal) == []
    assert markdown_problems(ab.summary_markdown(verdicts, measurements, side, side)) == []
    assert all(terminal_problems(case["message"]) == []
               for case in ab.summary_document(verdicts, measurements, side, side, label)["cases"])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names)
def test_the_ab_chart_draws_every_name(name, tmp_path):
    verdicts, _ = ab_verdicts(Case("cpu", "fp32", name, 4, "infer", "smoke"), "boom")
    assert ab.write_ratio_plot(verdicts, tmp_path / "ab.png") and (tmp_path / "ab.png").stat().st_size > 0


# --- the gate: terminal, summary.md, results tables, progress -----------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(name=names, reason=names)
def test_the_gate_terminal_and_summary_md_escape_every_name(name, reason):
    verdicts = gate_verdicts(name, reason)
    errors = {name + "-errored": reason}
    assert terminal_problems(summary.render_terminal(verdicts, errors)) == []
    assert terminal_problems(summary.render_terminal([], errors)) == []
    assert markdown_problems(summary.render_markdown(verdicts, errors)) == []
    assert markdown_problems(summary.render_markdown([], errors)) == []


@settings(max_examples=60, deadline=None)
@given(name=names)
def test_the_results_tables_and_progress_lines_escape_every_name(name):
    case = Case("cpu", "fp32", name, 4, "infer", "smoke")
    measurements = [Measurement(case, (run_of(case),))]
    assert terminal_problems(results.render_results(measurements, {case.benchmark_id: name})) == []
    assert markdown_problems(results.render_results_markdown(measurements, {case.benchmark_id: name})) == []
    assert terminal_problems(process_progress_line(ProcessProgress(1, 3, case.benchmark_id, 1, 2, 1.0))) == []


@settings(max_examples=60, deadline=None)
@given(name=names)
def test_the_ab_progress_lines_escape_every_name(name):
    key = Case("cpu", "fp32", name, 4, "infer", "smoke").benchmark_id
    for progress in (AbBlockProgress(key, 2, 41.0, 300.0, 1.004, 8, True),
                     AbBlockProgress(key, 1, 3.0, 300.0, failure="base side: it broke"),
                     AbProfileFailed(key, "head side: no profiler")):
        assert terminal_problems(ab_progress_line(progress)) == []


# --- perfsuite compare ----------------------------------------------------------------------------------------------

@settings(max_examples=10, deadline=None)
@given(name=names)
def test_compare_escapes_every_name_in_its_table_markdown_and_chart(name):
    document = json.loads(COMPARE_FIXTURE.read_text())
    for benchmark in document["benchmarks"]:
        benchmark["extra_info"]["model"] = name
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "a.json").write_text(json.dumps(document))
        for benchmark in document["benchmarks"]:
            benchmark["stats"]["median"] *= 1.1
        (root / "b.json").write_text(json.dumps(document))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            status = main(["compare", str(root / "a.json"), str(root / "b.json"), "--allow-same-machine",
                           "--output-dir", str(root / "out")])
        assert terminal_problems(printed.getvalue()) == []
        if name:  # an empty model name is refused, naming the file and the benchmark
            assert status == 0, printed.getvalue()
            assert markdown_problems((root / "out" / "comparison.md").read_text(encoding="utf-8")) == []


# --- the site -------------------------------------------------------------------------------------------------------

def test_the_site_prints_no_workflow_command_or_control_character_from_an_archive():
    pages, printed = site_outputs("vm\n::error title=perfsuite::owned\x00\x1b[2J")
    assert "problem: " in printed and "cases[1] (vm\\n::error title=perfsuite::owned\\x00\\x1b[2J)" in printed
    assert terminal_problems(printed) == []
    assert all(html_problems(page) == [] for page in pages)


@settings(max_examples=15, deadline=None)
@given(name=names)
def test_the_site_escapes_every_name_on_every_page_and_in_what_it_prints(name):
    pages, printed = site_outputs(name)
    assert terminal_problems(printed) == []
    assert [problem for page in pages for problem in html_problems(page)] == []
    if name.strip():
        assert any(html_text(name) in page for page in pages)


@pytest.mark.parametrize("name", ["\x00", "\x1b[31m", "\udcff", "\u202e"])
def test_nul_esc_surrogates_and_overrides_never_reach_the_html(name):
    pages, _ = site_outputs(f"m{name}x")
    assert all(name not in page for page in pages)
    assert any(html_text(f"m{name}x") in page for page in pages)
