"""DataLoader throughput: the source article's advice on loading data (section 4.2), as measured cases.

The article advises `num_workers` 2-4 on a Mac (more, it says, fragments memory) and memory-mapping large
datasets. A case here loads image-like samples (3x224x224 uint8 on storage, normalised to float32 in
`__getitem__` as an ImageNet pipeline does; `normalize=False` keeps the uint8 pixels) from one of two
storages: a tensor in memory, or a numpy memmap (`.npy`) on disk. Each case varies `num_workers` and
`pin_memory`; one timed round is one full pass over a fixed number of batches, moving each batch to the
case's device.

Workers persist between passes (`persistent_workers=True`), so a timed pass does not pay for starting
them; that cost is recorded apart as `startup_s`, from the untimed first pass. Workers are spawned on every
platform (`WORKER_START_METHOD`), as macOS does by default. The memmap file is written
at the start of the session, so passes read it from the OS page cache: the figure is the cost of mapping
and copying samples out of the file's pages, not of the disk (a cold cache cannot be had without root).

The pure decisions (sizes, cases, ids, skip reasons, parsing the worker counts) come first; the datasets
and the timed pass follow.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from perfsuite.matrix.cases import UsageError
from perfsuite.run.devices import backend

STORAGES = ("memory", "memmap")
DEFAULT_WORKER_COUNTS = (0, 2, 4, 8)
WORKERS_ENV = "PERFSUITE_DATALOADER_WORKERS"
# How worker processes start, on every platform: "spawn" is macOS's default (Python 3.8+), so the figures are
# those a Mac's loader gives. Linux's default, fork, copies a process that already runs torch's threads, which may
# deadlock the child; Python 3.12+ warns at each such fork (56 warnings in one user's DataLoader cases).
WORKER_START_METHOD = "spawn"
CLASS_COUNT = 1000
# ImageNet's per-channel mean and standard deviation, the values torchvision's ImageNet recipes normalise with.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class LoaderSize:
    """How much one pass loads: `batches` batches of `batch_size` samples of `sample_shape` (C, H, W) uint8."""

    sample_shape: tuple[int, int, int]
    batch_size: int
    batches: int

    @property
    def samples(self) -> int:
        """Samples in one pass, which is also the dataset's length (every batch is full)."""
        return self.batch_size * self.batches

    @property
    def dataset_bytes(self) -> int:
        """Bytes the uint8 dataset takes in memory and on disk (the .npy header aside)."""
        return self.samples * math.prod(self.sample_shape)


LOADER_SIZES: Mapping[str, LoaderSize] = {
    "smoke": LoaderSize((3, 32, 32), batch_size=16, batches=8),
    "standard": LoaderSize((3, 224, 224), batch_size=64, batches=32),  # 2048 images, 308 MB
    "full": LoaderSize((3, 224, 224), batch_size=64, batches=128),  # 8192 images, 1.23 GB
}


@dataclass(frozen=True)
class LoaderCase:
    """One DataLoader configuration: where batches go, where samples live, workers and pinning."""

    device: str
    storage: str
    num_workers: int
    pin_memory: bool
    profile: str

    @property
    def benchmark_id(self) -> str:
        """The readable id, e.g. `dataloader-cuda-memmap-workers4-pin`; non-standard profiles add a suffix."""
        pin = "pin" if self.pin_memory else "nopin"
        suffix = "" if self.profile == "standard" else f"-{self.profile}"
        return f"dataloader-{self.device}-{self.storage}-workers{self.num_workers}-{pin}{suffix}"


def parse_worker_counts(raw: str | None, source: str = WORKERS_ENV) -> list[int]:
    """The comma-separated worker counts in `raw` (non-negative integers), or the defaults when it is empty.

    `source` names where the text came from (the environment variable) for the message.
    """
    if raw is None or not raw.strip():
        return list(DEFAULT_WORKER_COUNTS)
    try:
        counts = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        counts = [-1]
    if not counts or any(c < 0 for c in counts):
        raise UsageError(
            f"{source}={raw!r}: expected comma-separated worker counts (integers >= 0), e.g. 0,2,4,8"
        )
    return list(dict.fromkeys(counts))


def build_loader_cases(devices: Sequence[str], worker_counts: Sequence[int], profile: str) -> list[LoaderCase]:
    """Every loader case: device x storage x pin_memory (off, on) x worker count, in a stable order."""
    if profile not in LOADER_SIZES:
        raise UsageError(f"--perf-profile: unknown value {profile}; valid: {', '.join(LOADER_SIZES)}")
    return [
        LoaderCase(device, storage, workers, pin, profile)
        for device in devices
        for storage in STORAGES
        for pin in (False, True)
        for workers in worker_counts
    ]


def loader_skip_reason(
    case: LoaderCase, unavailable_reasons: Mapping[str, str], pinning_accelerator: str | None, torch_version: str
) -> str | None:
    """Why `case` is not run here, or None when it runs.

    `pinning_accelerator` is the device torch's DataLoader pins batches for in this process (None when it
    ignores pin_memory=True); a pinned case that would run unpinned would only repeat its unpinned twin.
    """
    if case.device in unavailable_reasons:
        return f"{case.device} unavailable: {unavailable_reasons[case.device]}"
    if not case.pin_memory:
        return None
    device = backend(case.device)
    if not device.is_accelerator:
        return "pin_memory speeds up copies to an accelerator; batches loaded for the cpu are not copied"
    if pinning_accelerator == case.device:
        return None
    if device.ignores_pin_memory:
        return (
            f"torch {torch_version} ignores pin_memory=True {device.ignores_pin_memory}, so a pinned case would "
            "repeat the unpinned one"
        )
    return (
        f"torch {torch_version} does not pin DataLoader batches for {case.device} here "
        f"(it pins for {pinning_accelerator or 'no device'})"
    )


# --- the datasets --------------------------------------------------------------------------------------

_MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
_STD = torch.tensor(IMAGENET_STD).view(3, 1, 1)


def normalize_image(pixels: torch.Tensor) -> torch.Tensor:
    """A (3, H, W) uint8 image as float32 in [0, 1], then standardised per channel with ImageNet's statistics."""
    return (pixels.to(torch.float32).div_(255) - _MEAN) / _STD


class ImageDataset(Dataset):
    """Image-like samples with labels: item i is (image, i % 1000).

    The image is float32 (3, H, W) normalised with ImageNet's statistics, or the stored uint8 pixels when
    `normalize` is False.
    """

    def __init__(self, sample_count: int, normalize: bool = True) -> None:
        self.sample_count = sample_count
        self.normalize = normalize

    def __len__(self) -> int:
        return self.sample_count

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        pixels = self.pixels(index)
        return (normalize_image(pixels) if self.normalize else pixels), index % CLASS_COUNT

    def pixels(self, index: int) -> torch.Tensor:
        """The stored uint8 pixels of sample `index`, (C, H, W)."""
        raise NotImplementedError


class InMemoryImages(ImageDataset):
    """Samples held in one uint8 tensor (N, C, H, W) in the loading process's memory.

    Worker processes share it: forked workers inherit it, spawned workers (macOS) receive it through
    torch's shared-memory pickling, not as a copy per worker.
    """

    def __init__(self, images: torch.Tensor, normalize: bool = True) -> None:
        super().__init__(len(images), normalize)
        self.images = images

    def pixels(self, index: int) -> torch.Tensor:
        return self.images[index]


class MemmapImages(ImageDataset):
    """Samples read from a uint8 `.npy` file through a numpy memmap (`np.load(..., mmap_mode="r")`).

    Each process maps the file itself on first use: pickling the dataset for a spawned worker sends the path,
    not the mapped array (numpy would pickle a memmap as a full in-memory copy).
    """

    def __init__(self, path: Path, normalize: bool = True) -> None:
        images = np.load(path, mmap_mode="r")
        if images.dtype != np.uint8 or images.ndim != 4:
            raise ValueError(f"{path}: expected a uint8 array (N, C, H, W), found {images.dtype} {images.shape}")
        super().__init__(len(images), normalize)
        self.path = Path(path)
        self._images: np.memmap | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_images": None}

    def pixels(self, index: int) -> torch.Tensor:
        if self._images is None:
            self._images = np.load(self.path, mmap_mode="r")
        # np.array copies the sample out of the read-only mapping, which torch.from_numpy cannot wrap.
        return torch.from_numpy(np.array(self._images[index]))


def random_images(size: LoaderSize, seed: int = 0) -> np.ndarray:
    """`size.samples` random uint8 images of `size.sample_shape`, (N, C, H, W); the same for the same seed."""
    generator = np.random.default_rng(seed)
    return generator.integers(0, 256, size=(size.samples, *size.sample_shape), dtype=np.uint8)


def make_image_datasets(size: LoaderSize, folder: Path, seed: int = 0) -> dict[str, ImageDataset]:
    """The two storages of the same random images: `memory` (a tensor) and `memmap` (`folder/images.npy`,
    written here); keyed by storage name."""
    images = random_images(size, seed)
    path = Path(folder) / "images.npy"
    np.save(path, images)
    return {"memory": InMemoryImages(torch.from_numpy(images)), "memmap": MemmapImages(path)}


# --- loading and timing --------------------------------------------------------------------------------


def pinning_accelerator() -> str | None:
    """The device torch's DataLoader pins batches for in this process, or None where it ignores
    pin_memory=True (no accelerator; MPS in torch 2.13), found by loading one pinned batch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warning that pinning is ignored is the answer, not a problem
        (batch,) = next(iter(DataLoader(TensorDataset(torch.zeros(1)), pin_memory=True)))
        if not batch.is_pinned():
            return None
    accelerator = getattr(torch, "accelerator", None)
    current = accelerator.current_accelerator() if accelerator is not None else None
    return current.type if current is not None else "cuda"


def make_loader(dataset: ImageDataset, case: LoaderCase, batch_size: int) -> DataLoader:
    """The case's DataLoader, shuffled as for training (seeded); workers, spawned (`WORKER_START_METHOD`),
    persist between passes, so a pass does not pay for starting them."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
        num_workers=case.num_workers,
        pin_memory=case.pin_memory,
        persistent_workers=case.num_workers > 0,
        multiprocessing_context=WORKER_START_METHOD if case.num_workers > 0 else None,
    )


def load_pass(loader: DataLoader, device: str) -> int:
    """One full pass: every batch loaded and moved to `device` (nothing to move for the cpu); returns when
    the device has the last batch. Returns the number of samples loaded."""
    return _consume(iter(loader), device, non_blocking=loader.pin_memory)


def start_loader(loader: DataLoader, device: str) -> float:
    """The untimed first pass; returns the start-up time in seconds: from creating the first iterator, which
    starts the worker processes, to the first batch in hand."""
    started_s = time.perf_counter()
    batches = iter(loader)
    first = next(batches)
    startup_s = time.perf_counter() - started_s
    _consume(itertools.chain([first], batches), device, non_blocking=loader.pin_memory)
    return startup_s


def _consume(batches: Iterator[tuple[torch.Tensor, torch.Tensor]], device: str, non_blocking: bool) -> int:
    samples = 0
    for images, labels in batches:
        if backend(device).is_accelerator:
            images.to(device, non_blocking=non_blocking)
            labels.to(device, non_blocking=non_blocking)
        samples += len(labels)
    backend(device).synchronize()
    return samples


def run_loader_case(benchmark: Any, case: LoaderCase, dataset: ImageDataset) -> dict[str, Any]:
    """Benchmark `case` with the pytest-benchmark fixture, one full pass a round; return the extra_info
    it recorded (`samples_per_s`, `startup_s` and the case's facts)."""
    size = LOADER_SIZES[case.profile]
    loader = make_loader(dataset, case, size.batch_size)
    startup_s = start_loader(loader, case.device)
    benchmark(load_pass, loader, case.device)
    extra_info: dict[str, Any] = {
        "kind": "dataloader",
        "device": case.device,
        "profile": case.profile,
        "storage": case.storage,
        "num_workers": case.num_workers,
        "pin_memory": case.pin_memory,
        "persistent_workers": loader.persistent_workers,
        "start_method": WORKER_START_METHOD if case.num_workers else None,
        "batch_size": size.batch_size,
        "batches_per_pass": size.batches,
        "sample_shape": list(size.sample_shape),
        "normalize": dataset.normalize,
        "startup_s": startup_s,
    }
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None under --benchmark-disable, where the pass ran once, untimed
        extra_info["samples_per_s"] = size.samples / stats.stats.median
    benchmark.extra_info.update(extra_info)
    return extra_info
