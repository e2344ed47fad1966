"""The device layer's MPS paths, run against the test double of torch's MPS bindings (tests/mps_double).

These check plumbing, not Metal: which bindings perfsuite calls, with which arguments, and in an order torch's
MPSEvent.mm survives. No figure here is a measurement of an Apple GPU.
"""

from __future__ import annotations

import gc
import time

import pytest
import torch
from mps_double import MacFacts, MpsDouble, MpsEventHang

from perfsuite.coverage.runtime import mps_unavailable_reason
from perfsuite.run import devices
from perfsuite.run.devices import backend


def install(monkeypatch: pytest.MonkeyPatch, double: MpsDouble) -> MpsDouble:
    double.install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False))
    return double


@pytest.fixture
def mps(monkeypatch):
    double = install(monkeypatch, MpsDouble())
    with double.tensors_on_cpu():
        yield double


def step_of(seconds: float):
    """A step that keeps the (pretend) GPU busy for `seconds`."""
    return lambda: time.sleep(seconds)


# The double itself models torch's event semantics


def test_the_double_hangs_like_torch_when_end_synchronize_precedes_elapsed_time(mps):
    start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises(MpsEventHang, match="pytorch/pytorch#162872"):
        start.elapsed_time(end)


def test_the_double_serves_elapsed_time_after_a_device_synchronize(mps):
    start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
    start.record()
    step_of(0.002)()
    end.record()
    torch.mps.synchronize()
    assert start.elapsed_time(end) >= 2.0


def test_the_double_rejects_an_event_id_torch_never_gave(mps):
    with pytest.raises(RuntimeError, match="Invalid Event ID: 99"):
        torch._C._mps_recordEvent(99)


# devices.py on MPS


def test_mps_is_available_under_the_double(mps):
    assert backend("mps").availability() == devices.Availability(True)


MACOS_TOO_OLD_FOR_EACH_RELEASE = [("2.5.1", "12.2", "12.3"), ("2.7.1", "12.6", "13.0"), ("2.13.0", "13.6", "14.0")]


@pytest.mark.parametrize(("torch_version", "macos", "needed"), MACOS_TOO_OLD_FOR_EACH_RELEASE)
def test_unusable_mps_names_the_macos_the_torch_release_needs(monkeypatch, torch_version, macos, needed):
    install(monkeypatch, MpsDouble(torch_version=torch_version, mac=MacFacts(macos_version=macos)))
    assert f"needs macOS >= {needed}" in backend("mps").availability().reason


@pytest.mark.parametrize(("torch_version", "macos", "needed"), MACOS_TOO_OLD_FOR_EACH_RELEASE)
def test_the_coverage_runtime_check_names_the_macos_the_torch_release_needs(monkeypatch, torch_version, macos, needed):
    install(monkeypatch, MpsDouble(torch_version=torch_version, mac=MacFacts(macos_version=macos)))
    assert f"needs macOS >= {needed} on Apple silicon" in mps_unavailable_reason()


def test_mps_synchronize_reaches_the_device_binding(mps):
    backend("mps").synchronize()
    assert mps.calls == ["deviceSynchronize"]


def test_mps_event_timing_does_not_hang_on_a_busy_gpu(mps):
    times_s = backend("mps").event_times_s(step_of(0.002), repeats=3)
    assert len(times_s) == 3 and all(0.002 <= t < 1.0 for t in times_s)


def test_mps_event_timing_synchronizes_the_device_not_the_end_event(mps):
    backend("mps").event_times_s(step_of(0.0), repeats=1)
    assert "synchronizeEvent" not in mps.calls
    assert mps.calls.index("deviceSynchronize") < mps.calls.index("elapsedTimeOfEvents")


def test_mps_event_timing_measures_an_unordered_pair_again(mps):
    mps.unordered_event_pairs_to_come = 2
    times_s = backend("mps").event_times_s(step_of(0.001), repeats=3)
    assert len(times_s) == 3 and mps.calls.count("elapsedTimeOfEvents") == 5


def test_mps_event_timing_gives_up_when_every_pair_is_unordered(mps):
    mps.unordered_event_pairs_to_come = 100
    with pytest.raises(RuntimeError, match="too short for MPS events"):
        backend("mps").event_times_s(step_of(0.0), repeats=2)


def test_mps_events_are_released_after_timing(mps):
    backend("mps").event_times_s(step_of(0.0), repeats=2)
    gc.collect()
    assert mps.events == {}


def test_mps_memory_figure_is_the_allocator_peak_where_torch_keeps_one(mps):
    assert backend("mps").memory_figure_name() == "mps_max_allocated_bytes"


def test_mps_memory_figure_falls_back_to_the_driver_allocation_without_peak_statistics(monkeypatch):
    double = install(monkeypatch, MpsDouble(torch_version="2.12.0"))
    with double.tensors_on_cpu():
        assert backend("mps").memory_figure_name() == "mps_driver_allocated_bytes"


def test_mps_peak_covers_the_window_since_the_reset(mps):
    mps.allocate(300)
    mps.free(300)
    backend("mps").reset_memory_peak()
    mps.allocate(100)
    mps.free(50)
    figures = backend("mps").memory_figures_bytes()
    assert figures == {
        "mps_current_allocated_bytes": 50,
        "mps_driver_allocated_bytes": 300,
        "mps_max_allocated_bytes": 100,
    }


def test_mps_memory_figures_without_peak_statistics_are_the_driver_and_current_allocation(monkeypatch):
    double = install(monkeypatch, MpsDouble(torch_version="2.12.0"))
    double.allocate(200)
    with double.tensors_on_cpu():
        backend("mps").reset_memory_peak()
        figures = backend("mps").memory_figures_bytes()
    assert figures == {"mps_current_allocated_bytes": 200, "mps_driver_allocated_bytes": 200}


def test_the_runner_finds_its_memory_figure_among_the_mps_figures(mps):
    assert backend("mps").memory_figure_name() in backend("mps").memory_figures_bytes()


def test_freeing_cached_memory_on_mps_empties_the_allocator_cache(mps):
    backend("mps").free_cached_memory()
    assert mps.calls[-1] == "emptyCache"


def test_mps_device_facts_carry_the_macos_version(mps):
    facts = devices.device_facts()
    assert (facts.macos_version, facts.unavailable_reasons.get("mps")) == ((14, 5), None)


def test_mps_fingerprint_names_the_chip(mps):
    fingerprint = devices.machine_fingerprint()
    assert (fingerprint["accelerator_name"], fingerprint["os_version"]) == ("Apple M2 Max", "14.5")


def test_tensors_asked_for_on_mps_are_made_on_the_cpu(mps):
    tensor = torch.ones(2, device="mps").to("mps")
    assert tensor.device.type == "cpu" and mps.mps_tensor_requests == 2
