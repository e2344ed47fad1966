"""An A/B job in a pytest session (`--perf-ab BASE`, `--perf-ab-python PATH`): the two sides set up before anything
is measured, every case measured on both (`perfsuite.run.ab`), judged together (`perfsuite.judge.ab`), and the
table and summary files written (`perfsuite.render.ab`). Baselines are neither read nor written: the verdict is head
against base, measured side by side in this job.

What each side runs: head is the working tree as it is (uncommitted changes included) under this interpreter. The
base side runs the base checkout's version of every module of the project (`perfsuite.run.side_code`: the modules
that define each model, what they import from the project, in a src layout installed with `pip install -e .` too;
in perfsuite's own repository the built-in model modules), and with --perf-ab-python runs under that interpreter
with its torch and libraries. The harness that measures (perfsuite itself) is this process's perfsuite on both
sides, so the two sides differ only by the code under test. Where they differ only in Python code, both sides share
each warm worker process; a compiled project file changed between them, or another interpreter, puts each side in a
process of its own, and the table says which.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import perfsuite
from perfsuite.benchmark_fixture import feed_rounds
from perfsuite.errors import CaseFailed, CaseSkipped, UsageError
from perfsuite.judge.ab import AB_DEFAULT_TOLERANCE, MAX_BLOCKS, AbVerdict, judge_ab, look
from perfsuite.judge.explain import Explanation, explain, wants_explanation
from perfsuite.options.settings import Settings, tolerance_for
from perfsuite.records import (
    AbMeasurement,
    AbSide,
    Case,
    Conditions,
    Measurement,
    Outcome,
    WorkloadSource,
    measurement_of,
)
from perfsuite.render import ab as render
from perfsuite.render.progress import ab_progress_line
from perfsuite.run.ab import (
    REQUEST_TIMEOUT_S,
    AbInterrupted,
    AbResults,
    AbSchedule,
    AbUnusable,
    SideSpec,
    measure_ab,
    start_workers,
)
from perfsuite.run.measure import extra_info
from perfsuite.run.plan import SessionPlan
from perfsuite.run.workers import Worker, Workers
from perfsuite.store.files import keep_out_of_git, write_text_atomically
from perfsuite.store.revisions import (
    AbJobLock,
    base_checkout,
    changed_files,
    deleted_files,
    head_revision,
    lock_ab_job,
    resolve_revision,
)

SUMMARY_FILES = ("ab.json", "ab.md", "ab.png")
# Files whose change between the sides means compiled code differs (sources, and every extension module's suffix:
# importlib's EXTENSION_SUFFIXES all end in .so or .pyd): one process cannot hold both versions.
COMPILED_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp", ".pyx", ".pxd", ".so", ".pyd", ".dylib")


def process_pairs_reason(ab_python: str | None, changed: Sequence[str]) -> str | None:
    """Why the two sides cannot share a process (None: they can): another interpreter, or a compiled file changed."""
    if ab_python:
        return f"the base side runs another interpreter ({ab_python})"
    compiled = [name for name in changed if name.endswith(COMPILED_SOURCE_SUFFIXES)]
    if compiled:
        shown = ", ".join(compiled[:3]) + (f" and {len(compiled) - 3} more" if len(compiled) > 3 else "")
        return f"compiled code differs between the sides ({shown})"
    return None


def rebased_sources(
    sources: Mapping[str, Sequence[WorkloadSource]], root: Path, base_root: Path
) -> dict[str, list[WorkloadSource]]:
    """The workload sources of the head, with each file under `root` moved to the same path under `base_root`."""
    moved: dict[str, list[WorkloadSource]] = {}
    for model, model_sources in sources.items():
        moved[model] = []
        for source in model_sources:
            file = source["file"]
            if file is not None and Path(file).resolve().is_relative_to(root.resolve()):
                file = str(base_root / Path(file).resolve().relative_to(root.resolve()))
            moved[model].append(WorkloadSource(module=source["module"], file=file))
    return moved


# How long the base interpreter may take to say its torch version (importing torch cold can take a minute).
INTERPRETER_TIMEOUT_S = 300.0
INTERPRETER_PROBE = "import json, torch; print(json.dumps({'torch_version': torch.__version__}))"


def interpreter_torch_version(printed: str) -> str | None:
    """The torch version in what INTERPRETER_PROBE printed (its last line), or None when that is not its answer."""
    lines = printed.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    version = answer.get("torch_version") if isinstance(answer, dict) else None
    return version if isinstance(version, str) and version else None


def check_interpreter(python: str, timeout_s: float = INTERPRETER_TIMEOUT_S) -> str:
    """`python`'s torch version; a UsageError naming the interpreter and what it did when it is not a Python
    interpreter with torch (no such file, cannot run, no torch, killed, no answer within `timeout_s`, an answer that
    is not its torch version)."""
    where = f"--perf-ab-python {python}"
    if not Path(python).is_file():
        raise UsageError(f"{where}: no such file; give the path of another environment's python")
    try:
        found = subprocess.run([python, "-c", INTERPRETER_PROBE], capture_output=True, text=True, timeout=timeout_s,
                               stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{where}: gave no answer within {timeout_s:.0f} s when asked for its torch version; give "
                         "the path of a Python interpreter that starts (python -c 'import torch' should end)") from None
    except OSError as error:
        raise UsageError(f"{where}: cannot be run ({error})") from None
    said = (found.stdout.strip() or found.stderr.strip() or "nothing")[-300:]
    if found.returncode < 0:
        raise UsageError(f"{where}: was killed by signal {-found.returncode} when asked for its torch version "
                         f"(it printed {said!r}); check that environment, or give another python")
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{where}: cannot import torch there ({last}); install torch into that "
                         "environment (and the libraries of the models you measure)")
    version = interpreter_torch_version(found.stdout)
    if version is None:
        raise UsageError(f"{where}: printed {said!r} when asked for its torch version as JSON; is it a Python "
                         "interpreter? Give the path of another environment's python (e.g. .venv-old/bin/python)")
    return version


@dataclass
class AbJob:
    """The A/B job, one of a session's two kinds (`perfsuite.session.pytest_session.SessionJob`; the other is the
    history gate): the sides, and once measured the results and verdicts; `show` writes a line to the terminal
    while tests run."""

    plan: SessionPlan
    settings: Settings
    base: SideSpec
    head: SideSpec
    base_side: AbSide
    head_side: AbSide
    folder: Path
    pairs_reason: str | None = None
    note: str | None = None
    lock: AbJobLock | None = None
    no_base: dict[str, str] = field(default_factory=dict)
    results: AbResults | None = None
    verdicts: dict[str, AbVerdict] = field(default_factory=dict)
    explanations: dict[str, Explanation] = field(default_factory=dict)
    started_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    show: Callable[[str], None] = print
    written: list[str] = field(default_factory=list)
    files_written: bool = True
    warm: Worker | None = None  # the check's worker, held for the measuring (`check`)
    conditions: Mapping[str, Conditions] = field(default_factory=dict)  # by device, as the job started

    def take(self, case: Case, fixture: Any) -> Measurement | None:
        """An A/B case: the first one measures every case on both sides; each case's test shows its head side's
        rounds and fails (CaseFailed) when its verdict fails the job (`AbVerdict.fails_job`); a model the base does
        not have is skipped (CaseSkipped: neither a pass nor a failure)."""
        if not self.measured:
            self.measure(self.show)
        outcomes = self.head_outcomes(case)
        result = measurement_of(case, outcomes) if outcomes else None
        if isinstance(result, Measurement):
            feed_rounds(fixture, result.round_times_s, extra_info(result.last))
        verdict = self.verdicts[case.benchmark_id]
        fails = self.settings.inconclusive_fails, self.settings.no_base_fails
        if verdict.fails_job(*fails):
            raise CaseFailed(render.ab_message(verdict, *fails))
        if verdict.status == "no-base":
            raise CaseSkipped(render.ab_message(verdict, *fails))
        return result if isinstance(result, Measurement) else None

    @property
    def schedule(self) -> AbSchedule:
        return AbSchedule(self.plan.processes, self.settings.ab_budget_s, MAX_BLOCKS,
                          in_one_process=self.pairs_reason is None, process_pairs_reason=self.pairs_reason)

    def tolerance(self, case: Case) -> float:
        settings = self.settings
        return tolerance_for(case.benchmark_id, case.model, settings.tolerance.by_name, settings.tolerance.every_case,
                             default=AB_DEFAULT_TOLERANCE)

    def check(self) -> None:
        """Start one worker (or pair) that checks every selected model on both sides; the models the base does not
        have are set aside as `no_base` (their cases are not measured). UsageError when a side cannot measure or
        cannot be sure it runs its own code (the job's lock and folder are released). The worker holding both sides
        is started as the first measuring worker would be: where every model is on both sides and there are cases,
        it stays, warm, and measures as that one (`warm`), which saves the job a worker's start (a fresh Python
        importing torch and both sides' code); else it is stopped."""
        schedule = replace(self.schedule, processes=1)
        seen = AbResults()
        try:
            workers = Workers(self.folder, REQUEST_TIMEOUT_S)
            started = start_workers(workers, self.plan, self.base, self.head, schedule, self.plan.cases, self.models,
                                    seen)
            if schedule.in_one_process and not seen.no_base and self.plan.cases:
                self.warm = workers.hand_over(started[0])
            workers.stop_all()
        except AbUnusable as error:
            self.close()
            raise UsageError(str(error)) from None
        except BaseException:
            self.close()
            raise
        self.no_base = dict(seen.no_base)

    def stop_warm_worker(self) -> None:
        """Stop the check's worker where no measuring took it (a session that measured nothing)."""
        if self.warm is not None:
            self.warm.stop(at_once=True)
            self.warm = None

    @property
    def models(self) -> list[str]:
        return sorted({case.model for case in self.plan.cases})

    @property
    def measured_plan(self) -> SessionPlan:
        """The plan without the cases of models the base does not have."""
        return replace(self.plan, cases=tuple(case for case in self.plan.cases if case.model not in self.no_base))

    def remove_work_folder(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def close(self) -> None:
        """Stop the check's worker if nothing measured with it, remove the job's working folder and release the
        project's A/B lock (again: nothing)."""
        self.stop_warm_worker()
        self.remove_work_folder()
        if self.lock is not None:
            self.lock.release()

    def measure(self, show: Callable[[str], None]) -> None:
        """Measure every case on both sides and judge them together. Ctrl-C keeps the verdicts of the cases decided
        before it (the others read interrupted) and raises KeyboardInterrupt."""
        self.folder.mkdir(parents=True, exist_ok=True)
        plan = self.measured_plan

        def decided(measurement: AbMeasurement) -> tuple[bool, int]:
            seen = look(measurement, self.tolerance(measurement.case), len(plan.cases))
            return seen.status is not None, seen.next_windows

        def explained(measurement: AbMeasurement) -> bool:
            """Whether the case gets an op-level explanation: every measured case, or the changed ones."""
            if not measurement.pairs or self.settings.ab_explain == "none":
                return False
            return wants_explanation(self.settings.ab_explain,
                                     look(measurement, self.tolerance(measurement.case), len(plan.cases)).status)

        if self.note:
            show(f"perfsuite A/B: {self.note}")
        for model, why in sorted(self.no_base.items()):
            show(f"perfsuite A/B: {model}: no base (the base side does not have it): {why}")
        warm, self.warm = self.warm, None
        try:
            self.results = measure_ab(plan, self.base, self.head, self.folder,
                                      lambda progress: show(ab_progress_line(progress)), self.schedule, decided,
                                      explain=None if self.settings.ab_explain == "none" else explained,
                                      warm=warm) if plan.cases else AbResults(budget_s=self.settings.ab_budget_s)
        except AbInterrupted as stopped:
            self.results = stopped.results
            self.judge()
            raise KeyboardInterrupt from None
        finally:
            self.remove_work_folder()
        self.judge()

    def judge(self) -> None:
        """Judge every case from the results: no base, interrupted, or from its blocks."""
        assert self.results is not None
        for name, side in (("base", "base_side"), ("head", "head_side")):
            hello = self.results.sides.get(name, {})
            old: AbSide = getattr(self, side)
            setattr(self, side, AbSide(old.label, old.revision, hello.get("python", old.python),
                                       hello.get("torch_version", old.torch_version)))
        family_size = len(self.measured_plan.cases)
        for case in self.plan.cases:
            key = case.benchmark_id
            settings = self.settings
            self.verdicts[key] = judge_ab(
                self.results.measurements.get(key, AbMeasurement(case, ())), self.results.failures.get(key, []),
                self.tolerance(case),
                tolerance_for(key, case.model, settings.memory_tolerance.by_name,
                              settings.memory_tolerance.every_case,
                              memory=True),
                family_size=family_size, budget_s=self.settings.ab_budget_s,
                interrupted=key in self.results.interrupted, no_base=self.no_base.get(case.model),
                start_conditions=tuple(reading for reading in (self.conditions.get(case.device),) if reading),
            )
            verdict = self.verdicts[key]
            profiles = self.results.profiles.get(key)
            if profiles:
                self.explanations[key] = explain(profiles["base"], profiles["head"], measured_change_s(verdict))

    @property
    def measuring(self) -> dict[str, Any]:
        """How the job measured, for ab.json: in one process or pairs (and why), budget and seconds spent."""
        if self.results is None:
            return {}
        return {"in_one_process": self.results.in_one_process,
                "process_pairs_reason": self.results.process_pairs_reason,
                "budget_s": self.results.budget_s, "spent_s": self.results.spent_s, "note": self.note,
                "explain": self.settings.ab_explain, "explaining_s": self.results.profiling_s,
                "heap": self.results.heap}

    @property
    def measuring_line(self) -> str | None:
        """How the job measured, in words (the terminal's and ab.md's `measured:` line)."""
        if self.results is None:
            return None
        results = self.results
        return render.measuring_text(results.in_one_process, results.process_pairs_reason, results.spent_s,
                                     results.budget_s, results.profiling_s if results.profiles else None,
                                     results.heap)

    @property
    def measured(self) -> bool:
        return self.results is not None

    def head_outcomes(self, case: Case) -> list[Outcome]:
        """The head side's runs of `case` (what pytest-benchmark's table and JSON show)."""
        measurement = self.results.measurements.get(case.benchmark_id) if self.results else None
        runs: list[Outcome] = [pair.head for pair in measurement.pairs] if measurement else []
        return runs

    def finish(self, summary_dir: Path, interrupted: bool) -> None:
        """Write ab.json, ab.md and ab.png into `summary_dir` and end the job (its lock and folder released);
        `written` then says what was written. An interrupt needs nothing more: `measure` judged every case."""
        try:
            self.written = self._write(summary_dir)
        finally:
            self.close()

    def _write(self, summary_dir: Path) -> list[str]:
        if self.results is None:
            return []
        keep_out_of_git(summary_dir)
        verdicts = list(self.verdicts.values())
        measurements = self.results.measurements
        fails, no_base_fails = self.settings.inconclusive_fails, self.settings.no_base_fails
        document = render.summary_document(verdicts, measurements, self.base_side, self.head_side, self.started_at,
                                           fails, measuring=self.measuring, no_base_fails=no_base_fails,
                                           explanations=self.explanations, unexplained=self.results.profile_failures,
                                           conditions=self.conditions)
        written = [
            write_text_atomically(summary_dir / "ab.json", render.summary_json(document)),
            write_text_atomically(summary_dir / "ab.md", render.summary_markdown(
                verdicts, measurements, self.base_side, self.head_side, fails, self.measuring_line, no_base_fails,
                self.explanations)),
        ]
        if render.write_ratio_plot(verdicts, summary_dir / "ab.png"):
            written.append(summary_dir / "ab.png")
        return [f"perfsuite A/B: wrote {path}" for path in written]

    def report(self) -> list[tuple[str, str]]:
        """The terminal sections: the sides, the table, and a sentence per case that is not unchanged."""
        if self.results is None:
            return []
        verdicts = list(self.verdicts.values())
        text = render.render_sides(self.base_side, self.head_side, self.measuring_line) + "\n" + render.render_table(
            verdicts, self.results.measurements, self.explanations)
        fails, no_base_fails = self.settings.inconclusive_fails, self.settings.no_base_fails
        notable = [render.ab_message(v, fails, no_base_fails) for v in verdicts
                   if v.status != "unchanged" or v.memory_status == "regressed" or v.one_side_at_a_time_pairs
                   or v.changed_blocks]
        text += "\n" + render.outcome_line(verdicts, fails, no_base_fails) + "\n"
        text += "".join(f"{line}\n" for line in notable) + "".join(f"{line}\n" for line in self.written)
        return [("perfsuite A/B: head against base", text)]


def deleted_conftest_problem(deleted: Sequence[str], base_label: str, models_named: bool,
                             builtin_models_only: bool) -> str | None:
    """Why a job must not measure (None: it may): the head deleted a conftest.py the base has (`deleted`, paths in
    the repository) and, no model being named, the session fell back to perfsuite's built-in models, which would
    judge the wrong models and pass."""
    conftests = [name for name in deleted if Path(name).name == "conftest.py"]
    if not conftests or models_named or not builtin_models_only:
        return None
    return (f"--perf-ab {base_label}: the head deleted {', '.join(conftests)}, which the base has, and registers no "
            "model of its own, so this session would measure perfsuite's built-in models instead of yours and pass; "
            "restore it (or register your models elsewhere), or name the models to judge with --perf-model")


def remove_summary_files(summary_dir: Path) -> None:
    """Remove the files a previous job wrote into `summary_dir` (ab.json, ab.md, ab.png), so that none is ever read
    as this job's; anything but a file or link there is left for the writer to name."""
    for name in SUMMARY_FILES:
        path = summary_dir / name
        if path.is_symlink() or path.is_file():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def measured_change_s(verdict: AbVerdict) -> float | None:
    """The change per step the verdict measured (head - base): the base's median times its ratio less one, so that
    it agrees with the verdict's estimate (the medians of the two sides' windows alone are noisier); None where
    nothing was judged."""
    if verdict.ratio is None or verdict.base_median_s is None:
        return None
    return verdict.base_median_s * (verdict.ratio - 1)


def prepare_ab(settings: Settings, plan: SessionPlan, root: Path) -> AbJob:
    """Set up the two sides of `settings`' A/B job for `plan` in the project at `root`: take the project's A/B lock
    (refused while another job runs), remove the previous job's summary files, resolve and check out the base
    revision, check the base interpreter. Raises UsageError (nothing measured, nothing left behind) when a side
    cannot be set up."""
    lock = lock_ab_job(root)
    try:
        remove_summary_files(root / settings.summary_dir)
        return _prepare_sides(settings, plan, root, lock)
    except BaseException:
        lock.release()
        raise


def _prepare_sides(settings: Settings, plan: SessionPlan, root: Path, lock: AbJobLock) -> AbJob:
    python = settings.ab_python or sys.executable
    base_torch = check_interpreter(python) if settings.ab_python else None
    base_root, label, revision = root, f"python {python}", head_revision(root)
    changed: list[str] = []
    note = None
    own_repository = Path(perfsuite.__file__).resolve().parent.parent == root.resolve()
    if settings.ab_revision:
        revision = resolve_revision(root, settings.ab_revision)
        if not own_repository:
            from perfsuite.workloads import builtin_workloads

            builtin = builtin_workloads()
            problem = deleted_conftest_problem(deleted_files(root, revision), settings.ab_revision,
                                               bool(settings.matrix.models),
                                               all(case.model in builtin for case in plan.cases))
            if problem:
                raise UsageError(problem)
        base_root, label = base_checkout(root, revision), settings.ab_revision
        changed = changed_files(root, revision)
        head_commit = head_revision(root)
        if head_commit == revision:
            note = (f"{settings.ab_revision} is HEAD's own commit ({revision[:12]}) and the working tree has no "
                    "changes: both sides run the same code, so this job is an A/A check of how well this machine "
                    "can judge (every case should read unchanged); commit on a branch, or name another base")
    base = SideSpec("base", python, base_root, rebased_sources(plan.workload_sources, root, base_root),
                    builtin_models_from_root=own_repository and base_root != root)
    head = SideSpec("head", sys.executable, root, {m: list(s) for m, s in plan.workload_sources.items()})
    import torch

    return AbJob(
        plan, settings, base, head, AbSide(label, revision, python, base_torch),
        AbSide("head", head_revision(root), sys.executable, torch.__version__),
        folder=lock.work_folder, pairs_reason=process_pairs_reason(settings.ab_python, changed), note=note,
        lock=lock,
    )
