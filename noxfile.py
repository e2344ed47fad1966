"""Sessions: `nox -s tests`, `nox -s bench`, and the tools built on the benchmarks.

Each session installs the project with constraints-linux-cpu.txt, which pins torch only on Linux;
on a Mac, PyPI's torch (with MPS) is installed as usual.
"""

import glob

import nox

nox.options.sessions = ["tests"]
CONSTRAINTS = ("-c", "constraints-linux-cpu.txt")


def install(session: nox.Session, extras: str = "") -> None:
    session.install(*CONSTRAINTS, "-e", f".{extras}")


@nox.session
def tests(session: nox.Session) -> None:
    """The unit and end-to-end tests (CPU), then ruff and mypy."""
    install(session, "[test]")
    session.run("pytest", "--benchmark-skip", *session.posargs)
    lint(session)


@nox.session(name="lint")
def lint_session(session: nox.Session) -> None:
    """ruff and mypy (the configuration in pyproject.toml)."""
    install(session, "[test]")
    lint(session)


def lint(session: nox.Session) -> None:
    session.run("ruff", "check", "perfsuite", "tests", "noxfile.py", "conftest.py", "examples")
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks on the default device (every accelerator present, else the CPU); extra args go to pytest,
    e.g. `nox -s bench -- --perf-profile smoke`."""
    install(session)
    session.run("pytest", "--benchmark-only", "--benchmark-autosave", *session.posargs)


@nox.session
def doctor(session: nox.Session) -> None:
    """Check this machine's setup (macOS, Rosetta, torch's MPS/CUDA build); e.g. `nox -s doctor -- --device mps`."""
    install(session)
    session.run("perfsuite", "doctor", *session.posargs)


@nox.session
def compare(session: nox.Session) -> None:
    """How far a result set is from another; by default your newest saved run (or this machine's baselines)
    against baselines/cuda/. E.g. `nox -s compare -- A.json B.json`."""
    install(session, "[plot]")
    session.run("perfsuite", "compare", *session.posargs)


@nox.session
def baseline(session: nox.Session) -> None:
    """Append 3 fresh processes' runs of the cases run to this machine's baseline histories (run it 3 times for a
    history the gate can judge with 3 processes); extra args go to pytest."""
    install(session)
    session.run("pytest", "--benchmark-only", "--perf-processes", "3", "--perf-update-baseline", *session.posargs)


@nox.session
def coverage(session: nox.Session) -> None:
    """Ops of every workload that would fall back to the CPU on MPS; e.g. `nox -s coverage -- --format md`."""
    install(session)
    session.run("perfsuite", "coverage", *session.posargs)


@nox.session
def gains(session: nox.Session) -> None:
    """What the article's advice gains, from a run's JSON; e.g. `nox -s gains -- out.json --format md`."""
    install(session)
    session.run("perfsuite", "gains", *session.posargs)


@nox.session
def calibrate(session: nox.Session) -> None:
    """Measure the measurer (`perfsuite selftest`), then render docs/measurement-quality.md from results/selftest/."""
    install(session)
    session.run("perfsuite", "selftest", *session.posargs)
    session.run("perfsuite", "selftest", "--report", *sorted(glob.glob("results/selftest/*.json")))


@nox.session(name="mps-wheel")
def mps_wheel(session: nox.Session) -> None:
    """Check the MPS support table and the macOS MPS needs against the macOS arm64 wheel of the installed torch
    version (downloads it, about 110 MB; not in the default sessions). E.g. `nox -s mps-wheel -- --wheel W.whl`."""
    install(session)
    session.run("python", "-m", "perfsuite.coverage.wheelcheck", *session.posargs)
