"""An A/B job in a pytest session (`--perf-ab BASE`, `--perf-ab-python PATH`): the two sides set up before anything
is measured, every case measured on both (`perfsuite.run.ab`), judged together (`perfsuite.judge.ab`), and the
table and summary files written (`perfsuite.render.ab`). Baselines are neither read nor written: the verdict is head
against base, measured side by side in this job.

What each side runs: head is the working tree as it is (uncommitted changes included) under this interpreter. The
base side takes the project's model code from the base checkout (the modules under the project root that define
each selected model, e.g. its conftest.py, found at the same paths in the base worktree; in perfsuite's own
repository also the built-in model modules), and with --perf-ab-python runs under that interpreter with its
torch and libraries. The harness that measures (perfsuite itself) is this process's perfsuite on both sides, so the
two sides differ only by the code under test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import perfsuite
from perfsuite.errors import UsageError
from perfsuite.judge.ab import AbVerdict, judge_ab
from perfsuite.records import AbMeasurement, AbSide, Case, Outcome, WorkloadSource
from perfsuite.render import ab as render
from perfsuite.run.ab import AbResults, AbUnusable, SideSpec, measure_ab, start_pair
from perfsuite.run.plan import SessionPlan
from perfsuite.settings import Settings, tolerance_for
from perfsuite.store.files import keep_out_of_git, write_text_atomically
from perfsuite.store.revisions import base_checkout, head_revision, resolve_revision

SUMMARY_FILES = ("ab.json", "ab.md", "ab.png")


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


def check_interpreter(python: str) -> str:
    """`python`'s torch version; a UsageError when it is not an interpreter or has no torch."""
    path = Path(python)
    if not path.is_file():
        raise UsageError(f"--perf-ab-python {python}: no such file; give the path of another environment's python")
    try:
        found = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                               text=True, timeout=300)
    except OSError as error:
        raise UsageError(f"--perf-ab-python {python}: cannot be run ({error})") from None
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"--perf-ab-python {python}: cannot import torch there ({last}); install torch into that "
                         "environment (and the libraries of the models you measure)")
    return found.stdout.strip()


@dataclass
class AbJob:
    """The sides of a session's A/B job, and once measured its results and verdicts."""

    plan: SessionPlan
    settings: Settings
    base: SideSpec
    head: SideSpec
    base_side: AbSide
    head_side: AbSide
    folder: Path
    results: AbResults | None = None
    verdicts: dict[str, AbVerdict] = field(default_factory=dict)
    started_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def check(self) -> None:
        """Start one pair of side processes that check every selected model, then stop them; UsageError when a
        side cannot measure."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            for process in start_pair(self.plan, self.base, self.head, [], self.models, self.folder, AbResults()):
                process.stop()
        except AbUnusable as error:
            self.remove_work_folder()
            raise UsageError(str(error)) from None

    @property
    def models(self) -> list[str]:
        return sorted({case.model for case in self.plan.cases})

    def remove_work_folder(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def measure(self, show: Callable[[str], None]) -> None:
        """Measure every case on both sides and judge them together."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.results = measure_ab(self.plan, self.base, self.head, self.folder, show)
        finally:
            self.remove_work_folder()
        for name, side in (("base", "base_side"), ("head", "head_side")):
            hello = self.results.sides.get(name, {})
            old: AbSide = getattr(self, side)
            setattr(self, side, AbSide(old.label, old.revision, hello.get("python", old.python),
                                       hello.get("torch_version", old.torch_version)))
        for case in self.plan.cases:
            key = case.benchmark_id
            settings = self.settings
            self.verdicts[key] = judge_ab(
                self.results.measurements.get(key, AbMeasurement(case, ())), self.results.failures.get(key, []),
                tolerance_for(key, case.model, settings.tolerances, settings.cli_tolerance),
                tolerance_for(key, case.model, settings.memory_tolerances, settings.cli_memory_tolerance,
                              memory=True),
                family_size=len(self.plan.cases),
            )

    @property
    def measured(self) -> bool:
        return self.results is not None

    def head_outcomes(self, case: Case) -> list[Outcome]:
        """The head side's runs of `case` (what pytest-benchmark's table and JSON show)."""
        measurement = self.results.measurements.get(case.benchmark_id) if self.results else None
        runs: list[Outcome] = [pair.head for pair in measurement.pairs] if measurement else []
        return runs

    def finish(self, summary_dir: Path) -> list[str]:
        """Write ab.json, ab.md and ab.png into `summary_dir`; the lines that say what was written."""
        if self.results is None:
            return []
        keep_out_of_git(summary_dir)
        verdicts = list(self.verdicts.values())
        measurements = self.results.measurements
        fails = self.settings.inconclusive_fails
        document = render.summary_document(verdicts, measurements, self.base_side, self.head_side, self.started_at,
                                           fails)
        written = [
            write_text_atomically(summary_dir / "ab.json", render.summary_json(document)),
            write_text_atomically(summary_dir / "ab.md", render.summary_markdown(
                verdicts, measurements, self.base_side, self.head_side, fails)),
        ]
        if render.write_ratio_plot(verdicts, summary_dir / "ab.png"):
            written.append(summary_dir / "ab.png")
        return [f"perfsuite A/B: wrote {path}" for path in written]

    def report(self) -> list[tuple[str, str]]:
        """The terminal sections: the sides, the table, and a sentence per case that is not unchanged."""
        if self.results is None:
            return []
        verdicts = list(self.verdicts.values())
        text = render.render_sides(self.base_side, self.head_side) + "\n" + render.render_table(
            verdicts, self.results.measurements)
        fails = self.settings.inconclusive_fails
        notable = [render.ab_message(v, fails) for v in verdicts
                   if v.status != "unchanged" or v.memory_status == "regressed" or v.one_side_at_a_time_pairs]
        text += "\n" + render.outcome_line(verdicts, fails) + "\n"
        text += "".join(f"{line}\n" for line in notable)
        return [("perfsuite A/B: head against base", text)]


def prepare_ab(settings: Settings, plan: SessionPlan, root: Path) -> AbJob:
    """Set up the two sides of `settings`' A/B job for `plan` in the project at `root`: resolve and check out the
    base revision, check the base interpreter. Raises UsageError (nothing measured, nothing left behind) when a side
    cannot be set up."""
    python = settings.ab_python or sys.executable
    base_torch = check_interpreter(python) if settings.ab_python else None
    base_root, label, revision = root, f"python {python}", head_revision(root)
    if settings.ab_revision:
        revision = resolve_revision(root, settings.ab_revision)
        base_root, label = base_checkout(root, revision), settings.ab_revision
    own_repository = Path(perfsuite.__file__).resolve().parent.parent == root.resolve()
    base = SideSpec("base", python, base_root, rebased_sources(plan.workload_sources, root, base_root),
                    builtin_models_from_root=own_repository and base_root != root)
    head = SideSpec("head", sys.executable, root, {m: list(s) for m, s in plan.workload_sources.items()})
    import torch

    return AbJob(
        plan, settings, base, head, AbSide(label, revision, python, base_torch),
        AbSide("head", head_revision(root), sys.executable, torch.__version__),
        folder=Path(tempfile.mkdtemp(prefix="perfsuite-ab-")),
    )
