"""Rendering verdicts and errored cases: the headline, a terminal table, JSON and markdown."""

from __future__ import annotations

import dataclasses
import json

from perfsuite.judge.stats import RunComparison
from perfsuite.judge.verdicts import Verdict
from perfsuite.render.escape import markdown_text
from perfsuite.render.summary import (
    LEGEND,
    headline,
    render_json,
    render_markdown,
    render_terminal,
    summary_counts,
    verdict_rows,
)


def comparison(outcome: str, ratio: float) -> RunComparison:
    return RunComparison(
        outcome=outcome, ratio=ratio, current_runs=3, baseline_runs=5, baseline_sessions=5, calibrated=True,
        log_sd=0.02, degrees_of_freedom=4, ci_low=ratio - 0.02, ci_high=ratio + 0.02, p_value_slower=0.3,
        p_value_faster=0.7, detectable_slowdown=0.12, noise_slowdown=0.05, processes_needed=3,
    )


UNCHANGED = Verdict(
    benchmark_id="cpu-fp32-bert-base-bs8-train", status="unchanged", baseline_median_s=0.0456,
    current_median_s=0.0461, ratio=1.011, ci_low=0.99, ci_high=1.03, p_value=0.3, tolerance=0.10,
    current_runs=3, baseline_runs=5, detectable_slowdown=0.12, processes_needed=None, samples_per_s=173.5,
    tflops_per_s=None, gpu_busy_fraction=None, memory_status="unchanged", memory_figure="cpu_peak_rss_bytes",
    baseline_memory_bytes=1_000_000_000, current_memory_bytes=1_010_000_000, memory_ratio=1.01,
    memory_tolerance=0.10, comparison=comparison("unchanged", 1.011),
)
REGRESSED = dataclasses.replace(
    UNCHANGED, benchmark_id="cpu-fp32-resnet18-bs4-train", status="regressed", baseline_median_s=0.0123,
    current_median_s=0.0160, ratio=1.301, ci_low=1.25, ci_high=1.35, p_value=1e-9,
    comparison=comparison("regressed", 1.301),
)
MEMORY_REGRESSED = dataclasses.replace(
    UNCHANGED, benchmark_id="cpu-fp32-resnet18-bs8-infer", memory_status="regressed", memory_ratio=1.3,
    current_memory_bytes=1_300_000_000,
)
NO_BASELINE = dataclasses.replace(
    UNCHANGED, benchmark_id="cpu-fp32-sd15-unet-bs1-infer", status="no-baseline", baseline_median_s=None,
    ratio=None, ci_low=None, ci_high=None, p_value=None, baseline_runs=None, detectable_slowdown=None,
    memory_status="not-compared", baseline_memory_bytes=None, memory_ratio=None, comparison=None,
)
LAUNCH_BOUND = dataclasses.replace(
    UNCHANGED, benchmark_id="cuda-fp32-resnet18-bs4-infer", gpu_busy_fraction=0.3,
    memory_figure="cuda_max_allocated_bytes",
)
ERRORS = {"cpu-fp32-bert-base-bs8-infer": "RuntimeError: out of memory\nTraceback ...\n"}


# --- headline and counts ----------------------------------------------------------------------------------------


def test_headline_says_failed_and_counts_when_a_benchmark_regressed():
    assert headline([UNCHANGED, REGRESSED]) == "perfsuite gate FAILED: 1 regressed, 1 unchanged"


def test_headline_says_passed_without_regressions_and_names_what_it_did_not_judge_apart():
    assert headline([UNCHANGED, NO_BASELINE]) == "perfsuite gate passed: 1 unchanged; not judged: 1 no-baseline"


def test_a_gate_that_judged_no_case_does_not_say_it_passed():
    assert headline([NO_BASELINE, NO_BASELINE]) == "perfsuite gate judged nothing: 2 no-baseline"
    warned = dataclasses.replace(NO_BASELINE, status="incompatible", change_fails=False)
    assert headline([warned]) == "perfsuite gate judged nothing: 1 incompatible"
    assert headline([NO_BASELINE], errors=1) == "perfsuite gate FAILED: 1 errored; not judged: 1 no-baseline"


def test_a_memory_regression_fails_the_headline():
    assert headline([MEMORY_REGRESSED]) == "perfsuite gate FAILED: 1 unchanged, 1 memory-regressed"


def test_an_errored_case_is_counted_and_fails_the_headline():
    assert headline([UNCHANGED], errors=1) == "perfsuite gate FAILED: 1 unchanged, 1 errored"


def test_errored_cases_alone_fail_the_headline():
    assert headline([], errors=2) == "perfsuite gate FAILED: 2 errored"


def test_headline_of_nothing_says_nothing_was_judged():
    assert headline([]) == "perfsuite gate: no benchmarks were judged"


def test_counts_include_every_status_with_zeros():
    counts = summary_counts([UNCHANGED])
    assert counts == {
        "regressed": 0, "improved": 0, "unchanged": 1, "uncalibrated": 0, "no-baseline": 0, "incompatible": 0,
        "conditions-differ": 0,
        "memory-regressed": 0, "errored": 0, "gate-failed": 0,
    }


def test_gate_failed_counts_failed_verdicts_and_errored_cases():
    assert summary_counts([UNCHANGED, REGRESSED, MEMORY_REGRESSED], errors=2)["gate-failed"] == 4


# --- rows and the terminal table -----------------------------------------------------------------------------------


def test_rows_list_failures_first_then_by_status_then_by_id():
    rows = verdict_rows([NO_BASELINE, UNCHANGED, MEMORY_REGRESSED, REGRESSED])
    assert [row["benchmark"] for row in rows] == [
        "cpu-fp32-resnet18-bs4-train", "cpu-fp32-resnet18-bs8-infer", "cpu-fp32-bert-base-bs8-train",
        "cpu-fp32-sd15-unet-bs1-infer",
    ]


def test_a_launch_bound_case_is_marked_in_the_benchmark_column():
    assert verdict_rows([LAUNCH_BOUND])[0]["benchmark"] == "cuda-fp32-resnet18-bs4-infer (launch-bound)"


def test_a_case_with_its_gpu_busy_is_not_marked():
    busy = dataclasses.replace(LAUNCH_BOUND, gpu_busy_fraction=0.9)
    assert verdict_rows([busy])[0]["benchmark"] == "cuda-fp32-resnet18-bs4-infer"


def test_a_row_shows_runs_band_floor_and_memory_change():
    row = verdict_rows([MEMORY_REGRESSED])[0]
    shown = (row["runs"], row["band"], row["detects"], row["memory change"])
    assert shown == ("3/5", "+-10%", ">=12%", "x1.300 regressed")


def test_a_row_without_baseline_shows_dashes():
    row = verdict_rows([NO_BASELINE])[0]
    assert (row["baseline"], row["ratio"], row["CI"], row["p"], row["runs"], row["detects"]) == (
        "-", "-", "-", "-", "3/-", "-",
    )


def test_the_terminal_report_lists_an_errored_case_with_the_first_line_of_its_message():
    text = render_terminal([UNCHANGED], ERRORS)
    assert "  cpu-fp32-bert-base-bs8-infer errored: RuntimeError: out of memory\n" in text
    assert "Traceback" not in text


def test_the_terminal_report_ends_with_the_legend():
    assert render_terminal([UNCHANGED]).endswith(f"\n{LEGEND}\n")


# --- JSON ------------------------------------------------------------------------------------------------------


def test_json_has_the_schema_counts_errors_and_verdicts():
    document = json.loads(render_json([UNCHANGED, REGRESSED], ERRORS))
    assert (document["schema"], document["schema_version"]) == ("perfsuite-verdicts", 5)
    assert (document["counts"]["errored"], document["counts"]["regressed"], document["gate_failed"]) == (1, 1, True)
    assert document["errors"] == ERRORS
    assert [v["benchmark_id"] for v in document["verdicts"]] == [
        "cpu-fp32-resnet18-bs4-train", "cpu-fp32-bert-base-bs8-train",
    ]


def test_json_fails_the_gate_on_an_errored_case_alone():
    document = json.loads(render_json([UNCHANGED], ERRORS))
    assert document["gate_failed"] is True


def test_json_passes_the_gate_without_failures():
    assert json.loads(render_json([UNCHANGED, NO_BASELINE]))["gate_failed"] is False


def test_json_verdicts_carry_the_derived_flags():
    verdict = json.loads(render_json([LAUNCH_BOUND]))["verdicts"][0]
    assert (verdict["launch_bound"], verdict["gate_failed"]) == (True, False)


# --- markdown ------------------------------------------------------------------------------------------------------


def test_markdown_opens_with_the_headline_in_bold():
    assert render_markdown([UNCHANGED, REGRESSED]).startswith(
        "**perfsuite gate FAILED: 1 regressed, 1 unchanged**\n"
    )


def test_markdown_ends_with_the_legend_in_italics():
    assert render_markdown([UNCHANGED]).endswith(f"_{markdown_text(LEGEND)}_\n")
    assert "p &lt; 0.01" in render_markdown([UNCHANGED])


def test_the_legend_explains_launch_bound_and_detects():
    assert "launch-bound: under half the step is GPU kernels" in LEGEND
    assert "detects: the smallest slowdown called with 95% power" in LEGEND


def test_markdown_marks_a_launch_bound_case_in_its_row():
    assert "| cuda-fp32-resnet18-bs4-infer (launch-bound) | unchanged |" in render_markdown([LAUNCH_BOUND])


def test_markdown_lists_an_errored_case():
    assert "- cpu-fp32-bert-base-bs8-infer errored: RuntimeError: out of memory" in render_markdown([UNCHANGED], ERRORS)


def test_markdown_of_errored_cases_alone_lists_them_under_the_headline():
    assert render_markdown([], ERRORS) == (
        "**perfsuite gate FAILED: 1 errored**\n\n- cpu-fp32-bert-base-bs8-infer errored: RuntimeError: out of memory\n"
    )


def test_markdown_escapes_a_pipe_in_a_message():
    piped = dataclasses.replace(REGRESSED, benchmark_id="cpu-fp32-a|b-bs4-train")
    assert "- cpu-fp32-a\\|b-bs4-train regressed: median" in render_markdown([piped])


def test_json_verdicts_carry_their_message():
    verdict = json.loads(render_json([REGRESSED]))["verdicts"][0]
    assert verdict["message"].startswith("cpu-fp32-resnet18-bs4-train regressed: median 12.3 ms -> 16 ms (x1.301")
