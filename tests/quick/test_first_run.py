"""A newcomer's first run: the default profile follows the device, --benchmark-only collects only benchmarks,
--perf-model leaves the DataLoader cases out, per-case progress with an estimate, a results table per device, and
an interrupted run keeps what it measured.

The tests of this subject that start processes or take long: tests/sessions/test_first_run_sessions.py."""

from __future__ import annotations

from dataclasses import replace

from perfsuite.options.settings import RawSettings, default_profile, validate_settings
from perfsuite.records import Case, Measurement, Run
from perfsuite.render.progress import format_duration, progress_line
from perfsuite.render.results import render_results, result_rows

MODELS = ["resnet18", "bert-base"]


def test_the_default_profile_is_smoke_on_the_cpu_alone_and_standard_with_an_accelerator():
    assert default_profile(["cpu"]) == "smoke"
    assert default_profile(["cuda"]) == "standard" and default_profile(["cpu", "mps"]) == "standard"
    assert validate_settings(RawSettings(), {}, MODELS, ["cpu"]).matrix.profile == "smoke"
    assert validate_settings(RawSettings(), {}, MODELS, ["mps"]).matrix.profile == "standard"
    chosen = validate_settings(RawSettings(profile="standard"), {}, MODELS, ["cpu"])
    assert chosen.matrix.profile == "standard" and chosen.profile_chosen


def test_dataloader_is_a_model_name_and_all_includes_it():
    assert list(validate_settings(RawSettings(model="dataloader"), {}, MODELS, ["cpu"]).matrix.models or []) == [
        "dataloader"
    ]
    assert "dataloader" in (validate_settings(RawSettings(model="all"), {}, MODELS, ["cpu"]).matrix.models or [])


def test_progress_line_estimates_what_is_left_from_the_mean_case_time():
    assert progress_line(3, 18, 41.0) == "perfsuite: 3/18 benchmarks in 41 s, about 3 min 25 s left"
    assert progress_line(18, 18, 250.0) == "perfsuite: 18/18 benchmarks in 4 min 10 s"
    assert format_duration(3725) == "1 h 02 min"


def _run(case: Case, median_s: float, fresh: bool) -> Run:
    return Run(case=case, round_times_s=(median_s,) * 3, samples_per_step=case.batch_size, flops_per_step=2_000_000_000,
               memory_figure="cpu_peak_rss_bytes" if case.device == "cpu" else "cuda_max_allocated_bytes",
               memory_bytes=512 * 2**20, config_digest="abc", torch_version="2.13.0", threads=1,
               facts={"fresh_process": fresh})


def test_the_results_table_has_a_block_per_device_with_throughput_tflops_memory_and_verdict():
    cpu = Case("cpu", "fp32", "resnet18", 4, "train", "smoke")
    cuda = Case("cuda", "bf16", "resnet18", 32, "infer", "standard")
    measurements = [Measurement(cpu, (_run(cpu, 0.02, fresh=False),)),
                    Measurement(cuda, (_run(cuda, 0.002, True), _run(cuda, 0.004, True)))]
    rows = result_rows(measurements, {cuda.benchmark_id: "unchanged"})
    assert list(rows) == ["cpu", "cuda"]
    assert rows["cpu"][0] == {
        "case": "fp32-resnet18-bs4-train-smoke", "median": "20 ms", "figure": "step", "latency": "-",
        "samples/s": "200", "TFLOP/s": "0.1",
        "memory": "512 MiB", "memory figure": "cpu_peak_rss_bytes (whole process so far)", "runs": "1", "verdict": "-",
    }
    assert rows["cuda"][0]["median"] == "3 ms" and rows["cuda"][0]["TFLOP/s"] == "0.667"
    assert rows["cuda"][0]["runs"] == "2" and rows["cuda"][0]["verdict"] == "unchanged"
    assert rows["cuda"][0]["latency"] == "-"  # not measured in these runs
    latency = Measurement(cuda, (replace(_run(cuda, 0.002, True), latency_median_s=0.0025),))
    assert result_rows([latency], {})["cuda"][0]["latency"] == "2.5 ms"
    text = render_results(measurements, {})
    assert text.startswith("cpu:\n") and "\n\ncuda:\n" in text
