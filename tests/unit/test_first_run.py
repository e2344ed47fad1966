"""A newcomer's first run: the default profile follows the device, --benchmark-only collects only benchmarks,
--perf-model leaves the DataLoader cases out, per-case progress with an estimate, a results table per device, and
an interrupted run keeps what it measured."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.options.settings import RawSettings, default_profile, validate_settings
from perfsuite.records import Case, Measurement, Run
from perfsuite.render.progress import format_duration, progress_line
from perfsuite.render.results import render_results, result_rows

REPOSITORY = Path(__file__).resolve().parents[2]
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


@pytest.fixture
def repository_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A copy of this repository's pyproject, benchmark modules and a unit test, as a user's checkout has them."""
    (pytester.path / "pyproject.toml").write_text((REPOSITORY / "pyproject.toml").read_text())
    benchmarks = pytester.path / "tests" / "benchmarks"
    benchmarks.mkdir(parents=True)
    for name in ("test_models.py", "test_dataloader.py"):
        (benchmarks / name).write_text((REPOSITORY / "tests" / "benchmarks" / name).read_text())
    (pytester.path / "tests" / "test_unit.py").write_text("def test_unit():\n    assert True\n")
    return pytester


def test_benchmark_only_collects_only_benchmarks_and_a_model_choice_leaves_the_dataloader_out(repository_project):
    result = repository_project.runpytest_subprocess(
        "--benchmark-only", "--collect-only", "-q", "--perf-model", "resnet18", "--perf-device", "cpu"
    )
    listed = [line for line in result.outlines if "::" in line]
    assert listed and all("test_models.py::test_model[cpu-" in line for line in listed), listed
    assert all("-smoke]" in line for line in listed)  # the CPU alone: smoke by default
    assert not any("test_unit" in line or "dataloader" in line for line in listed)
    with_loader = repository_project.runpytest_subprocess(
        "--benchmark-only", "--collect-only", "-q", "--perf-model", "resnet18,dataloader", "--perf-device", "cpu"
    )
    assert any("test_dataloader[dataloader-cpu-" in line for line in with_loader.outlines)
    without_benchmark_only = repository_project.runpytest_subprocess("--collect-only", "-q", "--perf-device", "cpu")
    assert any("test_unit.py::test_unit" in line for line in without_benchmark_only.outlines)


def test_the_header_says_why_the_smoke_profile_runs_and_how_to_run_the_articles_sizes(repository_project):
    result = repository_project.runpytest_subprocess("--benchmark-only", "--collect-only", "--perf-device", "cpu")
    result.stdout.fnmatch_lines(["*no accelerator is selected, so the smoke profile runs*--perf-profile standard*"])
    chosen = repository_project.runpytest_subprocess(
        "--benchmark-only", "--collect-only", "--perf-device", "cpu", "--perf-profile", "smoke"
    )
    assert "perfsuite: profile=smoke" in chosen.stdout.str() and "no accelerator is selected" not in chosen.stdout.str()


def test_an_interrupted_run_keeps_the_summary_and_results_of_the_cases_measured(repository_project):
    """Ctrl-C after the second case (a KeyboardInterrupt, as SIGINT raises in pytest's main thread)."""
    repository_project.makeconftest(
        """
        done = []

        def pytest_runtest_logfinish(nodeid, location):
            if "test_model[" in nodeid:
                done.append(nodeid)
                if len(done) == 2:
                    raise KeyboardInterrupt
        """
    )
    result = repository_project.runpytest_subprocess(
        "--benchmark-only", "--perf-device", "cpu", "--perf-model", "resnet18", "--perf-dtype", "fp32",
        "--benchmark-max-time", "0.05", "--benchmark-json", "out.json", "-p", "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*perfsuite results*", "*interrupted: the files hold the 2 of 2 cases measured*"])
    summary = json.loads((repository_project.path / ".perfsuite" / "summary.json").read_text())
    assert len(summary["verdicts"]) == 2
    results = (repository_project.path / ".perfsuite" / "results.md").read_text()
    assert results.count("-resnet18-bs4-") == 2
    assert len(json.loads((repository_project.path / "out.json").read_text())["benchmarks"]) == 2


def test_each_case_prints_progress_with_an_estimate(repository_project):
    result = repository_project.runpytest_subprocess(
        "--benchmark-only", "--perf-device", "cpu", "--perf-model", "resnet18", "--perf-dtype", "fp32",
        "--benchmark-max-time", "0.05", "-p", "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["perfsuite: 1/2 benchmarks in * s, about * left", "perfsuite: 2/2 benchmarks in * s"])
    result.stdout.fnmatch_lines(["*perfsuite results*", "cpu:", "*case*median*samples/s*TFLOP/s*verdict*"])


def test_no_progress_lines_when_the_benchmarks_are_skipped(repository_project):
    result = repository_project.runpytest_subprocess(
        "--benchmark-skip", "--perf-device", "cpu", "--perf-model", "resnet18", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, skipped=4)
    assert "benchmarks in" not in result.stdout.str()
