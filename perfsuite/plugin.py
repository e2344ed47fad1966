"""Thin pytest glue: options, the case matrix as parametrization, the `perf_run` fixture, machine info."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from perfsuite import settings
from perfsuite.gate import Gate, GateSettings, current_commit
from perfsuite.judge.verdicts import parse_tolerance_table
from perfsuite.matrix.cases import Case, MatrixOptions, UsageError, build_matrix, sweep_key, sweep_skip_reason
from perfsuite.render import summary
from perfsuite.run import ddp as distributed
from perfsuite.run import devices
from perfsuite.run.runner import DEFAULT_WARMUP_STEPS, CaseOutOfMemory, case_result, case_skip_reason, run_case
from perfsuite.store.baselines import BaselineFileError
from perfsuite.workloads import registered_workloads

_MATRIX_KEY = pytest.StashKey[list]()
_OPTIONS_KEY = pytest.StashKey[MatrixOptions]()
_WARMUP_KEY = pytest.StashKey[int]()
_SKIPS_KEY = pytest.StashKey[dict]()
_OUT_OF_MEMORY_KEY = pytest.StashKey[dict]()
_GATE_KEY = pytest.StashKey[Gate]()
_WRITTEN_KEY = pytest.StashKey[list]()


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
    group.addoption("--perf-ddp-processes",
                    help="processes of a train-ddp case, one device each (default: one per CUDA GPU, 2 on cpu; "
                    f"also ${distributed.PROCESSES_ENV})")
    group.addoption("--perf-update-baseline", action="store_true",
                    help="record the cases run into this machine's baseline files (others are kept)")
    group.addoption("--perf-baseline-dir", help="where baselines live (default: baselines/ beside pyproject.toml)")
    group.addoption("--perf-tolerance", type=float,
                    help="time band as a fraction for every case, e.g. 0.15 "
                    "(default 0.10, or [tool.perfsuite.tolerance])")
    group.addoption("--perf-memory-tolerance", type=float,
                    help="memory band as a fraction (default 0.10, or [tool.perfsuite.memory_tolerance])")
    group.addoption("--perf-summary-dir",
                    help="where the verdicts go as summary.json and summary.md (default: .perfsuite/)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: a perfsuite benchmark case")
    # Validate the options now, so a bad value is a usage error before collection starts. Workloads
    # registered in the root conftest.py (loaded before this hook) are known by now.
    case_matrix(config)
    _set_ddp_processes(config)
    fingerprint = devices.machine_fingerprint()
    config.stash[_GATE_KEY] = Gate(_gate_settings(config), fingerprint, current_commit(config.rootpath))


def _set_ddp_processes(config: pytest.Config) -> None:
    # prepare_case(case, workload) has no room for it, so the count reaches perfsuite.run.ddp (and
    # pytest-xdist workers, if any) through the environment.
    given = config.getoption("--perf-ddp-processes")
    if given is None:
        return
    try:
        distributed.ddp_processes("cpu", 1, given)
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    os.environ[distributed.PROCESSES_ENV] = str(given).strip()


def _gate_settings(config: pytest.Config) -> GateSettings:
    pyproject = config.rootpath / "pyproject.toml"
    table = settings.read_pyproject_settings(pyproject)
    where = f"{pyproject} [tool.perfsuite"
    try:
        tolerances = parse_tolerance_table(table.get("tolerance", {}), f"{where}.tolerance]")
        memory_tolerances = parse_tolerance_table(table.get("memory_tolerance", {}), f"{where}.memory_tolerance]")
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    baseline_dir = config.getoption("--perf-baseline-dir") or table.get("baseline-dir") or "baselines"
    return GateSettings(
        baseline_dir=config.rootpath / baseline_dir,
        update=config.getoption("--perf-update-baseline"),
        tolerance_overrides=tolerances,
        memory_tolerance_overrides=memory_tolerances,
        cli_tolerance=config.getoption("--perf-tolerance"),
        cli_memory_tolerance=config.getoption("--perf-memory-tolerance"),
    )


def _raw_settings(config: pytest.Config) -> settings.RawSettings:
    cli = settings.RawSettings(**{
        key.replace("-", "_"): config.getoption(f"--perf-{key}") for key in settings.SETTING_KEYS
    })
    pyproject = config.rootpath / "pyproject.toml"
    return settings.merge_settings(cli, settings.read_pyproject_settings(pyproject), str(pyproject))


def matrix_options(config: pytest.Config) -> MatrixOptions:
    """The session's validated choices (devices, dtypes, models, ..., profile), computed once; other
    benchmark modules (tests/benchmarks/test_dataloader.py) size and place their cases by them."""
    if _OPTIONS_KEY not in config.stash:
        try:
            raw = _raw_settings(config)
            workloads = registered_workloads()
            options = settings.matrix_options(raw, list(workloads), devices.available_accelerators() or ["cpu"])
            warmup = settings.warmup_steps(raw, DEFAULT_WARMUP_STEPS)
        except UsageError as error:
            raise pytest.UsageError(str(error)) from None
        config.stash[_OPTIONS_KEY] = options
        config.stash[_WARMUP_KEY] = warmup
    return config.stash[_OPTIONS_KEY]


def case_matrix(config: pytest.Config) -> list[Case]:
    """The cases the options select (computed once per session)."""
    if _MATRIX_KEY not in config.stash:
        config.stash[_MATRIX_KEY] = build_matrix(matrix_options(config), registered_workloads())
    return config.stash[_MATRIX_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "perf_case" not in metafunc.fixturenames:
        return
    facts = devices.device_facts()
    cases = case_matrix(metafunc.config)
    skips = metafunc.config.stash.setdefault(_SKIPS_KEY, {})
    params = []
    for case in cases:
        reason = case_skip_reason(case, facts)
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
    """Run a case through the `benchmark` fixture: `perf_run(perf_case)` returns its figures.

    The result is judged against this machine's baseline; a regression fails the test. A case that
    runs out of device memory is skipped as such, and so are the larger batch sizes of its sweep; the
    session goes on with the next case.
    """
    matrix_options(request.config)  # validates the options and stashes the warm-up count
    warmup = request.config.stash[_WARMUP_KEY]
    out_of_memory = request.config.stash.setdefault(_OUT_OF_MEMORY_KEY, {})

    def run(case: Case) -> dict[str, Any]:
        reason = sweep_skip_reason(case, out_of_memory)
        if reason:
            pytest.skip(reason)
        try:
            figures = run_case(benchmark, case, warmup_steps=warmup)
        except CaseOutOfMemory as error:
            out_of_memory[sweep_key(case)] = case.batch_size
            pytest.skip(str(error))
        result = case_result(case, figures)
        if result is not None:
            _judge(request.config, result)
        return figures

    return run


def _judge(config: pytest.Config, result: Any) -> None:
    gate = config.stash[_GATE_KEY]
    try:
        verdict = gate.check(result)
    except BaselineFileError as error:
        pytest.fail(f"{result.benchmark_id}: {error}", pytrace=False)
    if verdict.gate_failed and not gate.settings.update:
        pytest.fail(verdict.message, pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    gate = session.config.stash.get(_GATE_KEY, None)
    if gate is None or not gate.verdicts:
        return
    written = gate.record() if gate.settings.update else []
    summary_dir = session.config.getoption("--perf-summary-dir") or session.config.rootpath / ".perfsuite"
    written += gate.write_summary(session.config.rootpath / summary_dir)
    session.config.stash[_WRITTEN_KEY] = written


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE_KEY, None)
    if gate is None or not gate.verdicts:
        return
    terminalreporter.section("perfsuite regression gate")
    terminalreporter.write_line(summary.render_terminal(gate.verdicts))
    for path in config.stash.get(_WRITTEN_KEY, []):
        terminalreporter.write_line(f"wrote {path}")
