"""Thin pytest glue: options, the case matrix as parametrization, the `perf_run` fixture, machine info."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from perfsuite import devices, settings
from perfsuite.cases import Case, UsageError, build_matrix, skip_reason
from perfsuite.runner import DEFAULT_WARMUP_STEPS, run_case
from perfsuite.workloads import registered_workloads

_MATRIX_KEY = pytest.StashKey[list]()
_SKIPS_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfsuite", "perfsuite benchmark matrix (also settable in [tool.perfsuite])")
    group.addoption("--perf-device", help="comma-separated cpu,cuda,mps (default: every available accelerator, "
                    "else cpu)")
    group.addoption("--perf-dtype", help="comma-separated fp32,bf16,fp16; bf16/fp16 are autocast mixed precision "
                    "(default: fp32,bf16)")
    group.addoption("--perf-model", help="comma-separated model names, or all (default: all registered)")
    group.addoption("--perf-batch-size", help="comma-separated batch sizes (default: the profile's per model)")
    group.addoption("--perf-mode", help="comma-separated train,infer (default: both where the model has them)")
    group.addoption("--perf-profile", help="smoke | standard | full (default: standard)")
    group.addoption("--perf-warmup", help=f"untimed warm-up steps per case (default: {DEFAULT_WARMUP_STEPS})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: a perfsuite benchmark case")
    # Validate the options now, so a bad value is a usage error before collection starts. Workloads
    # registered in the root conftest.py (loaded before this hook) are known by now.
    case_matrix(config)


def _raw_settings(config: pytest.Config) -> settings.RawSettings:
    cli = settings.RawSettings(**{
        key.replace("-", "_"): config.getoption(f"--perf-{key}") for key in settings.SETTING_KEYS
    })
    pyproject = config.rootpath / "pyproject.toml"
    return settings.merge_settings(cli, settings.read_pyproject_settings(pyproject), str(pyproject))


def case_matrix(config: pytest.Config) -> list[Case]:
    """The cases the options select (computed once per session)."""
    if _MATRIX_KEY not in config.stash:
        try:
            raw = _raw_settings(config)
            workloads = registered_workloads()
            options = settings.matrix_options(raw, list(workloads), devices.available_accelerators() or ["cpu"])
            settings.warmup_steps(raw, DEFAULT_WARMUP_STEPS)
        except UsageError as error:
            raise pytest.UsageError(str(error)) from None
        config.stash[_MATRIX_KEY] = build_matrix(options, workloads)
    return config.stash[_MATRIX_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "perf_case" not in metafunc.fixturenames:
        return
    facts = devices.device_facts()
    cases = case_matrix(metafunc.config)
    skips = metafunc.config.stash.setdefault(_SKIPS_KEY, {})
    params = []
    for case in cases:
        reason = skip_reason(case, facts)
        marks = [pytest.mark.perf]
        if reason:
            skips[case.benchmark_id] = reason
            marks.append(pytest.mark.skip(reason=reason))
        params.append(pytest.param(case, id=case.benchmark_id, marks=marks))
    metafunc.parametrize("perf_case", params)


def pytest_report_header(config: pytest.Config) -> list[str]:
    try:
        raw = _raw_settings(config)
    except UsageError as error:
        return [f"perfsuite: {error}"]
    return [
        f"perfsuite: profile={raw.profile or 'standard'} device={raw.device or 'default'} "
        f"dtype={raw.dtype or 'default'} model={raw.model or 'all'}"
    ]


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    skips: dict[str, str] = config.stash.get(_SKIPS_KEY, {})
    if not skips:
        return []
    by_reason = Counter(skips.values())
    lines = [f"perfsuite: {count} case(s) skipped: {reason}" for reason, count in by_reason.items()]
    if config.get_verbosity() > 0:
        lines += [f"  skipped {benchmark_id}: {reason}" for benchmark_id, reason in skips.items()]
    return lines


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    machine_info["perfsuite"] = devices.machine_fingerprint()


@pytest.fixture
def perf_run(benchmark: Any, request: pytest.FixtureRequest) -> Callable[[Case], dict[str, Any]]:
    """Run a case through the `benchmark` fixture: `perf_run(perf_case)` returns its figures."""
    warmup = settings.warmup_steps(_raw_settings(request.config), DEFAULT_WARMUP_STEPS)

    def run(case: Case) -> dict[str, Any]:
        return run_case(benchmark, case, warmup_steps=warmup)

    return run
