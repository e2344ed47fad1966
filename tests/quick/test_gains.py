"""The gains report: bf16/fp16 over fp32, checkpointing's memory and time, channels_last, DataLoader workers."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from perfsuite.analyse.gains import (
    GainsError,
    Results,
    best_worker_counts,
    channels_last_gains,
    checkpoint_gains,
    compile_gains,
    gains,
    loader_throughput,
    precision_gains,
    results_from_document,
)
from perfsuite.cli import main as cli_main
from perfsuite.render.gains import render


def main(argv):
    return cli_main(["gains", *argv])

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gains" / "run-mps-and-loader.json"
COMPILED = FIXTURE.with_name("run-cuda-compiled.json")
GiB = 2**30


@pytest.fixture(scope="module")
def fixture_results() -> Results:
    return results_from_document(json.loads(FIXTURE.read_text()), str(FIXTURE))


@pytest.fixture(scope="module")
def compiled_results() -> Results:
    return results_from_document(json.loads(COMPILED.read_text()), str(COMPILED))


# --- small documents built in the tests (invented figures) ---------------------------------------------


def model(dtype="fp32", mode="train", batch_size=32, samples_per_s=100.0, model_name="resnet18", device="mps",
          **extra):
    compiled = f"-{extra['compile']}" if extra.get("compile", "eager") != "eager" else ""
    benchmark_id = f"{device}-{dtype}-{model_name}-bs{batch_size}-{mode}{compiled}"
    facts = {"device": device, "dtype": dtype, "model": model_name, "batch_size": batch_size, "mode": mode,
             "profile": "standard", "samples_per_s": samples_per_s, "memory_figure": "mps_driver_allocated_bytes",
             "memory_bytes": GiB, "config_digest": "same", **extra}
    return {"param": benchmark_id, "extra_info": facts, "stats": {"median": batch_size / samples_per_s}}


def loader(num_workers=0, samples_per_s=100.0, storage="memory", **extra):
    benchmark_id = f"dataloader-cpu-{storage}-workers{num_workers}-nopin"
    facts = {"kind": "dataloader", "device": "cpu", "profile": "standard", "storage": storage,
             "num_workers": num_workers, "pin_memory": False, "batch_size": 64, "sample_shape": [3, 224, 224],
             "samples_per_s": samples_per_s, "startup_s": 0.5, **extra}
    return {"param": benchmark_id, "extra_info": facts, "stats": {"median": 2048 / samples_per_s}}


def results(*benchmarks) -> Results:
    return results_from_document({"benchmarks": list(benchmarks)}, "run.json")


def rows_with_speedup(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["speedup"].notna()]


def row(table: pd.DataFrame, **fields) -> pd.Series:
    selected = table
    for name, value in fields.items():
        selected = selected[selected[name] == value]
    assert len(selected) == 1, f"expected one row with {fields}, found {len(selected)}"
    return selected.iloc[0]


# --- reading ------------------------------------------------------------------------------------------


def test_model_and_dataloader_rows_are_told_apart(fixture_results):
    assert len(fixture_results.models) == 12
    assert len(fixture_results.loaders) == 6


def test_a_benchmark_without_perfsuite_facts_is_ignored_by_name(fixture_results):
    assert fixture_results.ignored == ("test_sort_speed",)


def test_a_document_without_a_benchmarks_list_is_not_a_pytest_benchmark_file():
    with pytest.raises(GainsError, match=r"^x\.json: not a pytest-benchmark file: found a JSON object with keys entr"):
        results_from_document({"entries": {}}, "x.json")


def test_a_run_without_benchmarks_is_refused():
    with pytest.raises(GainsError, match="holds no benchmarks"):
        results_from_document({"benchmarks": []}, "x.json")


def test_a_run_with_no_perfsuite_facts_at_all_is_refused_with_an_example():
    plain = {"param": "test_sort", "extra_info": {}, "stats": {"median": 0.1}}
    with pytest.raises(GainsError, match=r"none of its 1 benchmark\(s\) carries perfsuite's facts .*e\.g\. test_sort"):
        results_from_document({"benchmarks": [plain]}, "x.json")


def test_a_bad_dataloader_fact_names_the_benchmark_and_field():
    with pytest.raises(GainsError, match=r"dataloader-cpu-memory-workers-1-nopin: .*'num_workers'.* >= 0, got -1"):
        results(loader(num_workers=-1))


def test_a_bad_model_fact_names_the_benchmark():
    with pytest.raises(GainsError, match=r"benchmark mps-fp32-resnet18-bs0-train: 'batch_size'"):
        results(model(batch_size=0))


# --- precision ----------------------------------------------------------------------------------------


def test_bf16_speedup_is_its_samples_per_s_over_fp32s(fixture_results):
    table = precision_gains(fixture_results.models)
    assert row(table, model="resnet18", mode="train", dtype="bf16")["speedup"] == pytest.approx(1.30)
    assert row(table, model="resnet18", mode="infer", dtype="bf16")["speedup"] == pytest.approx(1.50)


def test_the_articles_bf16_claim_stands_beside_training_rows_only(fixture_results):
    table = precision_gains(fixture_results.models)
    assert row(table, model="resnet18", mode="train", dtype="bf16")["article_speedup"] == 1.30
    assert pd.isna(row(table, model="resnet18", mode="infer", dtype="bf16")["article_speedup"])


def test_fp16_is_compared_with_fp32_like_bf16():
    table = precision_gains(results(model("fp32", samples_per_s=100.0), model("fp16", samples_per_s=180.0)).models)
    assert row(table, dtype="fp16")["speedup"] == pytest.approx(1.8)


def test_bf16_and_fp16_of_one_case_both_meet_its_fp32_row():
    table = precision_gains(results(
        model("fp32", samples_per_s=100.0), model("bf16", samples_per_s=130.0), model("fp16", samples_per_s=150.0),
    ).models)
    assert table.set_index("dtype")["speedup"].to_dict() == pytest.approx({"bf16": 1.3, "fp16": 1.5})


def test_mixed_precision_meets_fp32_of_its_own_compile_mode():
    table = precision_gains(results(
        model("fp32", samples_per_s=100.0), model("bf16", samples_per_s=130.0),
        model("fp32", samples_per_s=200.0, compile="inductor"), model("bf16", samples_per_s=300.0, compile="inductor"),
    ).models)
    assert table.set_index("compile")["speedup"].to_dict() == pytest.approx({"eager": 1.3, "inductor": 1.5})


def test_a_compiled_mixed_precision_row_never_meets_an_eager_fp32_row():
    table = precision_gains(results(model("fp32"), model("bf16", compile="inductor")).models)
    assert row(table, dtype="bf16")["note"] == "no fp32 run to compare with"


def test_a_mixed_precision_row_without_fp32_is_listed_as_such(fixture_results):
    table = precision_gains(fixture_results.models)
    fp16 = row(table, model="sd15-unet", batch_size=1)
    assert fp16["note"] == "no fp32 run to compare with" and pd.isna(fp16["speedup"])


def test_an_fp32_row_whose_model_and_mode_ran_mixed_precision_at_another_batch_size_is_listed(fixture_results):
    table = precision_gains(fixture_results.models)
    assert row(table, model="sd15-unet", batch_size=2)["note"] == "no bf16 or fp16 run to compare with"


def test_fp32_rows_with_no_mixed_precision_at_any_batch_size_are_counted_not_shown(fixture_results):
    result = gains(fixture_results)
    assert "bert-base" not in set(result.precision["model"])
    assert result.left_out["precision"].startswith("6 fp32 row(s) with no bf16 or fp16 run at any batch size")


def test_rows_of_different_model_configs_are_not_compared():
    table = precision_gains(results(model("fp32", config_digest="aaa"), model("bf16", config_digest="bbb")).models)
    only = row(table, dtype="bf16")
    assert pd.isna(only["speedup"])
    assert only["note"] == "model configs differ (config_digest aaa vs bbb): not compared"


def test_a_case_measured_twice_is_refused_as_ambiguous():
    with pytest.raises(GainsError, match=r"appears more than once \(mps-bf16-resnet18-bs32-train, "):
        precision_gains(results(model("fp32"), model("bf16"), model("bf16")).models)


def test_no_mixed_precision_rows_give_an_empty_table():
    assert precision_gains(results(model("fp32")).models).empty


# --- checkpointing ------------------------------------------------------------------------------------


def test_checkpointing_saves_the_difference_of_the_memory_figures(fixture_results):
    paired = row(checkpoint_gains(fixture_results.models), batch_size=64)
    assert paired["memory_saved_bytes"] == GiB
    assert paired["memory_saved_fraction"] == pytest.approx(0.25)


def test_checkpointing_time_paid_is_the_extra_time_per_sample(fixture_results):
    paired = row(checkpoint_gains(fixture_results.models), batch_size=64)
    assert paired["time_paid_fraction"] == pytest.approx(200 / 160 - 1)


def test_memory_is_not_compared_across_different_memory_figures():
    table = checkpoint_gains(results(
        model(mode="train", samples_per_s=100.0),
        model(mode="train-checkpoint", samples_per_s=80.0, memory_figure="mps_current_allocated_bytes"),
    ).models)
    only = row(table, batch_size=32)
    assert pd.isna(only["memory_saved_bytes"]) and only["time_paid_fraction"] == pytest.approx(0.25)
    assert only["note"].startswith("memory figures differ (mps_driver_allocated_bytes vs mps_current_allocated")


def test_checkpointing_meets_train_of_its_own_compile_mode():
    table = checkpoint_gains(results(
        model(mode="train", samples_per_s=100.0), model(mode="train-checkpoint", samples_per_s=80.0),
        model(mode="train", samples_per_s=200.0, compile="inductor"),
        model(mode="train-checkpoint", samples_per_s=100.0, compile="inductor"),
    ).models)
    assert table.set_index("compile")["time_paid_fraction"].to_dict() == pytest.approx({"eager": 0.25, "inductor": 1.0})


def test_a_checkpoint_row_without_its_train_row_is_listed_as_such(fixture_results):
    alone = row(checkpoint_gains(fixture_results.models), batch_size=128)
    assert alone["note"] == "no train run to compare with"


# --- channels_last -------------------------------------------------------------------------------------


def test_channels_last_speedup_is_over_the_plain_mode(fixture_results):
    table = channels_last_gains(fixture_results.models)
    assert row(table, mode="train", dtype="fp32")["speedup"] == pytest.approx(1.25)
    assert row(table, mode="infer", dtype="fp32", batch_size=64)["speedup"] == pytest.approx(0.80)


def test_channels_last_meets_the_plain_mode_of_its_own_compile_mode():
    table = channels_last_gains(results(
        model(mode="infer", samples_per_s=100.0, compile="cuda-graph"),
        model(mode="infer-channels-last", samples_per_s=120.0, compile="cuda-graph"),
        model(mode="infer", samples_per_s=50.0),
    ).models)
    assert row(table, compile="cuda-graph")["speedup"] == pytest.approx(1.2)


def test_a_channels_last_row_without_its_plain_row_is_listed_as_such(fixture_results):
    alone = row(channels_last_gains(fixture_results.models), mode="infer", batch_size=128)
    assert alone["note"] == "no plain run to compare with"


# --- compile --------------------------------------------------------------------------------------------


def test_compile_speedup_is_the_compiled_samples_per_s_over_eagers(compiled_results):
    table = rows_with_speedup(compile_gains(compiled_results.models))
    assert table.set_index("compile")["speedup"].to_dict() == pytest.approx(
        {"inductor": 0.90, "reduce-overhead": 2.00, "cuda-graph": 1.50}
    )


def test_an_eager_row_that_does_not_name_its_compile_mode_is_the_eager_partner(compiled_results):
    eager_facts = json.loads(COMPILED.read_text())["benchmarks"][0]["extra_info"]
    assert "compile" not in eager_facts
    assert row(compile_gains(compiled_results.models), compile="reduce-overhead")["eager_samples_per_s"] == 1000.0


def test_compile_rows_are_listed_eager_first_then_in_the_declared_order(compiled_results):
    resnet_infer = compile_gains(compiled_results.models).query("model == 'resnet18' and mode == 'infer'")
    assert resnet_infer["compile"].tolist() == ["inductor", "reduce-overhead", "cuda-graph"]


def test_a_compiled_row_slower_than_eager_says_compilation_did_not_pay(compiled_results):
    inductor = row(compile_gains(compiled_results.models), model="resnet18", mode="infer", compile="inductor")
    assert inductor["note"] == "slower than eager: compilation did not pay"


def test_a_compiled_row_faster_than_eager_has_no_note(compiled_results):
    assert row(compile_gains(compiled_results.models), compile="reduce-overhead")["note"] == ""


def test_the_compile_table_keeps_the_first_call_graph_breaks_and_both_gpu_busy_fractions(compiled_results):
    reduce_overhead = row(compile_gains(compiled_results.models), compile="reduce-overhead")
    assert (reduce_overhead["compile_first_call_s"], reduce_overhead["compile_graph_breaks"]) == (5.0, 0)
    assert (reduce_overhead["eager_gpu_busy_fraction"], reduce_overhead["gpu_busy_fraction"]) == (0.5, 0.9)


def test_graph_break_reasons_are_kept(compiled_results):
    bert = row(compile_gains(compiled_results.models), model="bert-base", compile="inductor")
    assert (bert["compile_graph_breaks"], bert["compile_graph_break_reasons"]) == (
        2, "Dynamic control flow is not supported (x2)"
    )


def test_compiled_and_eager_rows_pair_although_their_config_digests_differ():
    table = compile_gains(results(
        model(samples_per_s=100.0, config_digest="eager-digest", parameter_count=10, flops_per_step=1000),
        model(samples_per_s=150.0, config_digest="inductor-digest", parameter_count=10, flops_per_step=1000,
              compile="inductor"),
    ).models)
    assert row(table, compile="inductor")["speedup"] == pytest.approx(1.5)


def test_compiled_and_eager_rows_of_different_parameter_counts_are_not_compared(compiled_results):
    train = row(compile_gains(compiled_results.models), model="resnet18", mode="train")
    assert pd.isna(train["speedup"])
    assert train["note"] == "model differs (parameter_count 11689512 vs 11689513): not compared"


def test_compiled_and_eager_rows_of_different_flops_per_step_are_not_compared():
    table = compile_gains(results(
        model(samples_per_s=100.0, flops_per_step=1000),
        model(samples_per_s=150.0, flops_per_step=2000, compile="inductor"),
    ).models)
    assert row(table, compile="inductor")["note"] == "model differs (flops_per_step 1000 vs 2000): not compared"


def test_a_compiled_row_without_its_eager_row_is_listed_as_such(compiled_results):
    bert = row(compile_gains(compiled_results.models), model="bert-base", batch_size=32)
    assert bert["note"] == "no eager run to compare with" and pd.isna(bert["speedup"])


def test_an_eager_row_whose_case_ran_compiled_at_another_batch_size_is_listed(compiled_results):
    assert row(compile_gains(compiled_results.models), model="bert-base", batch_size=16)["note"] == (
        "no compiled run to compare with"
    )


def test_eager_rows_with_no_compiled_run_at_any_batch_size_are_counted_not_shown(compiled_results):
    result = gains(compiled_results)
    assert result.left_out["compile"] == (
        "1 eager row(s) with no compiled run at any batch size are not shown (bert-base)"
    )


def test_no_compiled_rows_give_an_empty_compile_table(fixture_results):
    assert compile_gains(fixture_results.models).empty


def test_compile_legend_names_the_rows_where_compilation_did_not_pay(compiled_results):
    text = render(gains(compiled_results), "text", ["compile"])
    assert "Compilation did not pay in 1 of 3 compared row(s): resnet18 infer bf16 bs32 inductor (0.90x)." in text


def test_compile_legend_says_when_compilation_paid_everywhere():
    text = render(gains(results(model(samples_per_s=100.0), model(samples_per_s=150.0, compile="inductor"))),
                  "text", ["compile"])
    assert "Compilation paid in all 1 compared row(s)." in text


def test_compile_text_shows_speedup_first_call_and_gpu_busy(compiled_results):
    text = render(gains(compiled_results), "text", ["compile"])
    reduce_overhead = next(line for line in text.splitlines() if "reduce-overhead" in line)
    assert re.search(r"1000 +2000 +2\.00x +5 s +1 +0 +50% +90%", reduce_overhead)


def test_csv_compile_block_keeps_seconds_and_fractions(compiled_results):
    title, body = render(gains(compiled_results), "csv", ["compile"]).split("\n", 1)
    table = pd.read_csv(io.StringIO(body))
    assert title == "# compile"
    assert row(table, compile="cuda-graph")[["compile_first_call_s", "gpu_busy_fraction"]].tolist() == [0.05, 0.95]


# --- DataLoader ---------------------------------------------------------------------------------------


def test_loader_speedup_is_over_zero_workers_of_the_same_storage(fixture_results):
    table = loader_throughput(fixture_results.loaders)
    assert row(table, storage="memmap", num_workers=2)["speedup_over_0_workers"] == pytest.approx(720 / 380)


def test_best_worker_count_is_the_fastest_per_storage(fixture_results):
    best = best_worker_counts(loader_throughput(fixture_results.loaders))
    assert row(best, storage="memory")["best_num_workers"] == 4
    assert row(best, storage="memmap")["best_num_workers"] == 2


def test_best_worker_count_says_whether_it_lies_in_the_articles_2_to_4():
    best = best_worker_counts(loader_throughput(results(loader(0, 300.0), loader(8, 500.0)).loaders))
    assert not row(best, storage="memory")["within_article_advice"]


def test_without_a_zero_worker_row_there_is_no_speedup():
    table = loader_throughput(results(loader(2, 300.0)).loaders)
    assert pd.isna(row(table, num_workers=2)["speedup_over_0_workers"])


def test_a_run_of_dataloader_cases_only_gives_the_dataloader_tables():
    result = gains(results(loader(0, 300.0), loader(2, 500.0)))
    assert result.precision.empty and result.checkpoint.empty and result.channels_last.empty
    assert row(result.best_workers, storage="memory")["best_num_workers"] == 2


# --- rendering ----------------------------------------------------------------------------------------


def test_text_shows_the_articles_claim_beside_the_measured_speedup(fixture_results):
    text = render(gains(fixture_results), "text", ["precision"])
    training = next(line for line in text.splitlines() if "resnet18 train" in line and "bf16" in line)
    assert re.search(r"260 +1\.30x +1\.30x \(M2 Pro\)", training)


def test_text_of_eager_rows_only_has_no_compile_column(fixture_results):
    text = render(gains(fixture_results), "text", ["precision", "checkpoint", "channels-last"])
    assert "compile" not in text


def test_text_shows_the_compile_mode_where_a_row_is_compiled():
    result = gains(results(model("fp32"), model("bf16"), model("fp32", compile="inductor"),
                           model("bf16", compile="inductor")))
    header = render(result, "text", ["precision"]).splitlines()[2].split()
    assert header[header.index("profile") + 1] == "compile"


def test_text_tells_how_to_get_a_table_that_has_no_rows():
    text = render(gains(results(model("fp32"))), "text", ["checkpoint"])
    assert "no train-checkpoint results: run with --perf-mode train,train-checkpoint" in text


def test_text_says_which_benchmarks_were_ignored(fixture_results):
    assert "ignored 1 benchmark(s) without perfsuite facts: test_sort_speed" in render(gains(fixture_results))


def test_markdown_has_a_titled_table_per_section(fixture_results):
    text = render(gains(fixture_results), "md")
    # precision, checkpoint, channels-last, compile (how to get it), dataloader, best-workers
    assert text.count("\n## ") + text.startswith("## ") == 6
    assert "| resnet18 | 64 | standard | mps_driver_allocated_bytes | 4 GiB | 3 GiB | 1 GiB (+25%) | +25% |" in text


def test_csv_blocks_read_back_in_the_codes_units(fixture_results):
    text = render(gains(fixture_results), "csv", ["checkpoint"])
    title, body = text.split("\n", 1)
    assert title == "# checkpoint"
    table = pd.read_csv(io.StringIO(body))
    assert row(table, batch_size=64)["memory_saved_bytes"] == GiB


# --- the command --------------------------------------------------------------------------------------


def test_command_prints_the_chosen_table(capsys):
    assert main([str(FIXTURE), "--table", "dataloader"]) == 0
    out = capsys.readouterr().out
    assert "DataLoader: the best num_workers" in out and "Mixed precision" not in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty"),
        ("{not json", "not valid JSON (line 1, column 2"),
        ("[1, 2]", "not a pytest-benchmark file: found a JSON list"),
        ('{"benchmarks": [{"param": "t", "extra_info": {}}]}', "not written by a perfsuite run"),
    ],
)
def test_command_refuses_bad_input_with_a_message_and_status_2(tmp_path, capsys, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perfsuite gains: error: {path}: ") and message in err


def test_command_prints_the_compile_table(capsys):
    assert main([str(COMPILED), "--table", "compile"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torch.compile and CUDA graphs: samples/s of each compile mode over eager")


def test_command_prints_all_five_tables_by_default(capsys):
    assert main([str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "no compiled results: run with --perf-compile eager,inductor" in out and "DataLoader" in out


def test_command_refuses_a_missing_file_with_status_2(tmp_path, capsys):
    assert main([str(tmp_path / "absent.json")]) == 2
    assert "absent.json: no such file" in capsys.readouterr().err
