"""Thin pytest glue: the options, the case matrix as parametrization, the `perf_run` fixture, and the hooks that make
the session's plan, show progress and write the report. Every decision is made elsewhere
(perfsuite.session.pytest_session and the stages it calls)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from perfsuite.errors import CaseFailed, CaseSkipped, UsageError
from perfsuite.matrix.cases import build_matrix, runs_dataloader, skip_reason
from perfsuite.options import paths, settings
from perfsuite.records import EAGER, Case, Measurement
from perfsuite.render.results import session_header
from perfsuite.run import devices
from perfsuite.session.pytest_session import Session, round_settings, start_session, thread_warnings
from perfsuite.workloads import default_model_names, model_facts, registered_workloads

_SETTINGS = pytest.StashKey[settings.Settings]()
_MATRIX = pytest.StashKey[list[Case]]()
_SKIPS = pytest.StashKey[dict[str, str]]()
_SESSION = pytest.StashKey[Session]()
_STARTED_S = pytest.StashKey[float]()
_RUN_INSTEAD = pytest.StashKey[list[str]]()
DATALOADER_MARKER = "perf_dataloader"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfsuite", "perfsuite benchmark matrix (also settable in [tool.perfsuite])")
    for option in settings.OPTIONS:
        switch: dict[str, Any] = {"action": "store_true", "default": None} if option.switch else {}
        group.addoption(option.flag, help=option.help, **switch)


def session_settings(config: pytest.Config) -> settings.Settings:
    """The session's validated settings (command line over [tool.perfsuite] over defaults), read once; benchmark
    modules of their own (tests/benchmarks/test_dataloader.py) size and place their cases by its matrix."""
    if _SETTINGS not in config.stash:
        cli = settings.RawSettings(**{o.raw_name: config.getoption(o.flag) for o in settings.OPTIONS})
        try:
            config.stash[_SETTINGS] = settings.load_settings(
                cli, config.rootpath / "pyproject.toml", list(registered_workloads()),
                devices.available_accelerators() or ["cpu"],
            )
        except UsageError as error:
            raise pytest.UsageError(str(error)) from None
    return config.stash[_SETTINGS]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Where a path option's separate value moved pytest's rootdir (`perfsuite.options.paths`), this reading of the
    command line only runs the session again (`pytest_cmdline_main`): its conftest files are not imported (from
    the wrong rootdir, and the session imports them)."""
    params = early_config.invocation_params
    args = paths.args_to_run_instead(params.args, params.dir)
    if args is not None:
        early_config.stash[_RUN_INSTEAD] = args
        early_config.known_args_namespace.noconftest = True


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | pytest.ExitCode | None:
    """The session of the `--option=value` spelling, run as `pytest.main` in this process, when a path option's
    separate value moved the rootdir; its exit status is this one's (nothing of this reading was configured,
    collected or written)."""
    args = config.stash.get(_RUN_INSTEAD, None)
    return None if args is None else pytest.main(args, plugins=config.invocation_params.plugins)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: a perfsuite benchmark case")
    config.addinivalue_line("markers", f"{DATALOADER_MARKER}: a DataLoader case, selected with --perf-model dataloader")
    try:
        paths.make_benchmark_json_folder(config.getoption("benchmark_json", None))
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    # Validate the options now, so a bad value is a usage error before collection starts. Workloads registered
    # in the root conftest.py (loaded before this hook) are known by now.
    chosen = session_settings(config)
    config.stash[_MATRIX] = build_matrix(chosen.matrix, model_facts())
    if chosen.threads is not None and chosen.processes == 1:
        import torch

        torch.set_num_threads(chosen.threads)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "perf_case" not in metafunc.fixturenames:
        return
    cases, models = metafunc.config.stash[_MATRIX], model_facts()
    compiling = any(case.compile != EAGER for case in cases)
    facts = devices.device_facts(compiling, session_settings(metafunc.config).ddp_processes)
    skips = metafunc.config.stash.setdefault(_SKIPS, {})
    params = []
    for case in cases:
        reason = skips[case.benchmark_id] = skip_reason(case, models[case.model], facts) or ""
        marks = [pytest.mark.perf, *([pytest.mark.skip(reason=reason)] if reason else [])]
        params.append(pytest.param(case, id=case.benchmark_id, marks=marks))
    metafunc.parametrize("perf_case", params)


def pytest_report_header(config: pytest.Config) -> list[str]:
    chosen = config.stash.get(_SETTINGS, None)
    if chosen is None:
        return []
    models = chosen.matrix.models or default_model_names(registered_workloads())
    return (session_header(chosen.matrix, chosen.profile_chosen, models, chosen.processes) + thread_warnings(chosen)
            + devices.assumed_facts_notes(chosen.matrix.devices))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --benchmark-only only benchmarks are collected (the rest would only be skipped), and the DataLoader
    cases only when no model is chosen or `dataloader` is among the models: the others are deselected."""
    benchmark_only = bool(config.getoption("benchmark_only", False))
    dataloader = runs_dataloader(session_settings(config).matrix)
    kept = [item for item in items if (_is_benchmark(item) or not benchmark_only)
            and (dataloader or not item.get_closest_marker(DATALOADER_MARKER)) and not _without_case(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _without_case(item: pytest.Item) -> bool:
    """Whether `item` takes perf_case but no case was selected for it (pytest would collect it as `[NOTSET]`)."""
    case = getattr(getattr(item, "callspec", None), "params", {}).get("perf_case")
    return "perf_case" in getattr(item, "fixturenames", ()) and not isinstance(case, Case)


def _is_benchmark(item: pytest.Item) -> bool:
    """Whether `item` is a benchmark: it takes pytest-benchmark's `benchmark` fixture (perf_run does)."""
    return "benchmark" in getattr(item, "fixturenames", ())


def pytest_collection_finish(session: pytest.Session) -> None:
    """The session's plan, made once: the perf cases collected and not skipped, measured as the settings say."""
    config, chosen = session.config, session_settings(session.config)
    callspecs = (getattr(item, "callspec", None) for item in session.items if not item.get_closest_marker("skip"))
    cases = tuple(c for spec in callspecs if spec is not None and isinstance(c := spec.params.get("perf_case"), Case))
    rounds = round_settings(config.getoption)
    try:
        started = start_session(chosen, cases, rounds, config.rootpath, show=lambda line: show_now(config, line))
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    if not config.getoption("benchmark_skip", False):
        started.benchmarks = sum(_is_benchmark(item) for item in session.items)
    config.stash[_SESSION], config.stash[_STARTED_S] = started, time.perf_counter()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    result = yield
    session = item.config.stash.get(_SESSION, None)
    if session is not None and session.benchmarks and _is_benchmark(item):
        session.benchmark_done(time.perf_counter() - item.config.stash[_STARTED_S])
    return result


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    skips = {benchmark_id: reason for benchmark_id, reason in config.stash.get(_SKIPS, {}).items() if reason}
    lines = [f"perfsuite: {count} case(s) skipped: {reason}" for reason, count in Counter(skips.values()).items()]
    if config.get_verbosity() > 0:
        lines += [f"  skipped {benchmark_id}: {reason}" for benchmark_id, reason in skips.items()]
    return lines


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    machine_info["perfsuite"] = devices.machine_fingerprint()


def show_now(config: pytest.Config, line: str) -> None:
    """Write `line` to the terminal while a test runs: pytest captures the test's output, so the capture is
    suspended for the line (as pytest's own live logging does)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None:
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(line)


@pytest.fixture
def perf_run(benchmark: Any, request: pytest.FixtureRequest) -> Callable[[Case], Measurement | None]:
    """Run a case: `perf_run(perf_case)` measures it (in this process, or in --perf-processes fresh ones),
    judges it against this machine's baseline and returns its Measurement (None when no round was timed).

    A regression fails the test, and so does a case that fails to measure (the same message with one process or K).
    A case that runs out of device memory is skipped as such, and so are the larger batch sizes of its sweep.
    """
    session = request.config.stash[_SESSION]

    def measure(case: Case) -> Measurement | None:
        try:
            return session.take(case, benchmark)
        except CaseSkipped as skipped:
            pytest.skip(str(skipped))
        except CaseFailed as failed:
            raise pytest.fail.Exception(str(failed), pytrace=False) from None

    return measure


def pytest_sessionfinish(session: pytest.Session) -> None:
    perf_session = session.config.stash.get(_SESSION, None)
    if perf_session is None or not perf_session.plan.cases:
        return
    interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
    if not perf_session.finish(session.config.rootpath / session_settings(session.config).summary_dir, interrupted):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    for title, text in session.report() if session is not None else []:
        terminalreporter.section(title)
        terminalreporter.write_line(text.rstrip("\n"))
