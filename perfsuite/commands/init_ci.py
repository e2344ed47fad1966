"""`perfsuite init-ci`: a GitHub Actions workflow for your repository's self-hosted Apple-silicon runners.

It writes `.github/workflows/perfsuite.yml` and, where they are missing, `perf-requirements.txt` (what the runner
installs: perfsuite as it is installed here, or a version pin to edit), `perf-constraints.txt` (torch pinned to the
version installed here, so a torch upgrade is a commit of its own) and `.github/actionlint.yaml` (the runners' own
labels, which actionlint must be told of). The workflow:

- judges a pull request from a branch of the repository against its merge base with `--perf-ab merge-base`
  (a fork's pull request never runs on the self-hosted machine);
- after a push to the default branch appends K processes to each Mac's history, commits the history to a
  branch of its own (`perf-history`) and builds the history site as an artifact;
- posts the tables to the job summary; every token is read-only except the one job that pushes the history.

The steps call `perfsuite ci ...` (perfsuite/commands/ci.py), so the logic is tested with perfsuite, not in YAML.
Exit status: 0 when written, 2 when the workflow exists (pass --force to replace it).
"""

from __future__ import annotations

import argparse
import json
import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.version import Version

from perfsuite.errors import UsageError
from perfsuite.options.settings import AB_DEFAULT_PAIRS, MIN_AB_PAIRS

WORKFLOW_PATH = ".github/workflows/perfsuite.yml"
WORKFLOW_TEMPLATE = Path(__file__).with_name("templates") / "workflow.yml"
ACTIONLINT_CONFIG_PATH = ".github/actionlint.yaml"
REQUIREMENTS_PATH = "perf-requirements.txt"
CONSTRAINTS_PATH = "perf-constraints.txt"
DEFAULT_RUNNER_LABEL = "perfsuite-mac"
DEFAULT_PROCESSES = 3
DEFAULT_PYTHON = "python3.11"
DEFAULT_BRANCH = "main"
HISTORY_BRANCH = "perf-history"
EXIT_EXISTS = 2
# Actions pinned to a full commit (a tag can be moved under you); the comment names the release. Both run on Node 24,
# so a self-hosted runner needs Actions Runner 2.327.1 or newer (their READMEs say so); the Node 20 releases are
# being retired by GitHub. Each commit was checked against its tag in the actions' own repositories.
CHECKOUT_ACTION = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1"
UPLOAD_ACTION = "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0"
# GitHub's own Pages actions (each commit checked against its tag in the action's repository; deploy-pages runs on
# Node 24). configure-pages is left out: its latest release still runs on Node 20, and with the repository's Pages
# source set to GitHub Actions nothing needs configuring.
UPLOAD_PAGES_ACTION = "actions/upload-pages-artifact@fc324d3547104276b827a68afc52ff2a11cc49c9  # v5.0.0"
DEPLOY_PAGES_ACTION = "actions/deploy-pages@cd2ce8fcbc39b97be8ca5fce6e763baed58fa128  # v5.0.0"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class WorkflowChoices:
    """What the generated workflow runs: one job per runner label (each a Mac with that label besides self-hosted,
    macOS and ARM64; the label also names its history file), K processes per case recorded into the history, the
    process pairs of a pull request's A/B job, the Python command on the runners, the branch whose pushes are
    recorded and the branch that keeps the histories; whether a push whose gate finds a regression bisects it
    (`bisect_on_regression`: runner time, so off unless asked), and whether the site is published to GitHub Pages."""

    runner_labels: tuple[str, ...] = (DEFAULT_RUNNER_LABEL,)
    processes: int = DEFAULT_PROCESSES
    ab_pairs: int = AB_DEFAULT_PAIRS
    python: str = DEFAULT_PYTHON
    default_branch: str = DEFAULT_BRANCH
    history_branch: str = HISTORY_BRANCH
    bisect_on_regression: bool = False
    pages: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite init-ci`'s arguments to `parser`."""
    parser.add_argument(
        "--runner-label", action="append", default=[], metavar="LABEL",
        help=f"a label of one self-hosted Mac; repeat it for several (default: {DEFAULT_RUNNER_LABEL})",
    )
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES,
                        help="processes per case recorded into the history on each push (default: 3)")
    parser.add_argument("--ab-pairs", type=int, default=AB_DEFAULT_PAIRS,
                        help=f"process pairs of a pull request's A/B job (default: {AB_DEFAULT_PAIRS})")
    parser.add_argument("--python", default=DEFAULT_PYTHON, help="the runner's Python command (default: %(default)s)")
    parser.add_argument("--branch", default=DEFAULT_BRANCH, help="the branch whose pushes are recorded (default: main)")
    parser.add_argument("--project", default=".", help="the repository's root folder (default: the current one)")
    parser.add_argument("--bisect-on-regression", action="store_true", help=(
        "when a push's gate finds a regression, bisect it between the last commit recorded before and the new one "
        "(an A/B job at every step, on the runner); the job summary names the commit (default: off)"))
    parser.add_argument("--pages", action="store_true", help=(
        "publish the history site to GitHub Pages (set the repository's Pages source to GitHub Actions); "
        "default: the site is only uploaded as an artifact"))
    parser.add_argument("--force", action="store_true", help="replace an existing workflow file")


def run(args: argparse.Namespace) -> int:
    """Write the workflow and the two requirement files that are missing; print what was written."""
    choices = WorkflowChoices(
        runner_labels=tuple(args.runner_label) or (DEFAULT_RUNNER_LABEL,), processes=args.processes,
        ab_pairs=args.ab_pairs, python=args.python, default_branch=args.branch,
        bisect_on_regression=args.bisect_on_regression, pages=args.pages,
    )
    check_choices(choices)
    root = Path(args.project)
    workflow = root / WORKFLOW_PATH
    if workflow.exists() and not args.force:
        print(f"perfsuite init-ci: {workflow} exists; pass --force to replace it")
        return EXIT_EXISTS
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(workflow_text(choices), encoding="utf-8")
    print(f"wrote {workflow}")
    for name, text in ((REQUIREMENTS_PATH, requirements_text(perfsuite_requirement())),
                       (CONSTRAINTS_PATH, constraints_text(installed_version("torch"))),
                       (ACTIONLINT_CONFIG_PATH, actionlint_config_text(choices.runner_labels))):
        path = root / name
        if path.exists():
            print(f"kept {path}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


def name_problem(name: str) -> str | None:
    """What makes `name` unfit for a runner label, command or branch name in the workflow, or None: whitespace
    around it (a trailing newline would make `mac` and `mac\\n` two labels), a control character, or a character
    outside letters, digits, `.`, `_` and `-`, or more than 64 of them."""
    if name != name.strip():
        return "has whitespace (a space or a newline) before or after it; remove it"
    control = next((c for c in name if unicodedata.category(c).startswith("C")), None)
    if control is not None:
        return f"holds the control character U+{ord(control):04X}; remove it"
    if not _LABEL.fullmatch(name):
        return ("is not a runner label, command or branch name; use up to 64 letters, digits, . _ - (first a letter "
                "or digit)")
    return None


def check_choices(choices: WorkflowChoices) -> None:
    """Raise UsageError for a label, Python command or branch that would break the workflow, or a process count
    that cannot calibrate the gate."""
    named = [*(("--runner-label", label) for label in choices.runner_labels), ("--python", choices.python),
             ("--branch", choices.default_branch), ("the history branch", choices.history_branch)]
    for option, name in named:
        problem = name_problem(name)
        if problem is not None:
            raise UsageError(f"{option} {name!r} {problem}")
    if len(set(choices.runner_labels)) != len(choices.runner_labels):
        raise UsageError(f"--runner-label: each label once, please (got {', '.join(choices.runner_labels)})")
    if not 1 <= choices.processes <= 100:
        raise UsageError(f"--processes: {choices.processes} is outside 1-100; 3 calibrates the gate")
    if not MIN_AB_PAIRS <= choices.ab_pairs <= 100:
        raise UsageError(f"--ab-pairs: {choices.ab_pairs} is outside {MIN_AB_PAIRS}-100; an A/B verdict needs at least "
                         f"{MIN_AB_PAIRS} pairs, and {AB_DEFAULT_PAIRS} keep the floor within the band on a quiet Mac")


def installed_version(distribution: str) -> str | None:
    """The version of `distribution` installed here, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def perfsuite_requirement() -> str:
    """How a runner installs the perfsuite installed here: its git URL and commit where it came from one (PEP 610),
    else a version pin."""
    try:
        direct = json.loads(metadata.distribution("perfsuite").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        direct = {}
    return requirement_of(direct, installed_version("perfsuite") or "0")


def requirement_of(direct_url: dict[str, object], version: str) -> str:
    """A pip requirement for perfsuite from its PEP 610 `direct_url` record: `perfsuite @ git+URL@COMMIT` for a
    git install, else `perfsuite==VERSION` (a local checkout or wheel cannot be reached from a runner)."""
    vcs = direct_url.get("vcs_info")
    url = direct_url.get("url")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and isinstance(url, str) and not url.startswith("file:"):
        return f"perfsuite @ git+{url}@{vcs.get('commit_id')}"
    return f"perfsuite=={version}"


def requirements_text(requirement: str) -> str:
    """perf-requirements.txt: what the runners install (your models' own packages go here too)."""
    return (
        "# What the perfsuite workflow installs on the runner (and your models' own packages, if any).\n"
        "# Pin perfsuite: a git URL with a tag or commit, e.g. perfsuite @ git+https://HOST/ORG/perfsuite@v0.1.0,\n"
        "# or a wheel you publish.\n"
        f"{requirement}\n"
    )


def constraints_text(torch_version: str | None) -> str:
    """perf-constraints.txt: torch pinned (its public version: a local build tag such as +cpu names no wheel on a
    Mac), so that upgrading it is a commit that starts the histories over."""
    pin = f"torch=={Version(torch_version).public}" if torch_version else "# torch==X.Y.Z"
    return (
        "# Versions the perfsuite workflow may install. A torch upgrade changes every case: make it a commit of its\n"
        "# own, then run the workflow with rebaseline (workflow_dispatch) to start the histories over.\n"
        f"{pin}\n"
    )


def yaml_string(text: str) -> str:
    """`text` as a YAML double-quoted scalar, so that it stays that string: unquoted, `null`, `true`, `3.10` (read
    3.1) and `010` would each be read as something else. JSON's string syntax is YAML's double-quoted style."""
    return json.dumps(text)


def actionlint_config_text(runner_labels: Sequence[str]) -> str:
    """.github/actionlint.yaml: the self-hosted runners' own labels, so that actionlint checks the workflow's
    `runs-on` against them."""
    labels = "".join(f"    - {yaml_string(label)}\n" for label in runner_labels)
    return f"self-hosted-runner:\n  labels:\n{labels}"


def _runner_matrix(labels: Sequence[str]) -> str:
    return "\n".join(f"          - {yaml_string(label)}" for label in labels)


class WorkflowTemplate(string.Template):
    """The workflow's template (templates/workflow.yml): `@@{name}` marks what `workflow_text` fills in, so that
    GitHub's own `${{ ... }}` expressions stay as they are."""

    delimiter = "@@"


def workflow_text(choices: WorkflowChoices) -> str:
    """The GitHub Actions workflow for `choices` (YAML text): templates/workflow.yml with the parts that depend on
    them filled in."""
    matrix = _runner_matrix(choices.runner_labels)
    python, default_branch = yaml_string(choices.python), yaml_string(choices.default_branch)
    history_branch = yaml_string(choices.history_branch)
    history_checkout = (
        "      # Reads the history branch with the job's token, given to this step alone (in its env, never on disk:\n"
        "      # the checkout keeps no credentials, so no other step can read it). On a private repository git cannot\n"
        "      # fetch the branch without it; a fetch that fails fails the step, never starting the history over.\n"
        '      - run: .venv/bin/perfsuite ci checkout-history --branch "$PERF_HISTORY_BRANCH"\n'
        "        env:\n"
        "          GITHUB_TOKEN: ${{ github.token }}"
    )
    setup = f"""      - name: Python environment with perfsuite and the pinned torch
        run: |
          command -v "$PYTHON" || {{ echo "::error::$PYTHON not found on the runner"; exit 1; }}
          "$PYTHON" -m venv .venv
          .venv/bin/python -m pip install -c {CONSTRAINTS_PATH} -r {REQUIREMENTS_PATH}
      # Fails fast, with the fix, when this runner cannot use MPS (Rosetta Python, old macOS, no MPS build).
      - run: .venv/bin/perfsuite doctor --device mps"""
    bisect_step = (
        "\n      # A regression the gate found on this push: bisected between the last commit recorded before it and\n"
        "      # this one, an A/B job at every step; the job summary names the commit, and the record goes to the\n"
        "      # history (the site marks it on the case's page). Nothing runs when no case regressed.\n"
        '      - run: .venv/bin/perfsuite ci bisect --machine "$PERF_MACHINE"'
    ) if choices.bisect_on_regression else ""
    pages = f"""      - uses: {UPLOAD_PAGES_ACTION}
        with:
          path: perf-site/
  pages:
    name: publish the history site to GitHub Pages
    needs: site
    runs-on: ubuntu-latest
    # The site is static and already built: this job only hands it to Pages (set the repository's Pages source to
    # GitHub Actions once, under Settings > Pages).
    permissions:
      pages: write  # deploys to Pages
      id-token: write  # proves to Pages that the deployment comes from this workflow
    environment:
      name: github-pages
      url: ${{{{ steps.deployment.outputs.page_url }}}}
    timeout-minutes: 10
    steps:
      - id: deployment
        uses: {DEPLOY_PAGES_ACTION}
""" if choices.pages else ""
    extras = "".join((
        "\n# A push whose gate finds a regression is bisected (perfsuite init-ci --bisect-on-regression)."
        if choices.bisect_on_regression else "",
        "\n# The site is published to GitHub Pages (perfsuite init-ci --pages)." if choices.pages else "",
    ))
    checkout = f"""      - uses: {CHECKOUT_ACTION}
        with:
          fetch-depth: 0
          persist-credentials: false"""
    return WorkflowTemplate(WORKFLOW_TEMPLATE.read_text(encoding="utf-8")).substitute(
        extras=extras, ab_pairs=choices.ab_pairs, default_branch=choices.default_branch, processes=choices.processes,
        history_branch=choices.history_branch, CONSTRAINTS_PATH=CONSTRAINTS_PATH, REQUIREMENTS_PATH=REQUIREMENTS_PATH,
        default_branch_yaml=default_branch, matrix=matrix, python_yaml=python, checkout=checkout, setup=setup,
        UPLOAD_ACTION=UPLOAD_ACTION, history_branch_yaml=history_branch, history_checkout=history_checkout,
        bisect_step=bisect_step, pages=pages,
    )
