"""Thin pytest glue: options, the case matrix as parametrization, the `perf_run` fixture, the gate's hooks."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from perfsuite import settings as settings_module
from perfsuite.errors import BadFileError, UsageError
from perfsuite.gate import Gate, GateSettings, current_commit
from perfsuite.matrix.axes import ACCELERATOR_DEFAULT_PROFILE, CPU_DEFAULT_PROFILE, EAGER
from perfsuite.matrix.cases import MatrixOptions, build_matrix, runs_dataloader, sweep_key, sweep_skip_reason
from perfsuite.records import Case, Measurement, Run
from perfsuite.render import summary
from perfsuite.render.progress import progress_line
from perfsuite.render.results import render_results, render_results_markdown
from perfsuite.run import devices
from perfsuite.run.processes import ISOLATIONS, CaseOutcome, RoundSettings, measure_in_processes
from perfsuite.settings import Settings
from perfsuite.workloads import default_model_names, registered_workloads

_SETTINGS_KEY = pytest.StashKey[Settings]()
_MATRIX_KEY = pytest.StashKey[list[Case]]()
_SKIPS_KEY = pytest.StashKey[dict[str, str]]()
_OUT_OF_MEMORY_KEY = pytest.StashKey[dict[tuple[str, ...], int]]()
_GATE_KEY = pytest.StashKey[Gate]()
_WRITTEN_KEY = pytest.StashKey[list[str]]()
_OUTCOMES_KEY = pytest.StashKey[dict[str, CaseOutcome]]()
_MEASUREMENTS_KEY = pytest.StashKey[list[Measurement]]()
_PROGRESS_KEY = pytest.StashKey["Progress"]()
DATALOADER_MARKER = "perf_dataloader"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfsuite", "perfsuite benchmark matrix (also settable in [tool.perfsuite])")
    group.addoption("--perf-device", help="comma-separated cpu,cuda,mps (default: every available accelerator, "
                    "else cpu)")
    group.addoption("--perf-dtype", help="comma-separated fp32,bf16,fp16; bf16/fp16 are autocast mixed precision "
                    "(default: fp32,bf16)")
    group.addoption("--perf-model", help="comma-separated model names, dataloader (the DataLoader cases), or all "
                    "(default: your own models where your conftest registers any, else the built-in ones and the "
                    "DataLoader cases)")
    group.addoption("--perf-batch-size", help="comma-separated batch sizes (default: the profile's per model)")
    group.addoption("--perf-mode", help="comma-separated train,infer (default: both where the model has them)")
    group.addoption("--perf-profile", help="smoke | standard | full (default: standard where an accelerator runs, "
                    "smoke on the CPU alone)")
    group.addoption("--perf-compile", help="comma-separated eager,inductor,reduce-overhead,cuda-graph: the step as "
                    "written, through torch.compile, through torch.compile's CUDA-graph mode, or replayed as a "
                    "captured CUDA graph (default: eager)")
    group.addoption("--perf-warmup", help=f"untimed warm-up steps per case (default: "
                    f"{settings_module.DEFAULT_WARMUP_STEPS})")
    group.addoption("--perf-processes", help="measure every case in K fresh processes, interleaved across cases "
                    "(default: 1, in the pytest process); the gate judges runs, so K >= 3 calibrates it")
    group.addoption("--perf-isolation", choices=ISOLATIONS, default="case",
                    help="with --perf-processes: a fresh process per case (default) or per pass over all cases")
    group.addoption("--perf-threads", help="torch CPU threads in each measuring process (default: torch's)")
    group.addoption("--perf-ddp-processes",
                    help="processes of a train-ddp case, one device each (default: one per CUDA GPU, 2 on cpu)")
    group.addoption("--perf-update-baseline", action="store_true",
                    help="append this session's runs to each case's baseline history (others are kept)")
    group.addoption("--perf-rebaseline", action="store_true",
                    help="start the baseline history of each case run over (after a torch upgrade, say); an "
                    "unreadable baseline file is moved aside first")
    group.addoption("--perf-machine", help="name this machine's baseline files, e.g. ci-m2-max (default: from the "
                    "hardware)")
    group.addoption("--perf-baseline-dir", help="where baselines live (default: baselines/ beside pyproject.toml)")
    group.addoption("--perf-tolerance", help="time band for every case, e.g. 0.15 or 15% "
                    "(default 0.10, or [tool.perfsuite.tolerance])")
    group.addoption("--perf-memory-tolerance", help="memory band, e.g. 0.10 (default 0.10, or "
                    "[tool.perfsuite.memory_tolerance])")
    group.addoption("--perf-summary-dir", help="where the verdicts go as summary.json and summary.md "
                    "(default: .perfsuite/)")


def session_settings(config: pytest.Config) -> Settings:
    """The session's validated settings (command line over [tool.perfsuite] over defaults), read once."""
    if _SETTINGS_KEY not in config.stash:
        cli = settings_module.RawSettings(**{
            key.replace("-", "_"): config.getoption(f"--perf-{key.replace('_', '-')}")
            for key in (*settings_module.SETTING_KEYS, *settings_module.TABLE_KEYS)
        })
        try:
            config.stash[_SETTINGS_KEY] = settings_module.load_settings(
                cli, config.rootpath / "pyproject.toml", list(registered_workloads()),
                devices.available_accelerators() or ["cpu"],
            )
        except UsageError as error:
            raise pytest.UsageError(str(error)) from None
    return config.stash[_SETTINGS_KEY]


def matrix_options(config: pytest.Config) -> MatrixOptions:
    """The session's matrix choices; other benchmark modules (tests/benchmarks/test_dataloader.py) size and place
    their cases by them."""
    return session_settings(config).matrix


PATH_OPTIONS = ("--perf-baseline-dir", "--perf-summary-dir")


def rootdir_moving_paths(args: Sequence[str], invocation_dir: Path) -> list[tuple[str, str]]:
    """The path options given with their value as a separate argument whose value lies outside `invocation_dir`.

    pytest chooses its rootdir before plugins' options are known, reading `--perf-summary-dir /tmp/x` as an unknown
    flag and a test path `/tmp/x`: the rootdir then becomes a parent such as /tmp, and [tool.perfsuite], testpaths
    and the baseline folder would be silently lost. `--perf-summary-dir=/tmp/x` is read as one argument and is safe.
    """
    moving = []
    for option, value in zip(args, args[1:], strict=False):
        if option in PATH_OPTIONS and not value.startswith("-"):
            resolved = (invocation_dir / value).resolve()
            if not resolved.is_relative_to(invocation_dir.resolve()):
                moving.append((option, value))
    return moving


def joined_path_options(args: Sequence[str]) -> list[str]:
    """`args` with every path option and its separate value written as one `--option=value` argument."""
    joined: list[str] = []
    index = 0
    while index < len(args):
        if args[index] in PATH_OPTIONS and index + 1 < len(args) and not args[index + 1].startswith("-"):
            joined.append(f"{args[index]}={args[index + 1]}")
            index += 2
        else:
            joined.append(args[index])
            index += 1
    return joined


def relaunch_command(original_argv: Sequence[str], args: Sequence[str]) -> list[str] | None:
    """The command line that runs this pytest again with the path options joined to their values, or None when
    pytest's arguments are not the end of the interpreter's command line (pytest.main called from a program)."""
    if not args or list(original_argv[-len(args):]) != list(args):
        return None
    return [*original_argv[: -len(args)], *joined_path_options(args)]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf: a perfsuite benchmark case")
    config.addinivalue_line("markers", f"{DATALOADER_MARKER}: a DataLoader case, selected with --perf-model dataloader")
    args = list(config.invocation_params.args)
    moving = rootdir_moving_paths(args, config.invocation_params.dir)
    if moving:
        # Both spellings must behave alike: run again with `--option=value`, before anything was collected or
        # written, so pytest picks the project's rootdir. Called as pytest.main(...) from a program, refuse instead.
        command = relaunch_command(sys.orig_argv, args)
        if command is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, command)
        given = " ".join(f"{option} {value}" for option, value in moving)
        written = " ".join(f"{option}={value}" for option, value in moving)
        raise pytest.UsageError(
            f"{given}: pytest takes a separate value outside this folder for a test path when it picks its rootdir "
            f"(it picked {config.rootpath}), which loses [tool.perfsuite] and the baselines; write {written}"
        )
    # Validate the options now, so a bad value is a usage error before collection starts. Workloads registered
    # in the root conftest.py (loaded before this hook) are known by now.
    chosen = session_settings(config)
    config.stash[_MATRIX_KEY] = build_matrix(chosen.matrix, registered_workloads())
    if chosen.threads is not None and chosen.processes == 1:
        import torch

        torch.set_num_threads(chosen.threads)
    gate_settings = GateSettings(
        baseline_dir=config.rootpath / chosen.baseline_dir,
        update=config.getoption("--perf-update-baseline"),
        rebaseline=config.getoption("--perf-rebaseline"),
        machine=chosen.machine,
        tolerance_overrides=chosen.tolerances,
        memory_tolerance_overrides=chosen.memory_tolerances,
        cli_tolerance=chosen.cli_tolerance,
        cli_memory_tolerance=chosen.cli_memory_tolerance,
    )
    config.stash[_GATE_KEY] = Gate(gate_settings, devices.machine_fingerprint(), current_commit(config.rootpath))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "perf_case" not in metafunc.fixturenames:
        return
    from perfsuite.run.runner import case_skip_reason

    cases = metafunc.config.stash[_MATRIX_KEY]
    facts = devices.device_facts(compiling=any(case.compile != EAGER for case in cases))
    ddp_processes = session_settings(metafunc.config).ddp_processes
    skips = metafunc.config.stash.setdefault(_SKIPS_KEY, {})
    params = []
    for case in cases:
        reason = case_skip_reason(case, facts, ddp_processes)
        marks = [pytest.mark.perf]
        if reason:
            skips[case.benchmark_id] = reason
            marks.append(pytest.mark.skip(reason=reason))
        params.append(pytest.param(case, id=case.benchmark_id, marks=marks))
    metafunc.parametrize("perf_case", params)


def pytest_report_header(config: pytest.Config) -> list[str]:
    chosen = config.stash.get(_SETTINGS_KEY, None)
    if chosen is None:
        return []
    options = chosen.matrix
    note = []
    if not chosen.profile_chosen and options.profile == CPU_DEFAULT_PROFILE:
        note = [
            f"perfsuite: no accelerator is selected, so the {CPU_DEFAULT_PROFILE} profile runs (the same architectures "
            f"scaled down, minutes on a few CPU cores); the article's sizes: add --perf-profile "
            f"{ACCELERATOR_DEFAULT_PROFILE}"
        ]
    return note + [
        f"perfsuite: profile={options.profile} device={','.join(options.devices)} dtype={','.join(options.dtypes)} "
        f"model={','.join(options.models or default_model_names(registered_workloads()))} "
        f"compile={','.join(options.compile_modes)} "
        f"processes={chosen.processes}"
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --benchmark-only only benchmarks are collected (the rest would only be skipped), and the DataLoader
    cases only when no model is chosen or `dataloader` is among the models: the others are deselected."""
    benchmark_only = bool(config.getoption("benchmark_only", False))
    dataloader = runs_dataloader(session_settings(config).matrix)
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        wanted = (_is_benchmark(item) or not benchmark_only) and (
            dataloader or not item.get_closest_marker(DATALOADER_MARKER)
        )
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _is_benchmark(item: pytest.Item) -> bool:
    """Whether `item` is a benchmark: it takes pytest-benchmark's `benchmark` fixture (perf_run does)."""
    return "benchmark" in getattr(item, "fixturenames", ())


@dataclass
class Progress:
    """Per-case progress of a session measured in the pytest process: the benchmarks to run, how many are done
    and since when."""

    total: int
    done: int = 0
    start_s: float = field(default_factory=time.perf_counter)


def pytest_collection_finish(session: pytest.Session) -> None:
    benchmarks = [item for item in session.items if _is_benchmark(item)]
    if benchmarks and not session.config.getoption("benchmark_skip", False):
        session.config.stash[_PROGRESS_KEY] = Progress(total=len(benchmarks))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After each benchmark of a session measured in the pytest process, a line with the cases done, the time so
    far and an estimate of what is left (with --perf-processes the processes' own lines say it instead)."""
    result = yield
    progress = item.config.stash.get(_PROGRESS_KEY, None)
    if progress is not None and _is_benchmark(item):
        progress.done += 1
        if session_settings(item.config).processes == 1:
            show_now(item.config, progress_line(progress.done, progress.total, time.perf_counter() - progress.start_s))
    return result


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


def _session_cases(session: pytest.Session) -> list[Case]:
    """The perf cases this session will run: collected, selected and not skipped."""
    cases = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("perf_case") if callspec is not None else None
        if isinstance(case, Case) and not item.get_closest_marker("skip"):
            cases.append(case)
    return cases


def _measure_in_processes(request: pytest.FixtureRequest, chosen: Settings) -> dict[str, CaseOutcome]:
    """Every case of the session measured in `chosen.processes` fresh processes, once, at the first case."""
    config = request.config
    if _OUTCOMES_KEY not in config.stash:
        from perfsuite.workloads import get_workload
        from perfsuite.workloads.sources import workload_sources

        cases = _session_cases(request.session)
        spec = {
            "warmup_steps": chosen.warmup_steps, "threads": chosen.threads, "ddp_processes": chosen.ddp_processes,
            "benchmark": vars(_round_settings(config)),
            "workload_sources": {c.model: workload_sources(get_workload(c.model)) for c in cases},
            "sys_path": [str(config.rootpath)],
        }
        def progress(line: str) -> None:
            show_now(config, line)

        config.stash[_OUTCOMES_KEY] = measure_in_processes(
            cases, chosen.processes, config.getoption("--perf-isolation"), spec, progress=progress,
        )
    return config.stash[_OUTCOMES_KEY]


def show_now(config: pytest.Config, line: str) -> None:
    """Write `line` to the terminal while a test runs: pytest captures the test's output, so the capture is
    suspended for the line (as pytest's own live logging does)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line(line)


def _round_settings(config: pytest.Config) -> RoundSettings:
    return RoundSettings(
        min_rounds=int(config.getoption("benchmark_min_rounds", 5) or 5),
        max_time_s=float(config.getoption("benchmark_max_time", 1.0) or 1.0),
        min_time_s=float(config.getoption("benchmark_min_time", 5e-6) or 5e-6),
    )


def _feed_benchmark(benchmark: Any, measurement: Measurement) -> None:
    """Give pytest-benchmark's fixture the rounds of every run, so its table and JSON show them (its statistics
    then pool the rounds of all processes; the per-run medians are in extra_info)."""
    from perfsuite.run.runner import extra_info

    if getattr(benchmark, "disabled", False) or not hasattr(benchmark, "_make_stats"):
        return
    benchmark._mode = "perfsuite processes"
    stats = benchmark._make_stats(1)
    for round_time_s in measurement.round_times_s:
        stats.update(round_time_s)
    benchmark.extra_info.update(extra_info(measurement.last))


@pytest.fixture
def perf_run(benchmark: Any, request: pytest.FixtureRequest) -> Callable[[Case], Measurement | None]:
    """Run a case: `perf_run(perf_case)` measures it (in this process, or in --perf-processes fresh ones),
    judges it against this machine's baseline and returns its Measurement (None when no round was timed).

    A regression fails the test. A case that runs out of device memory is skipped as such, and so are the
    larger batch sizes of its sweep; the session goes on with the next case.
    """
    from perfsuite.run.compiled import CaptureImpossible, WrongCompiledResult
    from perfsuite.run.runner import (
        CaseOutOfMemory,
        CompiledDuringRounds,
        NonFiniteLoss,
        run_case,
        warn_of_memory_growth,
    )

    chosen = session_settings(request.config)
    out_of_memory = request.config.stash.setdefault(_OUT_OF_MEMORY_KEY, {})
    gate = request.config.stash[_GATE_KEY]

    def run(case: Case) -> Measurement | None:
        reason = sweep_skip_reason(case, out_of_memory)
        if reason:
            pytest.skip(reason)
        try:
            if chosen.processes > 1:
                outcome = _measure_in_processes(request, chosen).get(case.benchmark_id, CaseOutcome())
                if outcome.errors:
                    raise RuntimeError(f"{case.benchmark_id}: {outcome.errors[0]}")
                if outcome.out_of_memory:
                    raise CaseOutOfMemory(outcome.out_of_memory)
                if outcome.skipped:
                    pytest.skip(outcome.skipped)
                runs: list[Run] = outcome.runs
                measurement = Measurement(case, tuple(runs)) if runs else None
                if measurement is not None:
                    _feed_benchmark(benchmark, measurement)
            else:
                single = run_case(benchmark, case, chosen.warmup_steps, chosen.ddp_processes)
                measurement = None if single is None else Measurement(case, (single,))
        except CaseOutOfMemory as error:
            out_of_memory[sweep_key(case)] = case.batch_size
            pytest.skip(str(error))
        except CaptureImpossible as error:
            pytest.skip(f"{case.benchmark_id}: {error}")
        except (NonFiniteLoss, WrongCompiledResult, CompiledDuringRounds) as error:
            gate.errors[case.benchmark_id] = str(error)
            # From None: the failure shows its message once, not the exception it replaces as well.
            raise pytest.fail.Exception(str(error), pytrace=False) from None
        except Exception as error:
            gate.errors[case.benchmark_id] = f"{type(error).__name__}: {error}"
            raise
        if measurement is not None:
            any(warn_of_memory_growth(run) for run in measurement.runs)  # one warning per case at most
            request.config.stash.setdefault(_MEASUREMENTS_KEY, []).append(measurement)
            _judge(gate, measurement)
        return measurement

    return run


def _judge(gate: Gate, measurement: Measurement) -> None:
    benchmark_id = measurement.case.benchmark_id
    try:
        verdict = gate.check(measurement)
    except BadFileError as error:
        gate.errors[benchmark_id] = str(error)
        raise pytest.fail.Exception(f"{benchmark_id}: {error}", pytrace=False) from None
    if verdict is not None and verdict.gate_failed and not gate.settings.records:
        pytest.fail(verdict.message, pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    gate = config.stash.get(_GATE_KEY, None)
    if gate is None or not config.stash.get(_MATRIX_KEY, None) or not _session_cases(session):
        return
    written: list[str] = []
    if gate.settings.records:
        files, problems = gate.record()
        written += [f"recorded {path}" for path in files] + problems
        if problems:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    summary_dir = config.rootpath / session_settings(config).summary_dir
    written += [f"wrote {path}" for path in gate.write_summary(summary_dir)]
    measurements = config.stash.get(_MEASUREMENTS_KEY, [])
    results_path = summary_dir / "results.md"
    results_path.write_text(render_results_markdown(measurements, _verdict_names(gate)), encoding="utf-8")
    written.append(f"wrote {results_path}")
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        written.append(
            f"interrupted: the files hold the {len(measurements)} of {len(_session_cases(session))} cases measured "
            "before the stop"
        )
    config.stash[_WRITTEN_KEY] = written


def _verdict_names(gate: Gate) -> dict[str, str]:
    """Each judged case's verdict (`unchanged`, `regressed`, ...) by benchmark id, for the results tables."""
    return {verdict.benchmark_id: verdict.status for verdict in gate.verdicts}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE_KEY, None)
    if gate is None or (not gate.verdicts and not gate.errors):
        return
    measurements = config.stash.get(_MEASUREMENTS_KEY, [])
    if measurements:
        terminalreporter.section("perfsuite results")
        terminalreporter.write_line(render_results(measurements, _verdict_names(gate)))
    terminalreporter.section("perfsuite regression gate")
    terminalreporter.write_line(summary.render_terminal(gate.verdicts, gate.errors))
    for line in config.stash.get(_WRITTEN_KEY, []):
        terminalreporter.write_line(line)
