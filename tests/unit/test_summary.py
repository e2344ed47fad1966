"""Rendering verdicts as a terminal table, JSON and markdown."""

from __future__ import annotations

import dataclasses
import json

from perfsuite.judge.verdicts import Verdict
from perfsuite.render.summary import headline, render_json, render_markdown, render_terminal, summary_counts

UNCHANGED = Verdict(
    benchmark_id="cpu-fp32-bert-base-bs8-train", status="unchanged", baseline_median_s=0.0456,
    current_median_s=0.0461, ratio=1.011, normalised_ratio=None, ci_low=0.99, ci_high=1.03, p_value=0.9,
    confidence=0.95, tolerance=0.10, baseline_rounds=30, current_rounds=30, memory_status="unchanged",
    memory_figure="cpu_peak_rss_bytes", baseline_memory_bytes=1_000_000_000, current_memory_bytes=1_010_000_000,
    memory_ratio=1.01, memory_tolerance=0.10, message="cpu-fp32-bert-base-bs8-train unchanged: ...",
)
REGRESSED = dataclasses.replace(
    UNCHANGED, benchmark_id="cpu-fp32-resnet18-bs4-train", status="regressed", baseline_median_s=0.0123,
    current_median_s=0.0160, ratio=1.301, ci_low=1.25, ci_high=1.35, p_value=1e-9,
    message="cpu-fp32-resnet18-bs4-train regressed: median 12.3 ms -> 16 ms (x1.301)",
)
MEMORY_REGRESSED = dataclasses.replace(
    UNCHANGED, benchmark_id="cpu-fp32-resnet18-bs8-infer", memory_status="regressed", memory_ratio=1.3,
    current_memory_bytes=1_300_000_000, message="cpu-fp32-resnet18-bs8-infer unchanged: ...; memory regressed",
)
NO_BASELINE = dataclasses.replace(
    UNCHANGED, benchmark_id="cpu-fp32-sd15-unet-bs1-infer", status="no-baseline", baseline_median_s=None,
    ratio=None, ci_low=None, ci_high=None, p_value=None, baseline_rounds=None, memory_status="not-compared",
    baseline_memory_bytes=None, memory_ratio=None, message="cpu-fp32-sd15-unet-bs1-infer: no baseline in ...",
)


def test_headline_says_failed_and_counts_when_a_benchmark_regressed():
    assert headline([UNCHANGED, REGRESSED]) == "perfsuite gate FAILED: 1 regressed, 1 unchanged"


def test_headline_says_passed_without_regressions():
    assert headline([UNCHANGED, NO_BASELINE]) == "perfsuite gate passed: 1 unchanged, 1 no-baseline"


def test_a_memory_regression_fails_the_headline():
    assert headline([MEMORY_REGRESSED]).startswith("perfsuite gate FAILED: 1 unchanged, 1 memory-regressed")


def test_headline_of_nothing_says_nothing_was_judged():
    assert headline([]) == "perfsuite gate: no benchmarks were judged"


def test_counts_include_every_status_and_the_failures():
    counts = summary_counts([UNCHANGED, REGRESSED, MEMORY_REGRESSED])
    assert (counts["unchanged"], counts["regressed"], counts["incompatible"], counts["gate-failed"]) == (2, 1, 0, 2)


def test_terminal_table_lists_failures_first():
    lines = render_terminal([UNCHANGED, NO_BASELINE, REGRESSED]).splitlines()
    rows = [line.split()[0] for line in lines[2:5]]
    assert rows == ["cpu-fp32-resnet18-bs4-train", "cpu-fp32-bert-base-bs8-train", "cpu-fp32-sd15-unet-bs1-infer"]


def test_terminal_table_shows_medians_in_readable_units_and_the_ratio():
    text = render_terminal([REGRESSED])
    assert "12.3 ms" in text and "16 ms" in text and "x1.301" in text and "[1.250, 1.350]" in text


def test_terminal_output_repeats_the_regression_message():
    assert REGRESSED.message in render_terminal([UNCHANGED, REGRESSED])


def test_terminal_output_says_once_how_to_record_missing_baselines():
    text = render_terminal([NO_BASELINE, dataclasses.replace(NO_BASELINE, benchmark_id="other")])
    assert text.count("pytest --benchmark-only --perf-update-baseline") == 1


def test_json_says_whether_the_gate_failed_with_counts_and_verdicts_in_seconds():
    document = json.loads(render_json([UNCHANGED, REGRESSED]))
    assert document["gate_failed"] is True
    assert document["counts"]["regressed"] == 1
    assert document["verdicts"][0]["benchmark_id"] == "cpu-fp32-resnet18-bs4-train"
    assert document["verdicts"][0]["current_median_s"] == 0.0160


def test_json_of_no_verdicts_passes():
    document = json.loads(render_json([]))
    assert (document["gate_failed"], document["verdicts"]) == (False, [])


def test_markdown_has_a_bold_headline_and_one_table_row_per_verdict():
    lines = render_markdown([UNCHANGED, REGRESSED, NO_BASELINE]).splitlines()
    assert lines[0] == "**perfsuite gate FAILED: 1 regressed, 1 unchanged, 1 no-baseline**"
    assert lines[2].startswith("| benchmark | verdict |")
    assert sum(line.startswith("| cpu-") for line in lines) == 3


def test_markdown_escapes_pipes_in_cells():
    verdict = dataclasses.replace(REGRESSED, benchmark_id="cpu-fp32-a|b-bs1-train")
    assert "| cpu-fp32-a\\|b-bs1-train |" in render_markdown([verdict])


def test_markdown_memory_column_shows_ratio_and_status():
    assert "| x1.300 regressed |" in render_markdown([MEMORY_REGRESSED])
