"""DataLoader throughput: num_workers x pin_memory x storage (memory, memmap), one full pass a round.

The sizes follow --perf-profile and the destination devices --perf-device (both also from
[tool.perfsuite]); the worker counts come from the environment variable PERFSUITE_DATALOADER_WORKERS
(default 0,2,4,8). The images are written once per session to a temporary folder.
"""

import os

import pytest

from perfsuite.matrix.cases import UsageError
from perfsuite.plugin import session_settings
from perfsuite.run import devices
from perfsuite.run.dataloading import (
    LOADER_SIZES,
    WORKERS_ENV,
    build_loader_cases,
    loader_skip_reason,
    make_image_datasets,
    parse_worker_counts,
    pinning_accelerator,
    run_loader_case,
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "loader_case" not in metafunc.fixturenames:
        return
    options = session_settings(metafunc.config).matrix
    try:
        worker_counts = parse_worker_counts(os.environ.get(WORKERS_ENV))
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    facts = devices.device_facts()
    pinning = pinning_accelerator()
    torch_version = ".".join(map(str, facts.torch_version))
    params = []
    for case in build_loader_cases(options.devices, worker_counts, options.profile):
        reason = loader_skip_reason(case, facts.unavailable_reasons, pinning, torch_version)
        marks = [pytest.mark.perf_dataloader, *([pytest.mark.skip(reason=reason)] if reason else [])]
        params.append(pytest.param(case, id=case.benchmark_id, marks=marks))
    metafunc.parametrize("loader_case", params)


@pytest.fixture(scope="session")
def image_datasets(request, tmp_path_factory):
    """The same random images in memory and as a memmap file, at the session's profile size."""
    size = LOADER_SIZES[session_settings(request.config).matrix.profile]
    return make_image_datasets(size, tmp_path_factory.mktemp("dataloader"))


def test_dataloader(benchmark, loader_case, image_datasets):
    run_loader_case(benchmark, loader_case, image_datasets[loader_case.storage])
