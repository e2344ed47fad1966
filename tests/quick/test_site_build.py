"""`perfsuite site`: the site built from the committed baselines, from bad files, from archives of several
machines and from A/B files; the output folder it may replace; the command's exit status."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.errors import UsageError
from perfsuite.records import BaselineEntry
from perfsuite.site.build import MARKER, build_site
from perfsuite.store.archive import read_archive
from perfsuite.store.baselines import BaselineFile, write_baseline_file
from tests.fixtures.site.synthetic import SyntheticPlan, write_synthetic_archive

REPOSITORY = Path(__file__).resolve().parents[2]
FIXTURES = REPOSITORY / "tests" / "fixtures" / "site"


def case_rows(index_html: str) -> list[str]:
    return re.findall(r"<tr data-device=.*?</tr>", index_html)


@pytest.fixture(scope="module")
def committed_site(tmp_path_factory) -> Path:
    """The site of the repository's own baselines/ (CUDA on the H200 and the H100, the CPU VM, the article's table)."""
    output = tmp_path_factory.mktemp("site") / "site"
    build_site([REPOSITORY / "baselines"], output)
    return output


def test_the_committed_baselines_give_a_row_and_a_page_per_case(committed_site):
    entries = {
        (path.parent.name, path.stem, benchmark_id)
        for path in (REPOSITORY / "baselines").glob("*/*.json") if path.parent.name != "reference"
        for benchmark_id in json.loads(path.read_text())["entries"]
    }
    rows = case_rows((committed_site / "index.html").read_text())
    assert len(rows) == len(entries) == 178  # the H100 file holds the SD 1.5 UNet standard matrix since 2026-12-07
    assert len(list((committed_site / "cases").glob("*.html"))) == len(entries)


def test_a_committed_case_page_plots_every_run(committed_site):
    page = (committed_site / "cases" / "cpu--shared-2core-vm--cpu-fp32-resnet18-bs4-infer-smoke.html").read_text()
    assert "<svg" in page and "<dt>runs</dt><dd>9 in 3 sessions" in page
    assert len(re.findall(r"<td>2026-12-03T13:4\d:\d\dZ</td>", page)) == 3


def test_the_comparison_reproduces_the_articles_ratios_and_sets_the_cpu_against_the_h200(committed_site):
    page = (committed_site / "compare.html").read_text()
    article = page.split("published mps figures")[1]
    assert [r for r in re.findall(r"<td>(0\.7\d)</td>", article)][:3] == ["0.70", "0.71", "0.71"]
    assert "A: cpu on shared-2core-vm &mdash; B: cuda on nvidia-h200" in page
    assert "A: cpu on shared-2core-vm &mdash; B: cuda on nvidia-h100-80gb-hbm3" in page
    assert "no profile in common" in page


def test_files_beside_the_device_folders_are_listed_as_not_read(committed_site):
    index = (committed_site / "index.html").read_text()
    assert "mps-fallback-allowlist.json</td><td>not a history: its &quot;schema&quot; is None" in index


def test_the_site_is_self_contained(committed_site):
    for page in committed_site.rglob("*.html"):
        text = page.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), page
    assert {p.name for p in committed_site.iterdir()} >= {"index.html", "compare.html", "site.css", "site.js"}


def test_bad_files_are_named_on_the_index_and_their_good_entries_still_shown(tmp_path):
    report = build_site([FIXTURES / "bad-history"], tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    problems = index.split('id="problems"')[1].split("</section>")[0]
    for file_name, what in (
        ("truncated-vm.json", "is not valid JSON"),
        ("wrong-field-vm.json", "field &#x27;batch_size&#x27; should be a whole number &gt;= 1, got &#x27;four&#x27;"),
        ("negative-time-vm.json",
         "run 1: &#x27;round_times_s&#x27; must be a non-empty list of finite times &gt;= 1e-09 seconds"),
        ("20261203T134357Z-3d7a4eb-0a1b2c.json", "&#x27;perfsuite-archive-draft&#x27;, not &#x27;perfsuite-archive"),
    ):
        assert re.search(rf"{re.escape(file_name)}</td><td>[^<]*{re.escape(what)}", problems), file_name
    assert len(report.problems) == 4
    assert [re.search(r'data-machine="([^"]+)"', r).group(1) for r in case_rows(index)] == [
        "negative-time-vm", "wrong-field-vm"]


def test_ab_files_get_their_own_page_with_their_bad_entries_named(tmp_path):
    build_site([REPOSITORY / "baselines" / "cpu"], tmp_path / "site", [FIXTURES / "ab-summary.json"])
    page = (tmp_path / "site" / "ab.html").read_text()
    assert len(re.findall(r'class="verdict verdict-(regressed|improved|unchanged|errored)"', page)) == 4
    assert "cases[4] (cpu-fp32-bert-base-bs2-train-smoke): &#x27;ratio&#x27; should be" in page
    assert "cases[5] (cpu-bf16-resnet18-bs4-infer-smoke): &#x27;status&#x27; &#x27;faster&#x27;" in page


def test_archives_of_several_machines_merge_into_rows_per_machine_without_counting_a_run_twice(tmp_path):
    plan = SyntheticPlan(machines=(("mps", "ci-m2-max"), ("mps", "ci-m3-pro")), cases_per_machine=3, sessions=12,
                         runs_per_session=3, rounds=10)
    write_synthetic_archive(tmp_path / "baselines" / "archive", plan)
    # The store's window of the M2's histories: its newest 20 runs per case, all of them archived too.
    sessions = [s for s in read_archive(tmp_path / "baselines" / "archive").sessions if s.machine_slug == "ci-m2-max"]
    window = {}
    for archived in sessions[0].cases:
        runs = tuple(r for s in sessions for c in s.cases if c.case == archived.case for r in c.runs)[-20:]
        window[archived.case.benchmark_id] = BaselineEntry(
            archived.case, archived.config_digest, sessions[-1].torch_version, None, {"name": "ci-m2-max"},
            archived.memory_figure, archived.samples_per_step, None, None, 0.1, 0.1, runs)
    write_baseline_file(tmp_path / "baselines" / "mps" / "ci-m2-max.json", BaselineFile("mps", window))
    report = build_site([tmp_path / "baselines"], tmp_path / "site")
    rows = case_rows((tmp_path / "site" / "index.html").read_text())
    assert report.cases == len(rows) == 6 and report.problems == ()
    assert sorted(re.search(r'data-machine="([^"]+)"', r).group(1) for r in rows) == ["ci-m2-max"] * 3 + [
        "ci-m3-pro"] * 3
    assert all('<td data-value="36">36</td>' in r for r in rows)


def test_a_baseline_file_of_another_machine_for_the_same_case_is_another_row(tmp_path):
    for machine in ("mac-one", "mac-two"):
        folder = tmp_path / machine / "cpu"
        folder.mkdir(parents=True)
        shutil.copy(REPOSITORY / "baselines" / "cpu" / "shared-2core-vm.json", folder / f"{machine}.json")
    build_site([tmp_path / "mac-one", tmp_path / "mac-two"], tmp_path / "site")
    rows = case_rows((tmp_path / "site" / "index.html").read_text())
    assert sorted(re.search(r'data-machine="([^"]+)"', r).group(1) for r in rows) == [
        "mac-one", "mac-one", "mac-two", "mac-two"]


def test_a_rebuild_replaces_the_old_site_whole(tmp_path):
    build_site([REPOSITORY / "baselines" / "cpu"], tmp_path / "site")
    stale = tmp_path / "site" / "cases" / "stale.html"
    stale.write_text("from an older build")
    build_site([REPOSITORY / "baselines" / "cpu"], tmp_path / "site")
    assert not stale.exists() and (tmp_path / "site" / MARKER).is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["site"]


def test_a_folder_perfsuite_did_not_build_is_never_replaced(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(UsageError, match="did not write"):
        build_site([REPOSITORY / "baselines" / "cpu"], tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_without_matplotlib_the_site_is_built_and_says_which_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = build_site([REPOSITORY / "baselines" / "cpu"], tmp_path / "site")
    page = next((tmp_path / "site" / "cases").glob("*.html")).read_text()
    assert report.plot_note and "pip install 'perfsuite[plot]'" in report.plot_note
    assert "pip install &#x27;perfsuite[plot]&#x27;" in page and "<svg" not in page.split("<h2>Marks")[0]


def test_the_command_builds_the_site_and_names_the_problems(tmp_path, capsys):
    status = main(["site", str(FIXTURES / "bad-history"), "-o", str(tmp_path / "site")])
    out, err = capsys.readouterr()
    assert status == 0
    assert f"wrote {tmp_path / 'site' / 'index.html'}: 2 cases; 4 problem(s), named on the pages" in out
    assert err.count("perfsuite site: problem:") == 4


def test_the_command_refuses_a_history_that_does_not_exist(tmp_path, capsys):
    assert main(["site", str(tmp_path / "nowhere"), "-o", str(tmp_path / "site")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert not (tmp_path / "site").exists()


def test_the_command_says_when_there_is_nothing_to_show(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["site", str(tmp_path / "empty"), "-o", str(tmp_path / "site")]) == 2
    assert "no case history in" in capsys.readouterr().err


def test_the_index_weighs_the_same_per_case_however_long_the_histories(tmp_path):
    # 200 cases must fit in 2 MB: 10 KB a row, whatever the run count (the sparkline keeps the newest 60 runs).
    machines = (("mps", "ci-m2-max"), ("cuda", "nvidia-h200"))
    short = SyntheticPlan(machines, cases_per_machine=3, sessions=4, rounds=10)
    long = SyntheticPlan(machines, cases_per_machine=3, sessions=30, rounds=10)
    sizes = []
    for name, plan in (("short", short), ("long", long)):
        write_synthetic_archive(tmp_path / name / "archive", plan)
        sizes.append(build_site([tmp_path / name / "archive"], tmp_path / f"{name}-site").index_bytes)
    cases = len(long.machines) * long.cases_per_machine
    assert sizes[1] / cases < 10_000
    assert sizes[1] - sizes[0] < 700 * cases


def test_a_machine_name_of_220_bytes_builds_the_site_with_page_names_that_fit(tmp_path, capsys):
    machine = "m" * 220  # recorded with --perf-machine, whose limit is 229 bytes
    write_synthetic_archive(tmp_path / "baselines" / "archive",
                            SyntheticPlan(machines=(("cpu", machine),), cases_per_machine=2, sessions=3))
    assert main(["site", str(tmp_path / "baselines"), "-o", str(tmp_path / "site")]) == 0
    assert "wrote" in capsys.readouterr().out
    case_pages = sorted((tmp_path / "site" / "cases").iterdir())
    assert len(case_pages) == 2 and all(len(page.name.encode()) < 255 for page in case_pages)
    index = (tmp_path / "site" / "index.html").read_text()
    assert all(f'href="cases/{page.name}"' in index for page in case_pages)
    assert all(machine in page.read_text() for page in case_pages)
