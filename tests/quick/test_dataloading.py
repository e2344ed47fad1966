"""The DataLoader benchmark: its cases and skip reasons, the two storages, one pass, and a smoke run.

The tests of this subject that start processes or take long: tests/sessions/test_dataloading_sessions.py."""

import multiprocessing
import os
import pickle

import numpy as np
import pytest
import torch

from perfsuite.matrix.cases import UsageError
from perfsuite.run.dataloading import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    LOADER_SIZES,
    LoaderCase,
    LoaderSize,
    MemmapImages,
    build_loader_cases,
    load_pass,
    loader_skip_reason,
    make_image_datasets,
    make_loader,
    normalize_image,
    parse_worker_counts,
    start_loader,
)

TINY = LoaderSize((3, 8, 8), batch_size=4, batches=3)


@pytest.fixture
def datasets(tmp_path):
    return make_image_datasets(TINY, tmp_path)


def case(device="cpu", storage="memory", num_workers=0, pin_memory=False, profile="smoke"):
    return LoaderCase(device, storage, num_workers, pin_memory, profile)


# --- cases, ids and skip reasons ------------------------------------------------------------------------


def test_benchmark_id_names_storage_workers_and_pinning():
    assert case("cuda", "memmap", 4, True, "standard").benchmark_id == "dataloader-cuda-memmap-workers4-pin"


def test_benchmark_id_of_a_non_standard_profile_ends_with_it():
    assert case(num_workers=0).benchmark_id == "dataloader-cpu-memory-workers0-nopin-smoke"


def test_cases_cover_storage_pinning_and_workers_per_device():
    cases = build_loader_cases(["cpu", "mps"], [0, 2], "smoke")
    assert len(cases) == 2 * 2 * 2 * 2
    assert len({c.benchmark_id for c in cases}) == len(cases)


def test_worker_counts_default_to_0_2_4_8():
    assert parse_worker_counts(None) == [0, 2, 4, 8]
    assert parse_worker_counts("  ") == [0, 2, 4, 8]


def test_worker_counts_are_read_from_a_comma_separated_list():
    assert parse_worker_counts("0, 3,3,6") == [0, 3, 6]


@pytest.mark.parametrize("raw", ["two", "-1", "0,,x", ","])
def test_bad_worker_counts_are_a_usage_error_naming_the_variable(raw):
    with pytest.raises(UsageError, match=r"PERFSUITE_DATALOADER_WORKERS=.*integers >= 0"):
        parse_worker_counts(raw)


def test_an_unknown_profile_is_a_usage_error():
    with pytest.raises(UsageError, match="--perf-profile: unknown value huge"):
        build_loader_cases(["cpu"], [0], "huge")


def test_unpinned_cases_run_on_an_available_device():
    assert loader_skip_reason(case("cpu"), {}, None, "2.13") is None


def test_pinning_for_the_cpu_is_skipped_because_nothing_is_copied():
    reason = loader_skip_reason(case("cpu", pin_memory=True), {}, "cuda", "2.13")
    assert reason is not None and "not copied" in reason


def test_pinning_runs_where_torch_pins_for_the_device():
    assert loader_skip_reason(case("cuda", pin_memory=True), {}, "cuda", "2.13") is None


def test_pinning_on_mps_is_skipped_because_torch_ignores_it():
    reason = loader_skip_reason(case("mps", pin_memory=True), {}, None, "2.13")
    assert reason is not None and reason.startswith("torch 2.13 ignores pin_memory=True on MPS")


def test_an_unavailable_device_is_skipped_with_its_reason():
    reason = loader_skip_reason(case("cuda"), {"cuda": "torch was built without CUDA"}, None, "2.13")
    assert reason == "cuda unavailable: torch was built without CUDA"


# --- the datasets ---------------------------------------------------------------------------------------


def test_an_item_is_a_normalized_float_image_and_its_label(datasets):
    image, label = datasets["memory"][5]
    assert image.shape == (3, 8, 8) and image.dtype == torch.float32
    assert label == 5


def test_normalization_maps_pixel_values_with_imagenet_statistics():
    white = normalize_image(torch.full((3, 1, 1), 255, dtype=torch.uint8))
    expected = [(1 - mean) / std for mean, std in zip(IMAGENET_MEAN, IMAGENET_STD, strict=True)]
    assert white.flatten().tolist() == pytest.approx(expected)


def test_without_normalization_an_item_is_the_stored_uint8_pixels(datasets):
    raw = MemmapImages(datasets["memmap"].path, normalize=False)
    image, _ = raw[0]
    assert image.dtype == torch.uint8
    assert torch.equal(image, datasets["memory"].images[0])


def test_memmap_dataset_equals_the_in_memory_one(datasets):
    assert len(datasets["memmap"]) == len(datasets["memory"]) == TINY.samples
    for index in range(TINY.samples):
        assert torch.equal(datasets["memmap"][index][0], datasets["memory"][index][0])


def test_memmap_dataset_pickles_its_path_not_its_pixels(datasets):
    memmap = datasets["memmap"]
    memmap[0]  # maps the file in this process
    assert len(pickle.dumps(memmap)) < TINY.dataset_bytes


def test_a_file_that_is_not_uint8_images_is_refused_with_its_path(tmp_path):
    path = tmp_path / "floats.npy"
    np.save(path, np.zeros((2, 3, 4, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"floats\.npy: expected a uint8 array \(N, C, H, W\), found float32"):
        MemmapImages(path)


def test_standard_size_is_32_batches_of_64_images_224_square():
    standard = LOADER_SIZES["standard"]
    assert (standard.batches, standard.batch_size, standard.sample_shape) == (32, 64, (3, 224, 224))


# --- loading ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("storage", ["memory", "memmap"])
def test_one_pass_loads_every_sample_once(datasets, storage):
    loader = make_loader(datasets[storage], case(storage=storage), TINY.batch_size)
    assert load_pass(loader, "cpu") == TINY.samples


def test_persistent_workers_serve_every_pass_and_exit_with_the_loader(datasets):
    loader = make_loader(datasets["memmap"], case(storage="memmap", num_workers=2), TINY.batch_size)
    startup_s = start_loader(loader, "cpu")
    workers = multiprocessing.active_children()
    assert load_pass(loader, "cpu") == TINY.samples
    assert set(multiprocessing.active_children()) == set(workers) and len(workers) == 2
    assert startup_s > 0
    del loader
    assert multiprocessing.active_children() == []


def test_workers_are_spawned_never_forked_from_a_process_running_torchs_threads(datasets, monkeypatch):
    """Forking a process that runs torch's threads may deadlock the child (Python 3.12+ warns at each fork)."""
    def refuse_fork():
        raise AssertionError("a DataLoader worker was forked")

    monkeypatch.setattr(os, "fork", refuse_fork)
    for storage in ("memory", "memmap"):  # one worker each: every worker of a loader starts the same way
        loader = make_loader(datasets[storage], case(storage=storage, num_workers=1), TINY.batch_size)
        start_loader(loader, "cpu")
        assert load_pass(loader, "cpu") == TINY.samples
        assert loader.multiprocessing_context.get_start_method() == "spawn"
        del loader
