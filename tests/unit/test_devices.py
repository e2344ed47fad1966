import torch

from perfsuite.run import devices


def test_cpu_is_always_available():
    assert devices.availability("cpu").available


def test_missing_accelerator_says_why():
    for device in ("cuda", "mps"):
        state = devices.availability(device)
        if not state.available:
            assert state.reason, f"{device} is unavailable without a reason"


def test_cuda_synchronize_is_called(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append("cuda"))
    devices.synchronize("cuda")
    assert calls == ["cuda"]


def test_mps_synchronize_is_called(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda *a, **k: calls.append("mps"))
    devices.synchronize("mps")
    assert calls == ["mps"]


def test_event_timing_measures_device_work_on_cuda():
    if not devices.availability("cuda").available:
        import pytest

        pytest.skip(f"needs CUDA: {devices.availability('cuda').reason}")
    a = torch.randn(2048, 2048, device="cuda")
    times_s = devices.time_with_events_s(lambda: a @ a, "cuda", repeats=3)
    assert len(times_s) == 3 and all(0 < t < 1.0 for t in times_s)


def test_each_device_names_its_memory_figure_for_what_it_is():
    # MPS, whose figure depends on what the installed torch offers, is covered in test_mps_double.py.
    assert devices.memory_figure_name("cuda") == "cuda_max_allocated_bytes"
    assert devices.memory_figure_name("cpu") == "cpu_peak_rss_bytes"


def test_cpu_peak_rss_grows_with_a_large_allocation():
    devices.reset_memory_peak("cpu")
    before = devices.memory_figures_bytes("cpu")["cpu_peak_rss_bytes"]
    block = torch.ones(64 * 1024 * 1024, dtype=torch.uint8)  # 64 MiB, touched
    after = devices.memory_figures_bytes("cpu")["cpu_peak_rss_bytes"]
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
        assert (device in facts.unavailable_reasons) == (not devices.availability(device).available)
