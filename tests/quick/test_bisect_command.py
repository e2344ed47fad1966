"""`perfsuite bisect`'s glue without measuring: the range of commits, the cases it follows, how a step's A/B summary
is read (an import failure is errored with pytest's words; a head that ran another checkout's model is refused), the
sentences of the finding and the record the site marks on a case's page."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.errors import UsageError
from perfsuite.judge.bisect import CaseReading, Change, Finding, Judge, Position, Step
from perfsuite.render import bisect as render
from perfsuite.render.ab import SCHEMA as AB_SCHEMA
from perfsuite.session.bisect import BisectPlan, commit_positions, python_positions, read_step, tracked_cases
from perfsuite.site.bisect import read_bisect_file

CASE = "cpu-fp32-tiny-conv-bs8-infer-smoke"


def git(root: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=u@example.com", "-c", "user.name=u", *arguments],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repository(tmp_path) -> tuple[Path, list[str]]:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commits = []
    for number in range(4):
        (root / "file.txt").write_text(f"{number}\n")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", f"change {number}")
        commits.append(git(root, "rev-parse", "HEAD"))
    return root, commits


def ab_summary(folder: Path, cases: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ab.json"
    path.write_text(json.dumps({"schema": AB_SCHEMA, "schema_version": 1, "cases": cases}))
    return path


def plan_of(root: Path, tracked: tuple[str, ...] = (CASE,)) -> BisectPlan:
    positions = (Position(commit="a" * 40, subject="good"), Position(commit="b" * 40, subject="bad"))
    return BisectPlan(positions, root, tracked, (), 300.0, root / ".perfsuite" / "bisect")


def test_the_range_runs_from_good_to_bad_oldest_first_with_subjects(repository):
    root, commits = repository
    positions = commit_positions(root, commits[0], "HEAD")
    assert [p.commit for p in positions] == commits
    assert [p.subject for p in positions] == ["change 0", "change 1", "change 2", "change 3"]
    assert all(p.author_date for p in positions)


def test_a_good_commit_newer_than_the_bad_one_is_refused_saying_which_is_which(repository):
    root, commits = repository
    with pytest.raises(UsageError, match="not an ancestor of --bad"):
        commit_positions(root, commits[3], commits[1])


def test_an_unknown_good_revision_names_the_option(repository):
    root, _ = repository
    with pytest.raises(UsageError, match="^--good nope: no such revision"):
        commit_positions(root, "nope", "HEAD")


def test_by_default_it_follows_the_cases_that_regressed_in_the_last_ab_job(tmp_path):
    ab_summary(tmp_path / ".perfsuite", [{"benchmark_id": CASE, "status": "regressed"},
                                         {"benchmark_id": "other", "status": "unchanged"}])
    assert tracked_cases(tmp_path, []) == ((CASE,), ("-k", CASE))


def test_without_an_ab_job_or_pytest_options_it_says_how_to_choose_cases(tmp_path):
    with pytest.raises(UsageError, match="does not exist.*choose the cases with pytest's options after `--`"):
        tracked_cases(tmp_path, [])


def test_pytest_options_given_choose_the_cases_themselves(tmp_path):
    assert tracked_cases(tmp_path, ["--perf-model", "resnet18"]) == ((), ("--perf-model", "resnet18"))


def test_a_step_whose_job_wrote_no_summary_is_errored_with_pytests_last_words(tmp_path):
    step = read_step(plan_of(tmp_path), Judge(1, 0, "search", 1), tmp_path / "step-01", tmp_path, 4,
                     "collecting\nE   ModuleNotFoundError: No module named 'a_module_this_commit_forgot'\n", 3.0)
    assert step.status == "errored"
    assert "a_module_this_commit_forgot" in (step.reason or "")


def test_a_step_reads_the_tracked_cases_verdicts_and_floors(tmp_path):
    summary_dir = tmp_path / "step-01"
    ab_summary(summary_dir, [
        {"benchmark_id": CASE, "status": "regressed", "ratio": 1.3, "ci_low": 1.2, "ci_high": 1.4, "floor": 0.04,
         "model_files": {"head": str(tmp_path / "conftest.py"), "base": "/elsewhere/conftest.py"}},
        {"benchmark_id": "not-followed", "status": "errored"},
    ])
    step = read_step(plan_of(tmp_path), Judge(1, 0, "search", 1), summary_dir, tmp_path, 1, "", 20.0)
    assert step.status == "regressed"
    assert step.cases == (CaseReading(CASE, "regressed", 1.3, 1.2, 1.4, 0.04),)


def test_a_head_that_measured_another_checkouts_model_is_refused(tmp_path):
    summary_dir = tmp_path / "step-01"
    ab_summary(summary_dir, [{"benchmark_id": CASE, "status": "unchanged",
                              "model_files": {"head": "/site-packages/project/model.py"}}])
    with pytest.raises(UsageError, match="would judge one version against itself"):
        read_step(plan_of(tmp_path), Judge(1, 0, "search", 1), summary_dir, tmp_path / "checkout", 0, "", 1.0)


def test_a_tracked_case_the_job_did_not_measure_leaves_the_step_undecided(tmp_path):
    summary_dir = tmp_path / "step-01"
    ab_summary(summary_dir, [{"benchmark_id": "x", "status": "unchanged"}])
    step = read_step(plan_of(tmp_path, (CASE, "x")), Judge(1, 0, "search", 1), summary_dir, tmp_path, 0, "", 1.0)
    assert step.status == "inconclusive" and CASE in (step.reason or "")


def test_pythons_must_be_interpreters(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        python_positions([str(tmp_path / "python"), str(tmp_path / "other")])
    with pytest.raises(UsageError, match="at least two"):
        python_positions(["python3"])


def test_the_cli_refuses_a_bisect_without_good_or_with_both_kinds(capsys):
    assert main(["bisect"]) == 2
    assert "give --good REV" in capsys.readouterr().err
    assert main(["bisect", "--good", "HEAD~1", "--pythons", "a", "b"]) == 2
    assert "leave --good and --bad out" in capsys.readouterr().err


POSITIONS = tuple(Position(commit=f"{n:040x}", subject=f"change {n}", author_date="2026-01-01T00:00:00Z")
                  for n in range(4))


def step(head: int, base: int, purpose: str, status: str, ratio: float, floor: float) -> Step:
    return Step(Judge(head, base, purpose, 1), status,  # type: ignore[arg-type]
                (CaseReading(CASE, status, ratio, ratio * 0.95, ratio * 1.05, floor),), 10.0)  # type: ignore[arg-type]


def test_a_pair_that_does_not_differ_says_it_does_not_reproduce_with_its_floor():
    steps = [step(3, 0, "reproduce", "unchanged", 1.01, 0.032)]
    (line,) = render.finding_lines(Finding("unchanged", (), (), (), None), steps, POSITIONS)
    assert "does not reproduce here (floor 3.2%)" in line


def test_the_finding_names_the_commit_its_date_and_its_ratio_against_its_parent():
    steps = [step(3, 0, "reproduce", "regressed", 1.3, 0.05), step(2, 0, "search", "regressed", 1.3, 0.05),
             step(1, 0, "search", "unchanged", 1.0, 0.03), step(2, 1, "parent", "regressed", 1.31, 0.04),
             step(3, 2, "rest", "unchanged", 1.0, 0.03)]
    finding = Finding("regressed", (Change(0, 2, (2,), 1, "regressed"),), (), (), "unchanged")
    lines = render.finding_lines(finding, steps, POSITIONS)
    assert lines[0].startswith(f"first bad commit: {POSITIONS[2].commit[:12]} change 2 (2026-01-01T00:00:00Z)")
    assert f"against its parent {POSITIONS[1].commit[:12]}: regressed: x1.310" in lines[0]
    assert "floor 4.0%" in lines[0]


def test_two_changes_are_reported_as_more_than_one():
    finding = Finding("regressed", (Change(0, 1, (1,), 0, "regressed"), Change(1, 3, (3,), 2, "regressed")), (), (),
                      None)
    assert render.finding_lines(finding, [], POSITIONS)[0].startswith("the range holds more than one change: 2")


def test_the_record_round_trips_to_a_mark_on_the_cases_page(tmp_path):
    steps = [step(3, 0, "reproduce", "regressed", 1.3, 0.05), step(2, 1, "parent", "regressed", 1.3, 0.05)]
    finding = Finding("regressed", (Change(0, 2, (2,), 1, "regressed"),), (), (), None)
    path = tmp_path / "bisect.json"
    path.write_text(render.bisect_json(render.bisect_document(finding, steps, POSITIONS, (CASE,), "2026-01-02")))
    mark = read_bisect_file(path).mark
    assert mark is not None
    assert mark.benchmark_ids == {CASE} and mark.named == (f"{POSITIONS[2].commit[:12]} change 2",)


def test_a_record_naming_a_position_outside_its_range_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "bisect.json"
    path.write_text(json.dumps({"schema": render.SCHEMA, "schema_version": 1, "positions": [], "steps": [],
                                "finding": {"changes": [{"first_bad": 5}]}, "sentences": [], "tracked_cases": []}))
    reading = read_bisect_file(path)
    assert reading.mark is None and "outside its 0 positions" in reading.problems[0].problem


def test_the_site_marks_a_bisect_on_the_page_of_the_case_it_followed_only(tmp_path):
    from perfsuite.site.build import build_site

    followed, other = "cpu-fp32-resnet18-bs4-infer-smoke", "cpu-fp32-resnet18-bs4-train-smoke"
    steps = [step(3, 0, "reproduce", "regressed", 1.3, 0.05), step(2, 1, "parent", "regressed", 1.3, 0.05)]
    finding = Finding("regressed", (Change(0, 2, (2,), 1, "regressed"),), (), (), None)
    record = tmp_path / "bisect.json"
    record.write_text(render.bisect_json(render.bisect_document(finding, steps, POSITIONS, (followed,), "2026-01-02")))
    build_site([Path(__file__).resolve().parents[2] / "baselines" / "cpu"], tmp_path / "site", bisect_files=[record])
    pages = {page.name: page.read_text() for page in (tmp_path / "site" / "cases").iterdir()}
    marked = [name for name, text in pages.items() if "<h2>Bisect</h2>" in text]
    assert marked and all(followed in name for name in marked)
    assert any(other in name for name in pages)
    assert all(f"{POSITIONS[2].commit[:12]} change 2" in pages[name] for name in marked)
