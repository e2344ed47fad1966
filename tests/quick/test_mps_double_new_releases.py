"""The MPS double as torch 2.14.0, 2.14.1 and 2.15.0 behave, as their macOS wheels say (perfsuite/matrix/
mps_support.py and tests/mps_double/releases.py cite file and line), with perfsuite's own answers on top; and a
made-up torch 2.16.0, which the double refuses to pretend to know and perfsuite reports as unchecked wherever it
uses a fact that release might change.

The tests of this subject that start processes or take long: tests/sessions/test_mps_double_new_releases_sessions.py."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from mps_double import MacFacts, MpsDouble, MpsEventHang
from mps_double.releases import NO_METAL_GPU, NON_DEFAULT_STREAM, UnknownRelease

from perfsuite.coverage.allowlist import Allowlist
from perfsuite.coverage.check import static_check
from perfsuite.coverage.render import render_text
from perfsuite.coverage.runtime import mps_unavailable_reason
from perfsuite.coverage.support import installed_mps_support_table
from perfsuite.matrix.cases import Case
from perfsuite.run import devices
from perfsuite.run.devices import backend
from perfsuite.workloads import get_workload, model_facts

NEW_RELEASES = ["2.14.0", "2.14.1", "2.15.0"]
# What each release's wheel says (mps_support cites the lines): the macOS MPS needs, whether SVD goes to the CPU
# fallback, whether torch's own tests skip fp16 convolution backward, whether torch.mps has streams, whether the GPU
# stamps events.
WHEEL_FACTS = {
    "2.13.0": {"macos": "14.0", "svd_falls_back": True, "fp16_conv_skipped": True, "streams": False, "gpu": False},
    "2.14.0": {"macos": "14.0", "svd_falls_back": False, "fp16_conv_skipped": True, "streams": False, "gpu": False},
    "2.14.1": {"macos": "14.0", "svd_falls_back": False, "fp16_conv_skipped": True, "streams": False, "gpu": False},
    "2.15.0": {"macos": "15.0", "svd_falls_back": False, "fp16_conv_skipped": True, "streams": True, "gpu": True},
}
UNCHECKED_2_16 = "unchecked for torch 2.16.0: assumed as in torch 2.15.0"


def install(monkeypatch: pytest.MonkeyPatch, double: MpsDouble) -> MpsDouble:
    double.install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False))
    return double


def pretend(monkeypatch: pytest.MonkeyPatch, torch_version: str, macos: str = "15.1", **options) -> MpsDouble:
    """The double as torch `torch_version` on a Mac with `macos`, installed for this test."""
    return install(monkeypatch, MpsDouble(torch_version=torch_version, mac=MacFacts(macos_version=macos), **options))


@pytest.fixture(autouse=True)
def no_mps_variables(monkeypatch):
    for name in ("PYTORCH_ENABLE_MPS_FALLBACK", "PYTORCH_MPS_LOG_PROFILE_INFO", "PYTORCH_MPS_METAL_VERSION"):
        monkeypatch.delenv(name, raising=False)


def mps_case(dtype: str, model: str, mode: str) -> Case:
    return Case("mps", dtype, model, 8, mode, "smoke")


def svd_warnings(double: MpsDouble) -> list[str]:
    """The fallback warnings of one SVD of an MPS matrix under `double`."""
    with double.tensors_on_cpu(), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        torch.linalg.svd(torch.randn(4, 3, device="mps"))
    return [str(w.message) for w in warned if "fall back to run on the CPU" in str(w.message)]


# The macOS MPS needs


@pytest.mark.parametrize("torch_version", ["2.13.0", *NEW_RELEASES])
def test_mps_is_available_on_macos_14_5_only_where_the_wheel_needs_macos_14(monkeypatch, torch_version):
    pretend(monkeypatch, torch_version, macos="14.5")
    assert torch.backends.mps.is_available() is (WHEEL_FACTS[torch_version]["macos"] == "14.0")


@pytest.mark.parametrize("torch_version", NEW_RELEASES)
def test_mps_is_available_on_macos_15(monkeypatch, torch_version):
    pretend(monkeypatch, torch_version, macos="15.0")
    assert torch.backends.mps.is_available()


@pytest.mark.parametrize("torch_version", NEW_RELEASES)
def test_perfsuite_names_the_macos_each_new_release_needs_on_macos_13(monkeypatch, torch_version):
    pretend(monkeypatch, torch_version, macos="13.6")
    reason = backend("mps").availability().reason
    assert f"needs macOS >= {WHEEL_FACTS[torch_version]['macos']} on Apple silicon" in reason
    assert "unchecked" not in reason


def test_torch_2_15_on_macos_14_says_mps_needs_macos_15_when_a_tensor_is_asked_for(monkeypatch):
    double = pretend(monkeypatch, "2.15.0", macos="14.5")
    with double.tensors_on_cpu(), pytest.raises(RuntimeError) as raised:
        torch.ones(1, device="mps")
    assert str(raised.value) == (
        "The MPS backend is supported on macOS 15.0+. Current OS version can be queried using `sw_vers`"
    )
    assert "it needs macOS >= 15.0 on Apple silicon" in backend("mps").availability().reason


def test_torch_2_15_without_a_metal_gpu_on_macos_15_says_so(monkeypatch):
    double = pretend(monkeypatch, "2.15.0", macos="15.1", available=False)
    with double.tensors_on_cpu(), pytest.raises(RuntimeError) as raised:
        torch.ones(1, device="mps")
    assert str(raised.value) == NO_METAL_GPU
    assert "virtual machine, sandbox or container" in backend("mps").availability().reason


def test_torch_2_14_without_a_metal_gpu_still_blames_the_macos(monkeypatch):
    double = pretend(monkeypatch, "2.14.1", macos="15.1", available=False)
    with double.tensors_on_cpu(), pytest.raises(RuntimeError, match=r"supported on macOS 14\.0\+"):
        torch.ones(1, device="mps")


# SVD: native from 2.14 (MPSFallback.mm's block no longer registers linalg_svd; the yaml gives _linalg_svd.U an MPS
# kernel)


@pytest.mark.parametrize("torch_version", ["2.13.0", *NEW_RELEASES])
def test_svd_falls_back_to_the_cpu_up_to_2_13_only(monkeypatch, torch_version):
    fallen_back = svd_warnings(pretend(monkeypatch, torch_version))
    expected = ["The operator 'aten::linalg_svd' is not currently supported on the MPS backend and will fall back to "
                "run on the CPU. This may have performance implications."]
    assert fallen_back == (expected if WHEEL_FACTS[torch_version]["svd_falls_back"] else [])


def test_svd_falls_back_without_the_fallback_switch_on_2_13(monkeypatch):
    double = pretend(monkeypatch, "2.13.0")
    assert not double.fallback_switched_on and len(svd_warnings(double)) == 1


@pytest.mark.parametrize("torch_version", ["2.13.0", *NEW_RELEASES])
def test_embedding_max_norm_falls_back_in_every_release(monkeypatch, torch_version):
    double = pretend(monkeypatch, torch_version)
    embedding = torch.nn.Embedding(10, 4, max_norm=1.0)
    with double.tensors_on_cpu(), pytest.warns(UserWarning, match="'aten::embedding_renorm_' is not currently"):
        embedding.to("mps")(torch.tensor([1, 2], device="mps"))


# fp16 convolution training: torch's own tests still skip it, so perfsuite does


@pytest.mark.parametrize("torch_version", NEW_RELEASES)
def test_fp16_convolution_training_is_skipped_on_each_new_release(monkeypatch, torch_version):
    double = pretend(monkeypatch, torch_version)
    with double.tensors_on_cpu():
        reason = backend("mps").skip_reason(mps_case("fp16", "resnet18", "train"), model_facts()["resnet18"],
                                            devices.device_facts())
    assert WHEEL_FACTS[torch_version]["fp16_conv_skipped"]
    assert reason is not None and "pytorch/pytorch#119108" in reason and "own MPS tests skip it" in reason


@pytest.mark.parametrize("torch_version", NEW_RELEASES)
def test_batchnorm_channels_last_training_runs_on_each_new_release(monkeypatch, torch_version):
    double = pretend(monkeypatch, torch_version)
    with double.tensors_on_cpu():
        reason = backend("mps").skip_reason(mps_case("fp32", "resnet18", "train-channels-last"),
                                            model_facts()["resnet18"], devices.device_facts())
    assert reason is None


# torch.mps streams, and events on them: 2.15 only


@pytest.mark.parametrize("torch_version", ["2.13.0", *NEW_RELEASES])
def test_torch_mps_has_streams_in_2_15_only(monkeypatch, torch_version):
    pretend(monkeypatch, torch_version)
    present = [hasattr(torch.mps, name) for name in ("Stream", "stream", "current_stream", "set_stream",
                                                     "default_stream")]
    assert present == [WHEEL_FACTS[torch_version]["streams"]] * 5


def test_events_record_and_wait_on_the_default_stream_in_2_15(monkeypatch):
    double = pretend(monkeypatch, "2.15.0")
    with double.tensors_on_cpu():
        event = torch.mps.event.Event()
        event.record()
        event.wait()
    assert torch.mps.current_stream() == torch.mps.default_stream()


@pytest.mark.parametrize("method", ["record", "wait"])
def test_events_raise_on_a_non_default_stream_in_2_15(monkeypatch, method):
    double = pretend(monkeypatch, "2.15.0")
    event = torch.mps.event.Event()
    with double.tensors_on_cpu(), torch.mps.stream(torch.mps.Stream(stream_id=1)):
        with pytest.raises(NotImplementedError, match=NON_DEFAULT_STREAM):
            getattr(event, method)()
    assert torch.mps.current_stream() == torch.mps.default_stream()


# Events: host-callback stamps before 2.15, GPU stamps in 2.15


def timed_pair(double: MpsDouble, synchronize_end: bool) -> float:
    """One event pair around a step the GPU is still running, read after `end.synchronize()` or after a drain."""
    with double.tensors_on_cpu():
        start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
        start.record()
        torch.ones(4, device="mps") * 2
        end.record()
        if synchronize_end:
            end.synchronize()
        else:
            torch.mps.synchronize()
        return start.elapsed_time(end)


@pytest.mark.parametrize("torch_version", ["2.14.0", "2.14.1"])
def test_elapsed_time_after_end_synchronize_hangs_up_to_2_14(monkeypatch, torch_version):
    double = pretend(monkeypatch, torch_version)
    with pytest.raises(MpsEventHang, match="pytorch/pytorch#162872"):
        timed_pair(double, synchronize_end=True)


def test_elapsed_time_after_end_synchronize_is_served_in_2_15(monkeypatch):
    assert timed_pair(pretend(monkeypatch, "2.15.0"), synchronize_end=True) >= 0.0


@pytest.mark.parametrize("torch_version", NEW_RELEASES)
def test_perfsuites_event_timing_waits_as_each_release_allows(monkeypatch, torch_version):
    double = pretend(monkeypatch, torch_version)
    with double.tensors_on_cpu():
        times_s = backend("mps").event_times_s(lambda: torch.ones(4, device="mps") * 2, 3)
    waits = [call for call in double.calls if call in ("synchronizeEvent", "deviceSynchronize")]
    gpu = WHEEL_FACTS[torch_version]["gpu"]
    assert len(times_s) == 3
    assert waits == (["synchronizeEvent"] if gpu else ["deviceSynchronize"]) * 3


def test_on_2_15_an_unordered_pair_cannot_come_from_gpu_stamps(monkeypatch):
    double = pretend(monkeypatch, "2.15.0", unordered_event_pairs_to_come=5)
    with double.tensors_on_cpu():
        assert len(backend("mps").event_times_s(lambda: None, 2)) == 2


# PYTORCH_MPS_METAL_VERSION, read from 2.15


def test_a_metal_version_2_15_does_not_take_warns_at_the_first_mps_work(monkeypatch):
    monkeypatch.setenv("PYTORCH_MPS_METAL_VERSION", "3")
    double = pretend(monkeypatch, "2.15.0")
    with double.tensors_on_cpu(), pytest.warns(UserWarning, match="Ignoring PYTORCH_MPS_METAL_VERSION=3, expected 3.1, "
                                                                  "3.2 or 4.0"):
        torch.ones(1, device="mps")


def test_a_metal_version_is_ignored_silently_before_2_15(monkeypatch):
    monkeypatch.setenv("PYTORCH_MPS_METAL_VERSION", "3")
    double = pretend(monkeypatch, "2.14.1")
    with double.tensors_on_cpu(), warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.ones(1, device="mps")


# A made-up 2.16.0: refused by the double, reported as unchecked by perfsuite


def test_the_double_refuses_to_pretend_to_be_a_release_newer_than_the_newest_read():
    with pytest.raises(UnknownRelease, match="no facts for torch 2.16.0: the newest release read is 2.15.0"):
        MpsDouble(torch_version="2.16.0")


def test_the_double_borrows_a_behaviour_only_for_a_release_it_does_not_know():
    with pytest.raises(UnknownRelease, match="behaves_as is for a release the double has no facts for"):
        MpsDouble(torch_version="2.14.1", behaves_as="2.15.0")


def test_the_double_borrows_only_the_behaviour_of_a_release_read():
    with pytest.raises(UnknownRelease, match="no facts for torch 2.17.0"):
        MpsDouble(torch_version="2.16.0", behaves_as="2.17.0")


def as_2_16(monkeypatch: pytest.MonkeyPatch, macos: str = "15.1") -> MpsDouble:
    return pretend(monkeypatch, "2.16.0", macos=macos, behaves_as="2.15.0")


def test_2_16_session_header_says_which_mps_facts_are_assumed_from_2_15(monkeypatch):
    as_2_16(monkeypatch)
    (line,) = devices.assumed_facts_notes(["cpu", "mps"])
    assert line.startswith("perfsuite: MPS facts unchecked for torch 2.16.0: the macOS MPS needs, the ops that fall "
                           "back to the CPU and how MPS events are timed are assumed as in torch 2.15.0")


@pytest.mark.parametrize("torch_version", ["2.13.0", *NEW_RELEASES])
def test_a_release_read_adds_no_line_to_the_session_header(monkeypatch, torch_version):
    pretend(monkeypatch, torch_version)
    assert devices.assumed_facts_notes(["cpu", "mps"]) == []


def test_2_16_unusable_mps_says_its_macos_requirement_is_unchecked(monkeypatch):
    as_2_16(monkeypatch, macos="14.5")
    assert UNCHECKED_2_16 in backend("mps").availability().reason
    assert UNCHECKED_2_16 in (mps_unavailable_reason() or "")


def test_2_16_fp16_convolution_training_stays_skipped_and_says_unchecked(monkeypatch):
    double = as_2_16(monkeypatch)
    with double.tensors_on_cpu():
        reason = backend("mps").skip_reason(mps_case("fp16", "resnet18", "train"), model_facts()["resnet18"],
                                            devices.device_facts())
    assert reason is not None and "unchecked for torch 2.16: assumed as in torch 2.15.0" in reason


def test_2_16_events_are_read_after_a_drain_the_way_safe_under_both_implementations_read(monkeypatch):
    double = as_2_16(monkeypatch)
    with double.tensors_on_cpu():
        backend("mps").event_times_s(lambda: None, 2)
    assert "synchronizeEvent" not in double.calls and double.calls.count("deviceSynchronize") == 2


def test_2_16_doctor_warns_which_facts_are_assumed(monkeypatch):
    from perfsuite.commands import doctor
    from perfsuite.doctor.diagnosis import diagnose

    as_2_16(monkeypatch)
    findings = {f.check: f for f in diagnose(doctor.gather_facts())}
    assert findings["mps-facts"].status == "warning" and "unchecked for torch 2.16.0" in findings["mps-facts"].summary
    assert UNCHECKED_2_16 in findings["macos"].summary


def test_2_16_coverage_report_says_its_fallback_facts_are_assumed_from_2_15(monkeypatch):
    double = as_2_16(monkeypatch)
    installed_mps_support_table.cache_clear()
    try:
        with double.tensors_on_cpu():
            report = static_check(get_workload("resnet18"), Allowlist((), "none"), "smoke", ("infer",))
    finally:
        installed_mps_support_table.cache_clear()
    assert report.coverage.note is not None
    assert "MPS fallback facts unchecked for torch 2.16.0" in render_text([report], "none").splitlines()[1]
    assert "assumed as in torch 2.15.0" in json.dumps(report.coverage.note)
