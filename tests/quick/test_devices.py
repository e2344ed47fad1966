import torch

from perfsuite.run import devices
from perfsuite.run.devices import backend


def test_cpu_is_always_available():
    assert backend("cpu").availability().available


def test_missing_accelerator_says_why():
    for device in ("cuda", "mps"):
        state = backend(device).availability()
        if not state.available:
            assert state.reason, f"{device} is unavailable without a reason"


def test_cuda_synchronize_is_called(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append("cuda"))
    backend("cuda").synchronize()
    assert calls == ["cuda"]


def test_mps_synchronize_is_called(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda *a, **k: calls.append("mps"))
    backend("mps").synchronize()
    assert calls == ["mps"]


def test_event_timing_measures_device_work_on_cuda():
    if not backend("cuda").availability().available:
        import pytest

        pytest.skip(f"needs CUDA: {backend('cuda').availability().reason}")
    a = torch.randn(2048, 2048, device="cuda")
    times_s = backend("cuda").event_times_s(lambda: a @ a, repeats=3) or []
    assert len(times_s) == 3 and all(0 < t < 1.0 for t in times_s)


def test_each_device_names_its_memory_figure_for_what_it_is():
    # MPS, whose figure depends on what the installed torch offers, is covered in test_mps_double.py.
    assert backend("cuda").memory_figure_name() == "cuda_max_allocated_bytes"
    assert backend("cpu").memory_figure_name() == "cpu_peak_rss_bytes"


def test_cpu_peak_rss_grows_with_a_large_allocation():
    backend("cpu").reset_memory_peak()
    before = backend("cpu").memory_figures_bytes()["cpu_peak_rss_bytes"]
    block = torch.ones(64 * 1024 * 1024, dtype=torch.uint8)  # 64 MiB, touched
    after = backend("cpu").memory_figures_bytes()["cpu_peak_rss_bytes"]
    del block
    assert after - before >= 60 * 1024 * 1024


def test_fingerprint_names_the_os_cpu_memory_and_torch():
    fingerprint = devices.machine_fingerprint()
    assert fingerprint["os"]
    assert fingerprint["cpu_model"]
    assert fingerprint["memory_bytes"] > 2**30
    assert fingerprint["torch_version"] == torch.__version__


def test_device_facts_list_every_unavailable_device_with_its_reason():
    facts = devices.device_facts()
    for device in devices.DEVICES:
        assert (device in facts.unavailable_reasons) == (not backend(device).availability().available)


def test_only_the_cpu_is_not_an_accelerator():
    assert [name for name in devices.DEVICES if not devices.is_accelerator(name)] == ["cpu"]


def test_a_device_without_a_backend_is_taken_for_an_accelerator():
    assert devices.is_accelerator("xpu")


def test_only_cuda_has_its_kernels_timed_by_the_profiler():
    assert [name for name in devices.DEVICES if backend(name).profiles_kernels] == ["cuda"]
