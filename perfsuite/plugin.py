"""Thin pytest glue: options, the case matrix as parametrization, the `perf_run` fixture, and the hooks that start the
session's plan, show progress and write the gate's files."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from perfsuite import path_options, settings
from perfsuite.errors import BadFileError, UsageError
from perfsuite.gate import Gate, current_commit
from perfsuite.matrix.cases import build_matrix, runs_dataloader, skip_reason, sweep_skip_reason
from perfsuite.records import Case, Failure, Measurement
from perfsuite.render import summary
from perfsuite.render.progress import progress_line
from perfsuite.render.results import render_results, render_results_markdown, session_header
from perfsuite.render.verdicts import verdict_message
from perfsuite.run import devices
from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan
from perfsuite.session import Session
from perfsuite.workloads import default_model_names, model_facts, registered_workloads

_SETTINGS = pytest.StashKey[settings.Settings]()
_MATRIX = pytest.StashKey[list[Case]]()
_SKIPS = pytest.StashKey[dict[str, str]]()
_GATE = pytest.StashKey[Gate]()
_SESSION = pytest.StashKey[Session]()
_WRITTEN = pytest.StashKey[list[str]]()
_STARTED_S = pytest.StashKey[float]()
DATALOADER_MARKER = "perf_dataloader"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfsuite", "perfsuite benchmark matrix (also settable in [tool.perfsuite])")
    for option in settings.OPTIONS:
        group.addoption(option.flag, help=option.help, **({"action": "store_true", "default": None}
                                                            if option.switch else {}))


def session_settings(config: pytest.Config) -> settings.Settings:
    """The session's validated settings (command line over [tool.perfsuite] over defaults), read once."""
    if _SETTINGS not in config.stash:
        cli = settings.RawSettings(**{o.field_name: config.getoption(o.flag) for o in settings.OPTIONS})
        try:
            config.stash[_SETTINGS] = settings.load_settings(
                cli, config.rootpath / "pyproject.toml", list(registered_workloads()),
                devices.available_accelerators() or ["cpu"],
            )
        except UsageError as error:
            raise pytest.UsageError(str(error)) from None
    return config.stash[_SETTINGS]


def matrix_options(config: pytest.Config) -> Any:
    """The session's matrix choices; other benchmark modules (tests/benchmarks/test_dataloader.py) size and place
    their cases by them."""
    return session_settings(config).matrix


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: a perfsuite benchmark case")
    config.addinivalue_line("markers", f"{DATALOADER_MARKER}: a DataLoader case, selected with --perf-model dataloader")
    args = list(config.invocation_params.args)
    moving = path_options.rootdir_moving_paths(args, config.invocation_params.dir)
    if moving:
        # Both spellings must behave alike: run again with `--option=value`, before anything was collected or
        # written, so pytest picks the project's rootdir. Called as pytest.main(...) from a program, refuse instead.
        command = path_options.relaunch_command(sys.orig_argv, args)
        if command is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, command)
        raise pytest.UsageError(path_options.refusal(moving, config.rootpath))
    # Validate the options now, so a bad value is a usage error before collection starts. Workloads registered
    # in the root conftest.py (loaded before this hook) are known by now.
    chosen = session_settings(config)
    config.stash[_MATRIX] = build_matrix(chosen.matrix, model_facts())
    if chosen.threads is not None and chosen.processes == 1:
        import torch

        torch.set_num_threads(chosen.threads)
    config.stash[_GATE] = Gate(
        chosen, config.rootpath / chosen.baseline_dir, devices.machine_fingerprint(), current_commit(config.rootpath)
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "perf_case" not in metafunc.fixturenames:
        return
    cases = metafunc.config.stash[_MATRIX]
    compiling = any(case.compile != "eager" for case in cases)
    facts = devices.device_facts(compiling, session_settings(metafunc.config).ddp_processes)
    models = model_facts()
    skips = metafunc.config.stash.setdefault(_SKIPS, {})
    params = []
    for case in cases:
        reason = skip_reason(case, models[case.model], facts)
        if reason:
            skips[case.benchmark_id] = reason
        marks = [pytest.mark.perf, *([pytest.mark.skip(reason=reason)] if reason else [])]
        params.append(pytest.param(case, id=case.benchmark_id, marks=marks))
    metafunc.parametrize("perf_case", params)


def pytest_report_header(config: pytest.Config) -> list[str]:
    chosen = config.stash.get(_SETTINGS, None)
    if chosen is None:
        return []
    models = chosen.matrix.models or default_model_names(registered_workloads())
    return session_header(chosen.matrix, chosen.profile_chosen, models, chosen.processes)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --benchmark-only only benchmarks are collected (the rest would only be skipped), and the DataLoader
    cases only when no model is chosen or `dataloader` is among the models: the others are deselected."""
    benchmark_only = bool(config.getoption("benchmark_only", False))
    dataloader = runs_dataloader(session_settings(config).matrix)
    kept = [item for item in items if (_is_benchmark(item) or not benchmark_only)
            and (dataloader or not item.get_closest_marker(DATALOADER_MARKER))]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _is_benchmark(item: pytest.Item) -> bool:
    """Whether `item` is a benchmark: it takes pytest-benchmark's `benchmark` fixture (perf_run does)."""
    return "benchmark" in getattr(item, "fixturenames", ())


def pytest_collection_finish(session: pytest.Session) -> None:
    """The session's plan, made once: the perf cases collected and not skipped, measured as the settings say."""
    config, chosen = session.config, session_settings(session.config)
    cases = tuple(case for item in session.items if (case := _case_of(item)) is not None)
    sources = {}
    if chosen.processes > 1:
        from perfsuite.workloads import get_workload
        from perfsuite.workloads.sources import workload_sources

        sources = {case.model: workload_sources(get_workload(case.model)) for case in cases}
    rounds = RoundSettings(
        min_rounds=int(config.getoption("benchmark_min_rounds", 5) or 5),
        max_time_s=float(config.getoption("benchmark_max_time", 1.0) or 1.0),
        min_time_s=float(config.getoption("benchmark_min_time", 5e-6) or 5e-6),
    )
    plan = SessionPlan(
        cases, chosen.processes, MeasureSettings(chosen.warmup_steps, chosen.ddp_processes), rounds, chosen.isolation,
        chosen.threads, sources, (str(config.rootpath),),
    )
    config.stash[_SESSION] = Session(plan, show=lambda line: show_now(config, line))
    config.stash[_STARTED_S] = time.perf_counter()


def _case_of(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("perf_case") if callspec is not None else None
    return case if isinstance(case, Case) and not item.get_closest_marker("skip") else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After each benchmark measured in the pytest process, a line with the cases done, the time so far and an
    estimate of what is left (with --perf-processes the processes' own lines say it instead)."""
    result = yield
    config = item.config
    run = config.stash.get(_SESSION, None)
    if run is not None and run.plan.in_pytest_process and _is_benchmark(item) and not config.getoption(
        "benchmark_skip", False
    ):
        benchmarks = sum(_is_benchmark(i) for i in item.session.items)
        done = sum(_is_benchmark(i) for i in item.session.items[: item.session.items.index(item) + 1])
        show_now(config, progress_line(done, benchmarks, time.perf_counter() - config.stash[_STARTED_S]))
    return result


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    skips: dict[str, str] = config.stash.get(_SKIPS, {})
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
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line(line)


@pytest.fixture
def perf_run(benchmark: Any, request: pytest.FixtureRequest) -> Callable[[Case], Measurement | None]:
    """Run a case: `perf_run(perf_case)` measures it (in this process, or in --perf-processes fresh ones),
    judges it against this machine's baseline and returns its Measurement (None when no round was timed).

    A regression fails the test, and so does a case that fails to measure (the same message with one process or K).
    A case that runs out of device memory is skipped as such, and so are the larger batch sizes of its sweep.
    """
    run, gate = request.config.stash[_SESSION], request.config.stash[_GATE]

    def measure(case: Case) -> Measurement | None:
        reason = sweep_skip_reason(case, run.out_of_memory)
        if reason:
            pytest.skip(reason)
        result = run.take(case, benchmark)
        if isinstance(result, Failure):
            text = result.message + (f"\n{result.details}" if result.details else "")
            if result.skips:
                pytest.skip(result.message)
            gate.errors[case.benchmark_id] = result.message
            raise pytest.fail.Exception(text, pytrace=False)
        if result is not None:
            if not run.plan.in_pytest_process:
                feed_benchmark(benchmark, result)
            judge(gate, result)
        return result

    return measure


def feed_benchmark(benchmark: Any, measurement: Measurement) -> None:
    """Give pytest-benchmark's fixture the rounds of every run, so its table and JSON show them (its statistics
    then pool the rounds of all processes; the per-run medians are in extra_info)."""
    from perfsuite.run.measure import extra_info

    if getattr(benchmark, "disabled", False) or not hasattr(benchmark, "_make_stats"):
        return
    benchmark._mode = "perfsuite processes"
    stats = benchmark._make_stats(1)
    for round_time_s in measurement.round_times_s:
        stats.update(round_time_s)
    benchmark.extra_info.update(extra_info(measurement.last))


def judge(gate: Gate, measurement: Measurement) -> None:
    """Judge one measurement; a regression fails its test unless this session records baselines."""
    from perfsuite.run.measure import warn_of_memory_growth

    any(warn_of_memory_growth(run) for run in measurement.runs)  # one warning per case at most
    try:
        verdict = gate.check(measurement)
    except BadFileError as error:
        gate.errors[measurement.case.benchmark_id] = str(error)
        raise pytest.fail.Exception(f"{measurement.case.benchmark_id}: {error}", pytrace=False) from None
    if verdict is not None and verdict.gate_failed and not gate.records:
        pytest.fail(verdict_message(verdict), pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    gate, run = config.stash.get(_GATE, None), config.stash.get(_SESSION, None)
    if gate is None or run is None or not run.plan.cases:
        return
    for measurement in run.finished_unjudged():  # an interrupt kept these whole: judge them as their tests would
        with contextlib.suppress(pytest.fail.Exception):
            judge(gate, measurement)
    written: list[str] = []
    if gate.records:
        files, problems = gate.record()
        written += [f"recorded {path}" for path in files] + problems
        if problems:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    summary_dir = config.rootpath / session_settings(config).summary_dir
    written += [f"wrote {path}" for path in gate.write_summary(summary_dir)]
    results_path = summary_dir / "results.md"
    results_path.write_text(render_results_markdown(gate.measurements, _verdict_names(gate)), encoding="utf-8")
    written.append(f"wrote {results_path}")
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        written.append(
            f"interrupted: the files hold the {len(gate.measurements)} of {len(run.plan.cases)} cases measured "
            "before the stop"
        )
    config.stash[_WRITTEN] = written


def _verdict_names(gate: Gate) -> dict[str, str]:
    return {verdict.benchmark_id: verdict.status for verdict in gate.verdicts}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is None or (not gate.verdicts and not gate.errors):
        return
    if gate.measurements:
        terminalreporter.section("perfsuite results")
        terminalreporter.write_line(render_results(gate.measurements, _verdict_names(gate)))
    terminalreporter.section("perfsuite regression gate")
    terminalreporter.write_line(summary.render_terminal(gate.verdicts, gate.errors))
    for line in config.stash.get(_WRITTEN, []):
        terminalreporter.write_line(line)

