"""Fixtures shared by the test folders. Which tests are slow each file says itself (`pytestmark = pytest.mark.slow`
in every file of tests/sessions); tests/quick/test_slow_mark.py checks that none is missed."""

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from perfsuite import Workload
from tests.scratch_project import as_a_fresh_process_registers


class EmbeddingWithMaxNorm(torch.nn.Module):
    """nn.Embedding(max_norm=...) renormalises its rows with aten::embedding_renorm_, an op that
    MPSFallback.mm sends to the CPU in every checked torch release."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 8, max_norm=1.0)

    def forward(self, token_ids):
        return self.embedding(token_ids).mean(dim=1)


def pytest_configure(config: pytest.Config) -> None:
    """Under `-n` with xdist's default scheduling (`load`, whether named or not: the two cannot be told apart here),
    xdist hands out whole test files (`loadscope`) instead of single tests: the tests of a file that share one
    expensive module fixture (a session run under the MPS double, a built site, an installed wheel, running DDP
    ranks) then run on one worker, which builds it once. (xdist's `loadgroup` would group by marks, but under pytest 9
    its workers cannot rename their tests' ids, so each worker built the fixture again. Not in pyproject's addopts: a
    `--dist` there makes pytest-benchmark believe every run is distributed, and refuse `--benchmark-only`.)"""
    if config.getoption("numprocesses", None) and config.getoption("dist", None) == "load":
        config.option.dist = "loadscope"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, each file's in its order: under `-n 2` the long sessions then start while the other
    worker still has work, and the quick tests fill the end, instead of one worker finishing a long session alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def planted_fallback() -> Workload:
    """A small model that uses an op known to fall back to the CPU on MPS."""
    return Workload(
        name="planted-fallback", build_module=lambda profile: EmbeddingWithMaxNorm(), batch_sizes={"smoke": (2,)},
        make_inputs=lambda profile, batch_size: torch.randint(0, 50, (batch_size, 5)),
        make_target=lambda profile, batch_size: torch.randn(batch_size, 8),
        loss=lambda output, target: F.mse_loss(output, target),
    )


@pytest.fixture(autouse=True, scope="session")
def _not_an_xdist_worker_for_inner_sessions() -> Iterator[None]:
    """Under `pytest -n`, the pytest sessions a test starts (pytester, worker processes) inherit xdist's variables,
    and pytest-benchmark then believes it runs under xdist and disables itself; they are sessions of their own, each
    given one torch thread."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            # Two workers on a small machine: torch's threads in each, and in the sessions they start, would
            # oversubscribe its cores many times over.
            monkeypatch.setenv("OMP_NUM_THREADS", "1")
            torch.set_num_threads(1)
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(name, raising=False)
        yield


@pytest.fixture(autouse=True, scope="session")
def _inner_sessions_without_hypothesis() -> Iterator[None]:
    """The pytest sessions a test starts, in processes of their own or in this one, are a user's sessions: they run
    without Hypothesis's pytest plugin, which only the test extras install. That plugin imports all of Hypothesis at
    each session's end (its terminal summary), every module of it rewritten for asserts: about a second of each
    session, here, with no Hypothesis test to show for it. (`PYTEST_ADDOPTS`: the perfsuite commands that start
    pytest themselves, bisect's judgements and `perfsuite ci`, pass it on too.)"""
    with pytest.MonkeyPatch.context() as monkeypatch:
        addopts = os.environ.get("PYTEST_ADDOPTS", "")
        monkeypatch.setenv("PYTEST_ADDOPTS", f"{addopts} -p no:hypothesispytest".strip())
        yield


@pytest.fixture(scope="session")
def _torch_dynamo_imported() -> None:
    """torch._dynamo imported once in this process, before any pytester takes its snapshot of the modules: a gate
    session imports it (perfsuite.run.devices asks whether torch.compile can run), and pytester unloads what a run
    imported, so the next run would import it again, and torch refuses a second registration of its test ops."""
    import torch._dynamo  # noqa: F401


@pytest.fixture(scope="session")
def _torch_inductor_imported(_torch_dynamo_imported: None) -> None:
    """torch.compile's inductor path imported once in this process, before any pytester takes its snapshot of the
    modules, as `_torch_dynamo_imported` does for torch._dynamo: a run that compiles imports inductor's modules,
    pytester unloads them after it, and the next run's import registers inductor's cache artifacts a second time,
    which torch refuses. One tiny compile imports them."""
    import torch._dynamo

    torch.compile(lambda x: torch.relu(x) + 1, backend="inductor")(torch.ones(4))
    torch._dynamo.reset()


TESTS = Path(__file__).resolve().parent


@contextlib.contextmanager
def this_suites_test_modules_hidden() -> Iterator[None]:
    """While inside: this suite's test modules that pytest imported by their bare names (those of a folder without
    __init__.py, such as tests/benchmarks/test_models.py) out of sys.modules, so that a run in this process imports
    its own project's file of the same name instead of refusing it as another file of a module already imported."""
    hidden = {name: module for name, module in sys.modules.items()
              if "." not in name and Path(getattr(module, "__file__", None) or "/").is_relative_to(TESTS)}
    for name in hidden:
        del sys.modules[name]
    try:
        yield
    finally:
        sys.modules.update(hidden)


@pytest.fixture
def run_in_process(
    _torch_dynamo_imported: None, pytester: pytest.Pytester
) -> Callable[..., pytest.RunResult]:
    """`pytest ARGS` in the pytester project, in this process (`runpytest_inprocess`): it saves a session the
    seconds of a fresh Python importing torch and perfsuite. Each run starts with no model registered, as a user's
    session in a fresh process does (the built-in ones load as they would there; those it registers leave with it),
    and torch's thread count is put back after it (a session's --perf-threads sets it). Worker processes
    (--perf-processes) are fresh processes all the same; what needs a process of its own (a signal, a relaunch)
    keeps runpytest_subprocess."""

    def run(*args: str, no_reraise_ctrlc: bool = False) -> pytest.RunResult:
        """`no_reraise_ctrlc`: a KeyboardInterrupt in the run ends it as interrupted (pytester raises it again
        otherwise)."""
        with as_a_fresh_process_registers(), this_suites_test_modules_hidden():
            return pytester.runpytest_inprocess(*args, no_reraise_ctrlc=no_reraise_ctrlc)

    return run


@pytest.fixture
def sigint_not_ignored() -> Iterator[None]:
    """SIGINT at Python's default in this process while the test starts the sessions it interrupts: a shell that
    starts the suite in the background without job control (`(pytest ... &)`) starts it with SIGINT ignored, every
    process it starts inherits that, and the Ctrl-C a test sends its session would then do nothing."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
