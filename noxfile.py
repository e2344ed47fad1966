"""Sessions: `nox -s tests`, `nox -s quick` (the tests not marked slow), `nox -s bench`, and the tools built on the
benchmarks.

Every session runs in one shared virtualenv (`.nox/.cache/perfsuite-venv`, under nox's --envdir): the project
installed editable with its [test] extra and constraints-linux-cpu.txt, which pins torch only on Linux (on a Mac,
PyPI's torch with MPS is installed as usual). The first session builds it; later ones reuse it, and it is brought
up to date when pyproject.toml, the constraints or the Python version change. Delete the folder to rebuild it.
"""

import glob
import hashlib
import os
import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
# Sessions run in the shared environment below, not in one virtualenv each (about 1.6 GB and 90 s apiece).
nox.options.default_venv_backend = "none"
CONSTRAINTS_FILE = "constraints-linux-cpu.txt"
SHARED_ENV_NAME = "perfsuite-venv"
INSTALL_STAMP_NAME = "perfsuite-install.sha256"


def install_fingerprint() -> str:
    """What the shared environment's install depends on: the dependency files and the Python that builds it."""
    digest = hashlib.sha256(sys.version.encode())
    for name in ("pyproject.toml", CONSTRAINTS_FILE):
        digest.update(Path(name).read_bytes())
    return digest.hexdigest()


def shared_env(session: nox.Session) -> Path:
    """The shared virtualenv, built or brought up to date first when its install is missing or stale."""
    location = session.cache_dir / SHARED_ENV_NAME
    stamp = location / INSTALL_STAMP_NAME
    fingerprint = install_fingerprint()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == fingerprint:
        return location
    if not (location / "pyvenv.cfg").is_file():
        session.run(sys.executable, "-m", "venv", str(location))
    session.run(
        str(bin_dir(location) / "python"), "-m", "pip", "install", "-c", CONSTRAINTS_FILE, "-e", ".[test]",
    )
    stamp.write_text(fingerprint, encoding="utf-8")
    return location


def bin_dir(location: Path) -> Path:
    """Where a virtualenv keeps its commands."""
    return location / ("Scripts" if os.name == "nt" else "bin")


def run(session: nox.Session, command: str, *args: str) -> None:
    """Run one of the shared environment's commands, as if that environment were activated."""
    location = shared_env(session)
    path = f"{bin_dir(location)}{os.pathsep}{os.environ.get('PATH', '')}"
    session.run(str(bin_dir(location) / command), *args, env={"VIRTUAL_ENV": str(location), "PATH": path})


@nox.session
def tests(session: nox.Session) -> None:
    """The unit and end-to-end tests (CPU), then ruff and mypy."""
    run(session, "pytest", "--benchmark-skip", "-n", "2", *session.posargs)
    lint(session)


@nox.session
def quick(session: nox.Session) -> None:
    """The tests not marked slow (tests/quick and the in-process tests of tests/coverage: no pytest or perfsuite
    sessions of their own): the decision, the store, the matrix and the options in under a minute; extra args go to
    pytest."""
    run(session, "pytest", "-m", "not slow", "--benchmark-skip", "-n", "2", "-q", *session.posargs)


@nox.session(name="lint")
def lint_session(session: nox.Session) -> None:
    """ruff and mypy over the paths and with the configuration in pyproject.toml."""
    lint(session)


def lint(session: nox.Session) -> None:
    run(session, "ruff", "check")
    run(session, "mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks on the default device (every accelerator present, else the CPU); extra args go to pytest,
    e.g. `nox -s bench -- --perf-profile smoke`."""
    run(session, "pytest", "--benchmark-only", "--benchmark-autosave", *session.posargs)


@nox.session
def ab(session: nox.Session) -> None:
    """A/B in one job: this working tree against BASE (default: the merge base with the default branch), side by
    side; extra args go to pytest, e.g. `nox -s ab -- --perf-ab HEAD~1 --perf-model resnet18`."""
    chosen = [] if any(arg.startswith("--perf-ab") for arg in session.posargs) else ["--perf-ab", "merge-base"]
    run(session, "pytest", "--benchmark-only", *chosen, *session.posargs)


@nox.session
def doctor(session: nox.Session) -> None:
    """Check this machine's setup (macOS, Rosetta, torch's MPS/CUDA build); e.g. `nox -s doctor -- --device mps`."""
    run(session, "perfsuite", "doctor", *session.posargs)


@nox.session
def compare(session: nox.Session) -> None:
    """How far a result set is from another; by default your newest saved run (or this machine's baselines)
    against baselines/cuda/. E.g. `nox -s compare -- A.json B.json`."""
    run(session, "perfsuite", "compare", *session.posargs)


@nox.session
def site(session: nox.Session) -> None:
    """A static site of every case's runs over time, from baselines/ (and its archive) into out/site/; e.g.
    `nox -s site -- baselines/ ci-macs/baselines/ -o out/site`."""
    run(session, "perfsuite", "site", *session.posargs)


@nox.session
def baseline(session: nox.Session) -> None:
    """Append 3 fresh processes' runs of the cases run to this machine's baseline histories (run it 3 times for a
    history the gate can judge with 3 processes) and archive the session in baselines/archive/; extra args go to
    pytest."""
    run(session, "pytest", "--benchmark-only", "--perf-processes", "3", "--perf-update-baseline", *session.posargs)


@nox.session
def coverage(session: nox.Session) -> None:
    """Ops of every workload that would fall back to the CPU on MPS; e.g. `nox -s coverage -- --format md`."""
    run(session, "perfsuite", "coverage", *session.posargs)


@nox.session
def gains(session: nox.Session) -> None:
    """What the article's advice gains, from a run's JSON; e.g. `nox -s gains -- out.json --format md`."""
    run(session, "perfsuite", "gains", *session.posargs)


@nox.session
def calibrate(session: nox.Session) -> None:
    """Measure the measurer (`perfsuite selftest`, into docs/records/selftest/), then render
    docs/measurement-quality.md from the files there."""
    run(session, "perfsuite", "selftest", *session.posargs)
    run(session, "perfsuite", "selftest", "--report", *sorted(glob.glob("docs/records/selftest/*.json")))


@nox.session(name="mps-wheel")
def mps_wheel(session: nox.Session) -> None:
    """Check perfsuite's MPS facts (the support table, the CPU-fallback ops, the macOS MPS needs, the fp16
    convolution guard, the event stamps) against a torch release's macOS arm64 wheel: the installed torch's by default
    (downloads it, about 110-140 MB; not in the default sessions). E.g. `nox -s mps-wheel -- --torch 2.16.0` or
    `nox -s mps-wheel -- --wheel W.whl`."""
    run(session, "python", "-m", "perfsuite.coverage.wheelcheck", *session.posargs)
