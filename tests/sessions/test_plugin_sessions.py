"""The plugin as a user meets it: pytest runs over a scratch project, in this process (`run_in_process`, which starts
each run from the models known before, as a fresh process does).

The in-process tests of this subject: tests/quick/test_plugin.py."""

import json

import pytest

import perfsuite.workloads as workloads_module
from tests.quick.test_plugin import EXAMPLE

pytestmark = pytest.mark.slow


@pytest.fixture
def user_project(pytester):
    pytester.makeconftest((EXAMPLE / "conftest.py").read_text())
    pytester.makepyfile(test_benchmarks=(EXAMPLE / "test_benchmarks.py").read_text())
    return pytester


@pytest.fixture
def collect(user_project, monkeypatch):
    """`pytest --collect-only OPTIONS` over the project, in this process (a collection needs no process of its own),
    each starting from the models known before, as a user's session in a fresh process does: the models its conftest
    registers leave with the run."""
    known = dict(workloads_module.registered_workloads())

    def run(*options: str) -> pytest.RunResult:
        monkeypatch.setattr(workloads_module, "_REGISTRY", dict(known))
        return user_project.runpytest("--collect-only", *options)

    return run


def test_benchmark_json_holds_every_case_with_its_figures(user_project, run_in_process):
    result = run_in_process(
        "--benchmark-only", "--perf-profile", "smoke", "--perf-device", "cpu", "--perf-model", "tiny-mlp",
        "--benchmark-json", "out.json", "--benchmark-max-time", "0.05",
    )
    result.assert_outcomes(passed=4)
    report = json.loads((user_project.path / "out.json").read_text())
    ids = sorted(b["param"] for b in report["benchmarks"])
    assert ids == sorted(f"cpu-{d}-tiny-mlp-bs8-{m}-smoke" for d in ("fp32", "bf16") for m in ("train", "infer"))
    for bench in report["benchmarks"]:
        info = bench["extra_info"]
        assert info["samples_per_s"] == pytest.approx(8 / bench["stats"]["median"])
        assert info["flops_per_step"] >= 2 * 8 * (64 * 256 + 256 * 10)
        assert info["tflops_per_s"] > 0
        assert info["memory_figure"] == "cpu_peak_rss_bytes" and info["memory_bytes"] > 0
        assert bench["stats"]["rounds"] >= 5
    assert report["machine_info"]["perfsuite"]["cpu_model"]
    assert report["machine_info"]["perfsuite"]["torch_version"]


def test_absent_devices_are_listed_as_skipped_with_reasons(collect):
    result = collect(
        "-q", "--perf-device", "cpu,cuda,mps", "--perf-profile", "smoke", "--perf-model", "tiny-mlp"
    )
    assert result.ret == 0
    import torch

    if not torch.backends.mps.is_built():
        result.stdout.fnmatch_lines(["perfsuite: 4 case(s) skipped: mps unavailable: *built without MPS*"])
    if torch.version.cuda is None:
        result.stdout.fnmatch_lines(["perfsuite: 4 case(s) skipped: cuda unavailable: *built without CUDA"])


def test_skipped_cases_report_their_reason_when_run(user_project, run_in_process):
    result = run_in_process(
        "--benchmark-only", "--perf-device", "mps", "--perf-profile", "smoke", "--perf-model", "tiny-mlp", "-rs"
    )
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["SKIPPED*mps unavailable*"])


def test_unknown_model_is_a_usage_error_naming_the_valid_ones(collect):
    result = collect("--perf-model", "resnet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --perf-model: unknown value resnet; valid: all, resnet18, *tiny-mlp, dataloader"]
    )


def test_pyproject_settings_apply_and_the_command_line_wins(user_project, collect):
    user_project.makepyprojecttoml('[tool.perfsuite]\nprofile = "smoke"\nmodel = "tiny-mlp"\ndtype = "bf16"\n')
    from_pyproject = collect("-q", "--perf-device", "cpu")
    from_pyproject.stdout.fnmatch_lines(["*cpu-bf16-tiny-mlp-bs8-train-smoke*"])
    overridden = collect("-q", "--perf-device", "cpu", "--perf-dtype", "fp16")
    overridden.stdout.fnmatch_lines(["*cpu-fp16-tiny-mlp-bs8-train-smoke*"])
    assert "bf16" not in overridden.stdout.str()


def test_unknown_pyproject_key_is_a_usage_error_naming_the_file(user_project, collect):
    user_project.makepyprojecttoml('[tool.perfsuite]\nprofil = "smoke"\n')
    result = collect()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *pyproject.toml [[]tool.perfsuite[]]: unknown key(s) profil;*"])
