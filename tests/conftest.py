"""Fixtures shared by the test folders, and the `slow` mark on tests that start pytest or perfsuite sessions."""

import ast
import functools
import inspect
import os
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from perfsuite import Workload


class EmbeddingWithMaxNorm(torch.nn.Module):
    """nn.Embedding(max_norm=...) renormalises its rows with aten::embedding_renorm_, an op that
    MPSFallback.mm sends to the CPU in every checked torch release."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 8, max_norm=1.0)

    def forward(self, token_ids):
        return self.embedding(token_ids).mean(dim=1)


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


TESTS = Path(__file__).resolve().parent
BROWSER_TESTS = TESTS / "browser"
SUBPROCESS_STARTERS = frozenset({"run", "Popen", "call", "check_call", "check_output"})
# A command that runs pytest or perfsuite: `-m pytest`, `-m perfsuite.cli`, the `perfsuite` command.
SESSION_COMMAND = re.compile(r"pytest|perfsuite(\.[\w.]+)?")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` every test that starts pytest or perfsuite sessions or drives a browser, before `-m "not slow"`
    deselects."""
    for item in items:
        if starts_sessions(item) or item.path.is_relative_to(BROWSER_TESTS):
            item.add_marker(pytest.mark.slow)


def starts_sessions(item: pytest.Item) -> bool:
    """Whether a test runs pytest or perfsuite in processes of their own: it asks for `pytester`, or the test, a
    fixture it uses or a function of the tests they call starts a subprocess whose command names pytest or perfsuite
    (a literal `"pytest"` or `"perfsuite..."` beside the subprocess call)."""
    if "pytester" in getattr(item, "fixturenames", ()):
        return True
    function = getattr(item, "function", None)
    fixture_definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    fixtures = [definition.func for definitions in fixture_definitions.values() for definition in definitions]
    return any(_starts_sessions(f) for f in [function, *fixtures] if f is not None)


@functools.cache
def _starts_sessions(function: Callable[..., object], seen: frozenset[str] = frozenset()) -> bool:
    function = inspect.unwrap(function)
    source_file = inspect.getsourcefile(function)
    if source_file is None or not Path(source_file).resolve().is_relative_to(TESTS):
        return False
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    starts_subprocess = any(
        isinstance(call.func, ast.Attribute) and call.func.attr in SUBPROCESS_STARTERS
        and isinstance(call.func.value, ast.Name) and call.func.value.id == "subprocess"
        for call in calls
    )
    names_a_session = any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and SESSION_COMMAND.fullmatch(node.value)
        for node in ast.walk(tree)
    )
    if starts_subprocess and names_a_session:
        return True
    callees = {call.func.id for call in calls if isinstance(call.func, ast.Name)} - seen
    helpers = [function.__globals__.get(name) for name in sorted(callees)]
    return any(
        _starts_sessions(helper, seen | callees) for helper in helpers if inspect.isfunction(helper)
    )
