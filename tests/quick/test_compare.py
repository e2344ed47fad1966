"""Comparing two result sets: reading, joining, the article's reference figures, rendering and the command."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from csv import DictReader
from pathlib import Path

import pytest
from hostile_files import fails_after, run_with_memory_cap

from perfsuite.analyse.compare import (
    CompareError,
    ResultSet,
    compare_result_sets,
    find_newest_run,
    geometric_mean_ratio,
    merge_result_sets,
    parse_result_set,
    preferred_device,
    read_result_set,
    result_set_from_document,
    select_device,
    time_ratio,
)
from perfsuite.cli import main as cli_main
from perfsuite.records import BaselineEntry, Case
from perfsuite.render.comparison import (
    PlottingUnavailable,
    display_table,
    legend_lines,
    plot_ratio_chart,
    ratio_chart_data,
    render_csv,
    render_markdown,
    summary_line,
)
from perfsuite.render.units import format_time_ratio
from perfsuite.store.baselines import record_runs, stored_run

REPO = Path(__file__).resolve().parents[2]


def main(argv):
    return cli_main(["compare", *argv])

FIXTURES = REPO / "tests" / "fixtures" / "compare"
REFERENCE = REPO / "baselines" / "reference"
ARTICLE_MPS = REFERENCE / "article-m2-max-mps.json"
ARTICLE_CUDA = REFERENCE / "article-rtx4060-cuda.json"
TWO_PROFILES = FIXTURES / "baseline-cuda-standard-and-smoke.json"


# --- small documents built in the tests (fixture data: invented figures) -----------------------------


def case(model="resnet18", mode="train", dtype="fp32", batch_size=32, profile="standard", time_s=0.1, **extra):
    return {"model": model, "mode": mode, "dtype": dtype, "batch_size": batch_size, "profile": profile,
            "time_s": time_s, **extra}


def run_set(*cases, device="mps", machine="fixture-mac", name="run.json") -> ResultSet:
    benchmarks = []
    for c in cases:
        facts = {k: v for k, v in c.items() if k != "time_s"}
        facts.setdefault("device", device)
        benchmark_id = f"{facts['device']}-{c['dtype']}-{c['model']}-bs{c['batch_size']}-{c['mode']}{_suffix(c)}"
        benchmarks.append({"param": benchmark_id, "extra_info": facts, "stats": {"median": c["time_s"], "rounds": 5}})
    document = {"machine_info": {"perfsuite": {"machine_slug": machine}}, "benchmarks": benchmarks}
    return result_set_from_document(document, name)


def baseline_document(*cases, device="cuda", machine="fixture-h200") -> dict:
    """A schema-1 baseline file holding `cases`, each entry with every field the baseline store requires."""
    entries = {}
    for c in cases:
        entry = {
            "config_digest": "cfg-0001", "torch_version": "2.13.0", "memory_figure": "cuda_max_allocated_bytes",
            "memory_bytes": None, "flops_per_step": None, "samples_per_s": 100.0, "rounds": 3,
            "round_times_s": [c["time_s"]] * 3, "recorded_at": "2026-12-01T12:00:00Z", "commit": None,
            "tolerance": 0.1, "memory_tolerance": 0.1,
        }
        entry.update({k: v for k, v in c.items() if k != "time_s"}, device=device, median_s=c["time_s"])
        entries[f"{device}-{c['dtype']}-{c['model']}-bs{c['batch_size']}-{c['mode']}{_suffix(c)}"] = entry
    return {"schema": "perfsuite-baseline", "schema_version": 1, "device": device,
            "machine": {"machine_slug": machine}, "entries": entries}


def _suffix(c: dict) -> str:
    """The benchmark id's compile suffix, as perfsuite writes it (none for eager or an unnamed mode)."""
    return f"-{c['compile']}" if c.get("compile", "eager") != "eager" else ""


def baseline_set(*cases, device="cuda", machine="fixture-h200", name="baseline.json") -> ResultSet:
    return result_set_from_document(baseline_document(*cases, device=device, machine=machine), name)


def published_set(*cases, device="cuda", machine="fixture-article", name="published.json") -> ResultSet:
    entries = {f"e{i}": {**{k: v for k, v in c.items() if k != "time_s"}, "per_batch_time_s": c["time_s"]}
               for i, c in enumerate(cases)}
    document = {"schema": "perfsuite-published-reference", "schema_version": 1, "device": device,
                "machine": {"machine_slug": machine, "description": "a fixture machine"}, "entries": entries}
    return result_set_from_document(document, name)


def rows_where(rows, **key):
    for field, value in key.items():
        rows = rows[rows[field] == value]
    return rows


# --- reading -------------------------------------------------------------------------------------------


def test_run_json_case_takes_its_time_from_the_median_and_its_facts_from_extra_info():
    cases = read_result_set(FIXTURES / "run-mps.json").cases
    resnet = cases[cases["benchmark_id"] == "mps-fp32-resnet18-bs32-train"].iloc[0]
    assert (resnet["device"], resnet["model"], resnet["batch_size"], resnet["time_s"]) == ("mps", "resnet18", 32, 0.100)


def test_run_json_names_its_machine_from_the_perfsuite_fingerprint():
    assert read_result_set(FIXTURES / "run-mps.json").machines == ("fixture-apple-m2-max",)


def test_run_without_a_slug_names_its_machine_as_the_baseline_store_would():
    document = {"machine_info": {"perfsuite": {"accelerator_name": "Apple M2 Max", "cpu_model": "Apple M2 Max"}},
                "benchmarks": [{"param": "x", "extra_info": {**case(), "device": "mps"}, "stats": {"median": 0.1}}]}
    assert result_set_from_document(document, "run.json").machines == ("apple-m2-max",)


def test_baseline_case_takes_its_time_from_median_s():
    cases = read_result_set(FIXTURES / "baseline-cuda.json").cases
    assert cases.set_index("benchmark_id").loc["cuda-fp32-resnet18-bs32-train", "time_s"] == 0.020


def test_a_recorded_baseline_takes_its_time_and_samples_per_s_from_the_median_of_its_runs(tmp_path):
    case_ = Case(device="cuda", dtype="fp32", model="resnet18", batch_size=32, mode="train", profile="standard")
    runs = tuple(stored_run([t] * 3, memory_bytes=None, recorded_at="2026-12-01T12:00:00Z", commit=None)
                 for t in (0.020, 0.030, 0.050))
    entry = BaselineEntry(
        case=case_, config_digest="cfg-0001", torch_version="2.13.0", threads=None, machine={"name": "fixture-h200"},
        memory_figure="cuda_max_allocated_bytes", samples_per_step=32, flops_per_step=None, gpu_busy_fraction=None,
        tolerance=0.1, memory_tolerance=0.1, runs=runs,
    )
    path = tmp_path / "cuda" / "fixture-h200.json"
    record_runs(path, "cuda", {case_.benchmark_id: entry})
    assert json.loads(path.read_text())["schema_version"] == 3
    row = read_result_set(path).cases.set_index("benchmark_id").loc[case_.benchmark_id]
    assert (row["time_s"], row["samples_per_s"]) == pytest.approx((0.030, 32 / 0.030))


def test_published_reference_keeps_unstated_fields_null():
    cases = read_result_set(ARTICLE_MPS).cases.set_index("model")
    assert cases.loc["resnet18", ["mode", "dtype"]].tolist() == [None, None]
    assert cases["batch_size"].isna().all()


def test_empty_file_is_rejected_naming_the_file():
    with pytest.raises(CompareError, match=r"empty\.json: is empty \(an interrupted copy or checkout\)\. Pass a"):
        read_result_set(FIXTURES / "empty.json")


def test_invalid_json_is_rejected_with_its_line():
    with pytest.raises(CompareError, match=r"x\.json: is not valid JSON \(line 2, column 13"):
        parse_result_set('{\n  "schema": ,\n}', "x.json")


def test_file_of_another_kind_is_rejected():
    with pytest.raises(CompareError, match="not a result file"):
        read_result_set(FIXTURES / "not-a-result.json")


def test_json_list_is_rejected_as_another_kind():
    with pytest.raises(CompareError, match="found a JSON list"):
        parse_result_set("[1, 2]", "x.json")


def test_pytest_benchmark_json_without_perfsuite_facts_is_rejected():
    with pytest.raises(CompareError, match="no perfsuite facts in extra_info"):
        read_result_set(FIXTURES / "plain-pytest-benchmark.json")


def test_run_without_benchmarks_is_rejected():
    with pytest.raises(CompareError, match="holds no benchmarks"):
        parse_result_set('{"benchmarks": [], "machine_info": {}}', "run.json")


def test_newer_baseline_schema_version_is_rejected():
    with pytest.raises(CompareError, match="has schema_version 4, written by a newer perfsuite"):
        read_result_set(FIXTURES / "baseline-future-schema.json")


def test_measured_case_without_batch_size_is_rejected():
    with pytest.raises(CompareError, match="field 'batch_size' should be a whole number >= 1, got None"):
        baseline_set(case(batch_size=None))


def test_measured_case_with_zero_time_is_rejected():
    with pytest.raises(CompareError, match="field 'median_s' should be a finite time >= 1e-09 seconds, got 0.0"):
        baseline_set(case(time_s=0.0))


def test_missing_path_is_rejected_naming_it(tmp_path):
    with pytest.raises(CompareError, match="nope.json: no such file or folder"):
        read_result_set(tmp_path / "nope.json")


def test_folder_holds_the_cases_of_all_its_files(tmp_path):
    shutil.copy(FIXTURES / "baseline-cuda.json", tmp_path / "one.json")
    (tmp_path / "more").mkdir()
    shutil.copy(FIXTURES / "run-mps.json", tmp_path / "more" / "two.json")
    assert len(read_result_set(tmp_path).cases) == 10


def test_folder_without_result_files_is_rejected(tmp_path):
    with pytest.raises(CompareError, match="holds no .json result files"):
        read_result_set(tmp_path)


def test_published_figures_and_measurements_never_mix_in_one_set():
    with pytest.raises(CompareError, match="mixes published figures"):
        merge_result_sets([baseline_set(case()), published_set(case())], name="folder")


def test_newest_run_is_the_last_modified_run_file(tmp_path):
    older, newer = tmp_path / "Linux-CPython-3.11-64bit" / "0009_a.json", tmp_path / "Darwin-CPython" / "0001_b.json"
    for number, path in enumerate((older, newer)):
        path.parent.mkdir()
        path.write_text("{}")
        os.utime(path, (1_000_000 + number, 1_000_000 + number))
    assert find_newest_run(tmp_path) == newer


def test_newest_run_ignores_files_not_named_like_saved_runs(tmp_path):
    (tmp_path / "machine").mkdir()
    (tmp_path / "machine" / "notes.json").write_text("{}")
    assert find_newest_run(tmp_path) is None


def test_missing_runs_folder_has_no_newest_run(tmp_path):
    assert find_newest_run(tmp_path / "absent") is None


# --- joining -------------------------------------------------------------------------------------------


def test_ratio_is_b_time_over_a_time():
    assert time_ratio(0.0123, 0.0087) == pytest.approx(0.7073, abs=1e-4)


def test_cases_join_on_model_mode_dtype_batch_size_and_profile():
    a = run_set(case(time_s=0.1), case(dtype="bf16", time_s=0.08))
    b = baseline_set(case(time_s=0.02), case(dtype="bf16", time_s=0.01))
    rows = compare_result_sets(a, b).rows
    assert rows.set_index("dtype")["ratio_b_over_a"].to_dict() == pytest.approx({"bf16": 0.125, "fp32": 0.2})


def test_cases_of_different_batch_sizes_do_not_join():
    a = run_set(case(batch_size=32), case(batch_size=64))
    b = baseline_set(case(batch_size=32), case(batch_size=128))
    assert compare_result_sets(a, b).rows["side"].tolist() == ["both", "A only", "B only"]


def test_one_sided_rows_are_kept_with_a_note():
    a = run_set(case(), case(model="bert-base", mode="infer", batch_size=8))
    b = baseline_set(case())
    assert rows_where(compare_result_sets(a, b).rows, model="bert-base")["note"].tolist() == ["only in A"]


def test_cases_with_different_configs_appear_on_both_sides_unjoined():
    a = run_set(case(config_digest="aaaa"), case(dtype="bf16"))
    b = baseline_set(case(config_digest="bbbb"), case(dtype="bf16"))
    rows = rows_where(compare_result_sets(a, b).rows, dtype="fp32")
    assert rows["side"].tolist() == ["A only", "B only"]
    assert rows["note"].str.contains("config differs").all()


def test_summary_ratio_is_the_geometric_mean_of_the_joined_ratios():
    a = run_set(case(time_s=0.1), case(dtype="bf16", time_s=0.1), case(batch_size=64))
    b = baseline_set(case(time_s=0.4), case(dtype="bf16", time_s=0.025))
    assert geometric_mean_ratio(compare_result_sets(a, b).rows) == pytest.approx(1.0)


def test_same_result_set_twice_is_rejected():
    a = run_set(case())
    with pytest.raises(CompareError, match="A and B are the same result set"):
        compare_result_sets(a, a)


def test_identical_measurements_under_two_names_are_rejected():
    with pytest.raises(CompareError, match="hold identical measurements"):
        compare_result_sets(run_set(case(), name="x.json"), run_set(case(), name="copy.json"))


def test_two_sets_of_one_machine_and_device_are_rejected():
    a = run_set(case(time_s=0.1), machine="mac", name="monday.json")
    b = run_set(case(time_s=0.2), machine="mac", name="tuesday.json")
    with pytest.raises(CompareError, match="are both mps on mac: one side twice"):
        compare_result_sets(a, b)


def test_two_sets_of_one_machine_compare_when_allowed():
    a = run_set(case(time_s=0.1), machine="mac", name="monday.json")
    b = run_set(case(time_s=0.2), machine="mac", name="tuesday.json")
    assert compare_result_sets(a, b, allow_same_machine=True).rows["ratio_b_over_a"].tolist() == [2.0]


def test_no_joined_case_is_rejected_naming_the_field_without_common_values():
    a = run_set(case(mode="infer"))
    b = baseline_set(case(mode="train"))
    with pytest.raises(CompareError, match="no mode in common: A has infer, B has train"):
        compare_result_sets(a, b)


def test_sides_without_a_common_profile_are_rejected_saying_which_profile_to_run():
    a = run_set(case(profile="smoke", batch_size=4))
    b = baseline_set(case(profile="standard", batch_size=4))
    expected = "no profile in common: A has smoke, B has standard.*--perf-profile standard"
    with pytest.raises(CompareError, match=expected):
        compare_result_sets(a, b)


def test_a_smoke_run_meets_only_the_smoke_cases_of_a_reference_holding_both_profiles():
    comparison = compare_result_sets(read_result_set(FIXTURES / "run-mps-smoke.json"), read_result_set(TWO_PROFILES))
    rows = comparison.rows[["profile", "side", "ratio_b_over_a"]].to_dict("records")
    assert rows == [{"profile": "smoke", "side": "both", "ratio_b_over_a": pytest.approx(0.2)}]


def test_a_standard_run_meets_only_the_standard_cases_of_a_reference_holding_both_profiles():
    comparison = compare_result_sets(read_result_set(FIXTURES / "run-mps.json"), read_result_set(TWO_PROFILES))
    assert comparison.rows["profile"].unique().tolist() == ["standard"]
    assert summary_line(comparison).endswith("2 row(s) only in A, 2 only in B")


def test_cases_of_a_profile_the_other_side_lacks_are_counted_in_the_description():
    comparison = compare_result_sets(read_result_set(FIXTURES / "run-mps-smoke.json"), read_result_set(TWO_PROFILES))
    assert comparison.b.description.endswith("[smoke profile only; 5 standard case(s) left out]")


def test_no_joined_case_because_of_configs_says_so():
    with pytest.raises(CompareError, match="1 case\\(s\\) matched but were measured with different model configs"):
        compare_result_sets(run_set(case(config_digest="aaaa")), baseline_set(case(config_digest="bbbb")))


def test_a_case_twice_in_one_set_asks_for_one_device():
    a = run_set(case(device="mps"), case(device="cpu"))
    with pytest.raises(CompareError, match="twice.*--device-a mps or --device-a cpu"):
        compare_result_sets(a, baseline_set(case()))


def test_selecting_a_device_keeps_only_its_cases():
    a = run_set(case(device="mps"), case(device="cpu"))
    assert select_device(a, "mps", "A").devices == ("mps",)


def test_selecting_an_absent_device_names_the_ones_present():
    with pytest.raises(CompareError, match="holds no cuda cases; it holds: mps"):
        select_device(run_set(case()), "cuda", "A")


def test_preferred_device_is_the_one_accelerator_beside_the_cpu():
    assert preferred_device(run_set(case(device="mps"), case(device="cpu"))) == "mps"


def test_a_set_of_one_device_needs_no_preference():
    assert preferred_device(run_set(case(device="cpu"))) is None


def test_published_figure_joins_every_measured_case_of_its_model():
    a = run_set(case(batch_size=32), case(batch_size=64, mode="infer"), case(dtype="bf16"))
    b = published_set(case(mode=None, dtype=None, batch_size=None, time_s=0.0087))
    assert compare_result_sets(a, b).rows["side"].tolist() == ["both", "both", "both"]


def test_published_figure_joins_only_cases_matching_its_stated_mode():
    a = run_set(case(model="sd15-text2img", mode="infer", batch_size=1), case(model="sd15-text2img", batch_size=1))
    b = published_set(case(model="sd15-text2img", mode="infer", dtype=None, batch_size=None, time_s=0.85))
    assert rows_where(compare_result_sets(a, b).rows, side="both")["mode"].tolist() == ["infer"]


def test_published_figure_names_the_fields_it_does_not_state():
    b = published_set(case(mode=None, dtype=None, batch_size=None))
    note = compare_result_sets(run_set(case()), b).rows["note"].iloc[0]
    assert note == "B published, not stating mode, dtype, batch size, figure"


def test_most_specific_published_figure_wins():
    general = case(mode=None, dtype=None, batch_size=None, time_s=0.5)
    training = case(mode="train", dtype=None, batch_size=None, time_s=0.2)
    rows = compare_result_sets(run_set(case(time_s=0.1)), published_set(general, training)).rows
    assert rows_where(rows, side="both")["time_b_s"].tolist() == [0.2]


def test_published_side_a_keeps_the_ratio_b_over_a():
    a = published_set(case(mode=None, dtype=None, batch_size=None, time_s=0.0123), device="mps")
    rows = compare_result_sets(a, baseline_set(case(time_s=0.0087))).rows
    assert rows["ratio_b_over_a"].tolist() == pytest.approx([0.7073], abs=1e-4)


def test_a_compiled_case_joins_the_same_compile_mode_and_never_eager(compiled_comparison):
    joined = rows_where(compiled_comparison.rows, side="both")
    ratios = {(r.model, r.compile): r.ratio_b_over_a for r in joined.itertuples()}
    assert ratios == pytest.approx({
        ("bert-base", "eager"): 0.8, ("bert-base", "reduce-overhead"): 0.5,
        ("resnet18", "eager"): 0.5, ("resnet18", "inductor"): 0.25,
    })


def test_a_compile_mode_only_one_side_ran_stays_one_sided(compiled_comparison):
    one_sided = rows_where(compiled_comparison.rows, model="resnet18").query("side != 'both'")
    assert dict(zip(one_sided["compile"], one_sided["note"], strict=True)) == {
        "reduce-overhead": "only in B", "cuda-graph": "only in A",
    }


def test_a_case_that_does_not_name_its_compile_mode_is_eager():
    assert "compile" not in case()
    rows = compare_result_sets(run_set(case()), baseline_set(case(compile="eager"))).rows
    assert rows[["compile", "side"]].to_dict("records") == [{"compile": "eager", "side": "both"}]


def test_compile_modes_of_one_case_are_different_cases_of_a_set():
    a = run_set(case(time_s=0.1), case(compile="inductor", time_s=0.05))
    b = baseline_set(case(time_s=0.02), case(compile="inductor", time_s=0.02))
    assert compare_result_sets(a, b).rows["ratio_b_over_a"].tolist() == pytest.approx([0.2, 0.4])


def test_joined_rows_list_eager_before_the_compiled_modes(compiled_comparison):
    resnet = rows_where(compiled_comparison.rows, model="resnet18")
    assert resnet["compile"].tolist() == ["eager", "inductor", "reduce-overhead", "cuda-graph"]


def test_a_compiled_case_twice_in_one_set_is_named_with_its_compile_mode():
    a = run_set(case(compile="inductor", device="mps"), case(compile="inductor", device="cpu"))
    with pytest.raises(CompareError, match="holds the case resnet18 train fp32 bs32 standard inductor twice"):
        compare_result_sets(a, baseline_set(case(compile="inductor")))


def test_no_joined_case_because_the_compile_modes_differ_says_so():
    with pytest.raises(CompareError, match="no compile mode in common: A has inductor, B has eager"):
        compare_result_sets(run_set(case(compile="inductor")), baseline_set(case()))


def test_published_figure_without_a_compile_mode_joins_only_eager_cases():
    a = run_set(case(time_s=0.1), case(compile="inductor", time_s=0.05))
    b = published_set(case(mode=None, dtype=None, batch_size=None, time_s=0.0087))
    rows = compare_result_sets(a, b).rows
    assert dict(zip(rows["compile"], rows["side"], strict=True)) == {"eager": "both", "inductor": "A only"}


def test_scaled_down_smoke_cases_never_join_the_articles_figures():
    with pytest.raises(CompareError, match="no profile in common"):
        compare_result_sets(read_result_set(FIXTURES / "run-mps-smoke.json"), read_result_set(ARTICLE_CUDA))


# --- figures: which time each side holds ------------------------------------------------------------------


def test_a_baseline_entry_says_which_figure_its_time_is_and_an_older_cuda_entry_is_latency():
    cases = baseline_set(case(figure="step"), case(model="bert-base")).cases
    assert dict(zip(cases["model"], cases["figure"], strict=True)) == {"resnet18": "step", "bert-base": "latency"}


def test_a_cpu_baseline_entry_without_a_figure_holds_the_step_figure():
    assert baseline_set(case(), device="cpu").cases["figure"].tolist() == ["step"]


def test_a_run_says_which_figure_its_time_is_and_an_older_run_is_read_as_the_store_reads_it():
    cases = run_set(case(figure="step"), case(model="bert-base"), device="cuda").cases
    assert dict(zip(cases["model"], cases["figure"], strict=True)) == {"resnet18": "step", "bert-base": "latency"}


def test_a_run_with_an_unknown_figure_is_refused_naming_the_case():
    with pytest.raises(CompareError, match=r"run.json, benchmark mps-fp32-resnet18-bs32-train: 'figure' must be one "
                                           r"of step, latency, got 'throughput'"):
        run_set(case(figure="throughput"))


def test_a_published_figure_states_no_figure():
    assert published_set(case()).cases["figure"].tolist() == [None]


def test_a_row_setting_a_step_time_against_a_latency_time_says_so_in_its_note_and_the_summary():
    comparison = compare_result_sets(run_set(case(figure="step"), device="cpu"), baseline_set(case()))
    row = comparison.rows.iloc[0]
    assert (row["figure_a"], row["figure_b"], row["note"]) == ("step", "latency", "figures differ: A step, B latency")
    assert "1 of them set a step time against a latency time, 0 hold a figure a side does not state" in (
        summary_line(comparison)
    )


def test_rows_of_one_figure_carry_no_figure_note():
    comparison = compare_result_sets(run_set(case(figure="step"), device="cpu"), baseline_set(case(figure="step")))
    assert comparison.rows["note"].tolist() == [""]
    assert "each with the same figure on both sides" in summary_line(comparison)


def test_a_published_figure_joined_with_a_measured_one_names_the_figure_among_what_it_does_not_state():
    comparison = compare_result_sets(run_set(case(figure="step")), published_set(case()))
    assert comparison.rows["note"].tolist() == ["B published, not stating figure"]
    assert "0 of them set a step time against a latency time, 1 hold a figure a side does not state" in (
        summary_line(comparison)
    )


def test_the_table_shows_each_sides_figure_on_every_row():
    a = run_set(case(figure="step"), case(model="bert-base", figure="step"), device="cpu")
    table = display_table(compare_result_sets(a, baseline_set(case())))
    cells = dict(zip(table["model"], zip(table["A figure"], table["B figure"], strict=True), strict=True))
    assert cells == {"resnet18": ("step", "latency"), "bert-base": ("step", "-")}


def test_a_published_side_shows_its_figure_as_not_stated():
    table = display_table(compare_result_sets(run_set(case(figure="step")), published_set(case())))
    assert (table["A figure"].iloc[0], table["B figure"].iloc[0]) == ("step", "?")


def test_the_csv_carries_both_sides_figures():
    csv = render_csv(compare_result_sets(run_set(case(figure="step"), device="cpu"), baseline_set(case())))
    row = next(DictReader(io.StringIO(csv)))
    assert (row["figure_a"], row["figure_b"]) == ("step", "latency")


# --- the article's published figures ------------------------------------------------------------------


def test_article_reference_reproduces_the_published_ratios():
    comparison = compare_result_sets(read_result_set(ARTICLE_MPS), read_result_set(ARTICLE_CUDA))
    ratios = comparison.rows.set_index("model")["ratio_b_over_a"].round(2).to_dict()
    assert ratios == {"resnet18": 0.71, "bert-base": 0.70, "sd15-text2img": 0.71}


def test_article_reference_per_batch_times_are_the_published_milliseconds():
    comparison = compare_result_sets(read_result_set(ARTICLE_MPS), read_result_set(ARTICLE_CUDA))
    times_ms = comparison.rows.set_index("model")[["time_a_s", "time_b_s"]] * 1e3
    assert times_ms.round(1).to_dict("index") == {
        "bert-base": {"time_a_s": 45.6, "time_b_s": 32.1},
        "resnet18": {"time_a_s": 12.3, "time_b_s": 8.7},
        "sd15-text2img": {"time_a_s": 1200.0, "time_b_s": 850.0},
    }


@pytest.mark.parametrize("path", [ARTICLE_MPS, ARTICLE_CUDA], ids=["mps", "cuda"])
def test_article_reference_files_are_marked_published(path):
    result_set = read_result_set(path)
    assert result_set.published and result_set.description.startswith("published figures, not measurements")


def test_a_measured_run_joins_the_article_on_model_and_stated_mode():
    comparison = compare_result_sets(read_result_set(FIXTURES / "run-mps.json"), read_result_set(ARTICLE_CUDA))
    assert (comparison.rows["side"] == "both").sum() == 5


# --- rendering -----------------------------------------------------------------------------------------


@pytest.fixture
def compiled_comparison():
    run = read_result_set(FIXTURES / "run-cuda-compiled.json")
    return compare_result_sets(run, read_result_set(FIXTURES / "baseline-cuda-compiled.json"))


@pytest.fixture
def fixture_comparison():
    run, baseline = read_result_set(FIXTURES / "run-mps.json"), read_result_set(FIXTURES / "baseline-cuda.json")
    return compare_result_sets(run, baseline)


def test_table_shows_times_in_milliseconds_to_three_figures(fixture_comparison):
    table = display_table(fixture_comparison)
    bert = table[(table["model"] == "bert-base") & (table["batch"] == "8")].iloc[0]
    assert (bert["A ms"], bert["B ms"], bert["B/A"]) == ("50.0", "25.0", "0.50")


def test_table_of_eager_cases_has_no_compile_column(fixture_comparison):
    assert "compile" not in display_table(fixture_comparison).columns
    assert not any(line.startswith("compile =") for line in legend_lines(fixture_comparison))


def test_table_shows_the_compile_mode_where_a_row_is_compiled(compiled_comparison):
    table = display_table(compiled_comparison)
    columns = list(table.columns)
    assert columns[columns.index("profile") + 1] == "compile"
    assert set(table["compile"]) == {"eager", "inductor", "reduce-overhead", "cuda-graph"}


def test_legend_says_cases_join_only_the_same_compile_mode(compiled_comparison):
    assert any("a case joins only the same compile mode" in line for line in legend_lines(compiled_comparison))


def test_table_marks_unstated_fields_with_a_question_mark():
    comparison = compare_result_sets(read_result_set(ARTICLE_MPS), read_result_set(ARTICLE_CUDA))
    assert display_table(comparison)["batch"].unique().tolist() == ["?"]


def test_ratio_below_a_hundredth_keeps_two_significant_figures():
    comparison = compare_result_sets(run_set(case(time_s=1.0), device="cpu"), baseline_set(case(time_s=0.0031)))
    assert display_table(comparison)["B/A"].tolist() == ["0.0031"]
    assert summary_line(comparison).startswith(
        "geometric mean of B/A time over 1 joined row(s): 0.0031 (A runs at 0.31% of B's speed)"
    )


@pytest.mark.parametrize(
    ("ratio", "text"),
    [(0.7073, "0.71"), (1.4, "1.40"), (0.031, "0.031"), (0.00312, "0.0031"), (3.1e-5, "3.1e-05"), (None, "-")],
)
def test_time_ratio_has_two_decimals_and_two_significant_figures_below_a_tenth(ratio, text):
    assert format_time_ratio(ratio) == text


def test_legend_words_the_ratio_from_the_devices_compared():
    comparison = compare_result_sets(run_set(case(time_s=1.0), device="cpu", machine="vm"), baseline_set(case()))
    legend = legend_lines(comparison)[0]
    assert legend.startswith("B/A = B's time / A's time per batch (cuda time on fixture-h200 / cpu time on vm)")
    assert "MPS" not in legend


def test_legend_of_mps_against_cuda_recalls_the_articles_ratio(fixture_comparison):
    assert "; the source article's CUDA time / MPS time)" in legend_lines(fixture_comparison)[0]


def test_csv_keeps_seconds(fixture_comparison):
    assert "bert-base,infer,fp32,8,standard,eager,both,mps,cuda,0.05,0.025,0.5," in render_csv(fixture_comparison)


def test_summary_line_gives_the_geometric_mean_and_one_sided_counts(fixture_comparison):
    # Joined ratios 0.5, 0.125, 0.2: geometric mean 0.2321.
    assert summary_line(fixture_comparison) == (
        "geometric mean of B/A time over 3 joined row(s): 0.23 (A runs at 23% of B's speed); "
        "each with the same figure on both sides; 2 row(s) only in A, 2 only in B"
    )


def test_markdown_names_both_sides(fixture_comparison):
    markdown = render_markdown(fixture_comparison)
    assert "- **A**: mps on fixture-apple-m2-max" in markdown and "- **B**: cuda on fixture-nvidia-h200" in markdown


def test_chart_data_is_the_geometric_mean_per_model_and_dtype():
    a = run_set(case(time_s=0.1), case(batch_size=64, time_s=0.1))
    b = baseline_set(case(time_s=0.4), case(batch_size=64, time_s=0.025))
    data = ratio_chart_data(compare_result_sets(a, b).rows)
    assert data.to_dict("records") == [
        {"model": "resnet18", "dtype": "fp32", "compile": "eager", "ratio_b_over_a": 1.0, "rows": 2}
    ]


def test_chart_data_keeps_compile_modes_apart(compiled_comparison):
    data = ratio_chart_data(compiled_comparison.rows)
    resnet = data[data["model"] == "resnet18"].set_index("compile")["ratio_b_over_a"].to_dict()
    assert resnet == pytest.approx({"eager": 0.5, "inductor": 0.25})


def test_chart_is_written_as_png(fixture_comparison, tmp_path):
    pytest.importorskip("matplotlib")
    path = plot_ratio_chart(fixture_comparison, tmp_path / "chart.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_without_matplotlib_says_how_to_install_it(fixture_comparison, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(PlottingUnavailable, match=r"pip install 'perfsuite\[plot\]'"):
        plot_ratio_chart(fixture_comparison, tmp_path / "chart.png")


# --- the command ---------------------------------------------------------------------------------------


def test_command_prints_the_table_and_writes_markdown_csv_and_png(tmp_path, capsys):
    status = main([str(ARTICLE_MPS), str(ARTICLE_CUDA), "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    assert "geometric mean of B/A time over 3 joined row(s): 0.71" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comparison.csv", "comparison.md", "comparison.png"]


def test_command_without_matplotlib_still_writes_the_tables(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    status = main([str(ARTICLE_MPS), str(ARTICLE_CUDA), "--output-dir", str(tmp_path)])
    assert (status, "no chart" in capsys.readouterr().err) == (0, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comparison.csv", "comparison.md"]


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ("empty.json", "baseline-cuda.json", "empty.json: is empty"),
        ("not-a-result.json", "baseline-cuda.json", "not a result file"),
        ("plain-pytest-benchmark.json", "baseline-cuda.json", "no perfsuite facts"),
        ("baseline-future-schema.json", "run-mps.json", "schema_version 4"),
        ("run-mps-smoke.json", "baseline-cuda.json", "nothing to compare"),
        ("run-mps.json", "run-mps.json", "the same result set"),
        ("run-cpu-and-mps.json", "baseline-cuda.json", "--device-a mps"),
    ],
    ids=["empty", "wrong-kind", "not-perfsuite", "future-schema", "no-overlap", "same-file", "two-devices"],
)
def test_command_rejects_bad_input_with_a_message_and_status_2(a, b, message, tmp_path, capsys):
    status = main([str(FIXTURES / a), str(FIXTURES / b), "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert (status, message in err, "Traceback" in err) == (2, True, False)


def test_command_defaults_to_the_newest_run_against_the_cuda_baselines(tmp_path, capsys):
    runs, baselines = tmp_path / ".benchmarks", tmp_path / "baselines"
    (runs / "Darwin-CPython-3.11-arm-64bit").mkdir(parents=True)
    shutil.copy(FIXTURES / "run-cpu-and-mps.json", runs / "Darwin-CPython-3.11-arm-64bit" / "0001_run.json")
    (baselines / "cuda").mkdir(parents=True)
    shutil.copy(FIXTURES / "baseline-cuda.json", baselines / "cuda" / "fixture-nvidia-h200.json")
    status = main(["--runs-dir", f"file://{runs}", "--baselines-dir", str(baselines), "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    assert "[mps cases only]" in out and "geometric mean of B/A time over 1 joined row(s): 0.20" in out


def test_command_defaults_compare_a_smoke_run_with_the_smoke_cases_of_the_cuda_baselines(tmp_path, capsys):
    runs, baselines = tmp_path / ".benchmarks", tmp_path / "baselines"
    (runs / "Linux-CPython-3.11-64bit").mkdir(parents=True)
    shutil.copy(FIXTURES / "run-mps-smoke.json", runs / "Linux-CPython-3.11-64bit" / "0001_run.json")
    (baselines / "cuda").mkdir(parents=True)
    shutil.copy(TWO_PROFILES, baselines / "cuda" / "fixture-nvidia-h200.json")
    status = main(["--runs-dir", str(runs), "--baselines-dir", str(baselines), "--output-dir", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert (status, "over 1 joined row(s): 0.20" in out, "0 row(s) only in A, 0 only in B" in out) == (0, True, True)


def test_command_joins_compiled_cases_of_two_machines(tmp_path, capsys):
    run, baseline = FIXTURES / "run-cuda-compiled.json", FIXTURES / "baseline-cuda-compiled.json"
    status = main([str(run), str(baseline), "--output-dir", str(tmp_path), "--no-chart"])
    out = capsys.readouterr().out
    assert status == 0
    assert "over 4 joined row(s): 0.47" in out and "1 row(s) only in A, 1 only in B" in out


def test_command_default_b_of_several_cuda_machine_files_is_the_one_recorded_last(tmp_path, capsys):
    cuda = tmp_path / "baselines" / "cuda"
    cuda.mkdir(parents=True)
    older = baseline_document(case(time_s=0.05), machine="fixture-h200")
    newer = baseline_document(case(time_s=0.02, figure="step"), machine="fixture-h100")
    newer["entries"]["cuda-fp32-resnet18-bs32-train"]["recorded_at"] = "2026-12-06T05:00:00Z"
    (cuda / "fixture-h200.json").write_text(json.dumps(older))
    (cuda / "fixture-h100.json").write_text(json.dumps(newer))
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"machine_info": {"perfsuite": {"machine_slug": "fixture-mac"}}, "benchmarks": [
        {"param": "x", "extra_info": {**case(), "device": "mps", "figure": "step"}, "stats": {"median": 0.1}}]}))
    status = main([str(run), "--baselines-dir", str(tmp_path / "baselines"), "--output-dir", str(tmp_path / "out"),
                   "--no-chart"])
    out = capsys.readouterr().out
    assert status == 0
    assert f"the CUDA machine file recorded last in {cuda}/; also there: fixture-h200.json" in out
    assert "over 1 joined row(s): 0.20" in out and "each with the same figure on both sides" in out


def test_command_without_cuda_baselines_asks_for_b(tmp_path, capsys):
    status = main([str(FIXTURES / "run-mps.json"), "--baselines-dir", str(tmp_path), "--output-dir", str(tmp_path)])
    assert (status, "there are none; name B" in capsys.readouterr().err) == (2, True)


def test_command_without_a_saved_run_takes_this_machines_accelerator_baseline(tmp_path, capsys, monkeypatch):
    mac = {"accelerator_name": "Apple M2 Max", "cpu_model": "Apple M2 Max"}
    monkeypatch.setattr("perfsuite.run.devices.machine_fingerprint", lambda: mac)
    baselines = tmp_path / "baselines"
    for device, time_s in (("mps", 0.1), ("cpu", 1.0), ("cuda", 0.02)):
        (baselines / device).mkdir(parents=True)
        slug = "nvidia-h200" if device == "cuda" else "apple-m2-max"
        document = baseline_document(case(time_s=time_s), device=device, machine=slug)
        (baselines / device / f"{slug}.json").write_text(json.dumps(document))
    status = main(["--runs-dir", str(tmp_path / "no-runs"), "--baselines-dir", str(baselines),
                   "--output-dir", str(tmp_path / "out")])
    assert (status, "over 1 joined row(s): 0.20" in capsys.readouterr().out) == (0, True)


# --- files that are not result files ------------------------------------------------------------------------


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(tmp_path):
    link = tmp_path / "run.json"
    link.symlink_to("/dev/zero")
    done = run_with_memory_cap(
        f"from perfsuite.cli import main\nraise SystemExit(main(['compare', {str(link)!r}, '--no-chart']))"
    )
    assert f"{link}: is a character device (/dev/zero), not a regular file" in done.stderr
    assert done.returncode == 2


def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    with fails_after(5):
        assert main([str(fifo), str(ARTICLE_CUDA), "--output-dir", str(tmp_path / "out")]) == 2
    assert f"{fifo}: is a FIFO (named pipe), not a regular file" in capsys.readouterr().err


def test_a_result_file_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    from perfsuite.store import jsonfile

    monkeypatch.setattr(jsonfile, "MAX_JSON_BYTES", 1024)
    big = tmp_path / "run.json"
    big.write_text(json.dumps({"benchmarks": [], "padding": "x" * 2048}), encoding="utf-8")
    with pytest.raises(CompareError, match=r"run\.json: is 2\d\d\d bytes, more than the 1024 bytes"):
        read_result_set(big)


def test_a_result_file_with_a_duplicate_key_is_refused_naming_it(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"benchmarks": [], "machine_info": {}, "benchmarks": []}', encoding="utf-8")
    with pytest.raises(CompareError, match=r"run\.json: holds the key 'benchmarks' twice in the top-level object"):
        read_result_set(path)


def test_a_fifo_among_a_folders_result_files_is_refused_not_skipped(tmp_path):
    shutil.copy(FIXTURES / "baseline-cuda.json", tmp_path / "one.json")
    os.mkfifo(tmp_path / "two.json")
    with fails_after(5), pytest.raises(CompareError, match=r"two\.json: is a FIFO \(named pipe\), not a regular file"):
        read_result_set(tmp_path)
