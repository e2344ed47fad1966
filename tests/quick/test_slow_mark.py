"""Which tests are slow each test file says itself, and the folders follow it: every file in tests/sessions says
`pytestmark = pytest.mark.slow`; no test in tests/quick starts a pytest or perfsuite session or is marked slow, so
`pytest tests/quick` is the quick subset's unit tests; a test elsewhere (tests/coverage, tests/browser) that starts a
session carries the mark in its file. A test starts sessions where it asks for `pytester`, or it, a fixture it asks
for or a function of the tests they call starts a subprocess whose command names pytest or perfsuite (a literal
`"pytest"` or `"perfsuite..."` beside the subprocess call). The rule reads the files' source (ast), so it judges a
file without importing it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
QUICK = TESTS / "quick"
SESSIONS = TESTS / "sessions"
SUBPROCESS_STARTERS = frozenset({"run", "Popen", "call", "check_call", "check_output"})
# A command that runs pytest or perfsuite: `-m pytest`, `-m perfsuite.cli`, the `perfsuite` command.
SESSION_COMMAND = re.compile(r"pytest|perfsuite(\.[\w.]+)?")
Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Module:
    """A test file's top-level functions, with those it imports from other modules of the tests and the fixtures
    of the conftest.py files above it."""

    path: Path
    tree: ast.Module
    functions: dict[str, Function] = field(default_factory=dict)


def module_path(dotted: str) -> Path | None:
    """tests.quick.test_x -> tests/quick/test_x.py, for modules of the tests only."""
    if not dotted.startswith("tests."):
        return None
    path = TESTS.parent.joinpath(*dotted.split(".")).with_suffix(".py")
    return path if path.is_file() else None


def read_module(path: Path, source: str | None = None, seen: frozenset[Path] = frozenset()) -> Module:
    tree = ast.parse(path.read_text() if source is None else source)
    module = Module(path, tree)
    scopes = [] if source is not None else [
        read_module(conftest, seen=seen | {path}) for conftest in conftests(path) if conftest not in seen | {path}
    ]
    for scope in scopes:
        module.functions.update(scope.functions)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and (imported := module_path(node.module)):
            if imported in seen | {path}:
                continue
            other = read_module(imported, seen=seen | {path})
            for alias in node.names:
                if alias.name in other.functions:
                    module.functions[alias.asname or alias.name] = other.functions[alias.name]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module.functions[node.name] = node
    return module


def conftests(path: Path) -> list[Path]:
    """The conftest.py files whose fixtures a test file under TESTS sees, outermost first."""
    folders = [folder for folder in reversed(path.parents) if folder.is_relative_to(TESTS)]
    return [folder / "conftest.py" for folder in folders if (folder / "conftest.py").is_file()]


def names_a_session(node: ast.AST) -> bool:
    """A literal `"pytest"` or `"perfsuite..."` in `node`."""
    return any(
        isinstance(sub, ast.Constant) and isinstance(sub.value, str) and SESSION_COMMAND.fullmatch(sub.value)
        for sub in ast.walk(node)
    )


def starts_a_subprocess(function: Function, module: Module, seen: frozenset[str] = frozenset()) -> bool:
    """Whether `function`, or a function of the tests it calls, calls subprocess.run, Popen and the like."""
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
    if any(isinstance(call.func, ast.Attribute) and call.func.attr in SUBPROCESS_STARTERS
           and isinstance(call.func.value, ast.Name) and call.func.value.id == "subprocess" for call in calls):
        return True
    called = sorted({call.func.id for call in calls if isinstance(call.func, ast.Name)} - seen - {function.name})
    return any(starts_a_subprocess(module.functions[name], module, seen | {function.name, *called})
               for name in called if name in module.functions)


def starts_sessions(function: Function, module: Module, seen: frozenset[str] = frozenset()) -> bool:
    """Whether `function` (a test, fixture or helper of `module`) starts pytest or perfsuite sessions."""
    arguments = {argument.arg for argument in function.args.args + function.args.kwonlyargs}
    if "pytester" in arguments:
        return True
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)]
    if starts_a_subprocess(function, module) and names_a_session(function):
        return True
    # a helper that starts a subprocess, handed a session's command (`run(python, "-m", "pytest", ...)`)
    if any(isinstance(call.func, ast.Name) and call.func.id in module.functions and names_a_session(call)
           and starts_a_subprocess(module.functions[call.func.id], module) for call in calls):
        return True
    called = {call.func.id for call in calls if isinstance(call.func, ast.Name)}
    # the fixtures it asks for, and the functions it calls
    names = sorted((called | arguments) - seen - {function.name})
    return any(
        starts_sessions(module.functions[name], module, seen | {function.name, *names})
        for name in names if name in module.functions
    )


def says_slow(node: ast.expr | ast.stmt) -> bool:
    return any(
        isinstance(sub, ast.Attribute) and sub.attr == "slow" and isinstance(sub.value, ast.Attribute)
        and sub.value.attr == "mark"
        for sub in ast.walk(node)
    )


def file_says_slow(module: Module) -> bool:
    """`pytestmark = pytest.mark.slow` (alone or in a list) at the top of the file."""
    return any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and says_slow(node.value)
        for node in module.tree.body
    )


def functions_under_test(module: Module) -> list[tuple[Function, list[ast.expr]]]:
    """Each test function with the decorators that apply to it (its class's too)."""
    found: list[tuple[Function, list[ast.expr]]] = []
    for node in module.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.append((node, node.decorator_list))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for method in node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name.startswith("test"):
                    found.append((method, [*node.decorator_list, *method.decorator_list]))
    return found


def used_fixtures(decorators: list[ast.expr]) -> set[str]:
    """The fixtures `@pytest.mark.usefixtures(...)` names."""
    return {
        argument.value for decorator in decorators for call in ast.walk(decorator)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "usefixtures"
        for argument in call.args if isinstance(argument, ast.Constant) and isinstance(argument.value, str)
    }


def starts_sessions_as_a_test(test: Function, decorators: list[ast.expr], module: Module) -> bool:
    """`starts_sessions` for a test, with the fixtures its marks (and its file's) ask for."""
    marks = [node.value for node in module.tree.body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)]
    fixtures = used_fixtures([*decorators, *marks])
    return "pytester" in fixtures or starts_sessions(test, module) or any(
        starts_sessions(module.functions[name], module) for name in sorted(fixtures) if name in module.functions
    )


def session_tests(module: Module) -> list[str]:
    return [test.name for test, decorators in functions_under_test(module)
            if starts_sessions_as_a_test(test, decorators, module)]


def files_in(folder: Path) -> list[Path]:
    return sorted(folder.rglob("test_*.py"))


def test_the_folders_hold_the_tests():
    assert len(files_in(QUICK)) > 40 and len(files_in(SESSIONS)) > 20


def test_no_test_in_the_quick_folder_starts_a_session():
    starting = {path.name: names for path in files_in(QUICK) if (names := session_tests(read_module(path)))}
    assert not starting, f"these tests start pytest or perfsuite sessions: move them to {SESSIONS}: {starting}"


def test_no_test_in_the_quick_folder_is_marked_slow():
    marked = []
    for path in files_in(QUICK):
        module = read_module(path)
        if file_says_slow(module):
            marked.append(path.name)
        marked += [f"{path.name}::{test.name}" for test, decorators in functions_under_test(module)
                   if any(says_slow(decorator) for decorator in decorators)]
    assert not marked, f"slow tests belong in {SESSIONS}: {marked}"


def test_every_file_in_the_sessions_folder_says_it_is_slow():
    unmarked = [path.name for path in files_in(SESSIONS) if not file_says_slow(read_module(path))]
    assert not unmarked, f"add `pytestmark = pytest.mark.slow` at the top of: {unmarked}"


def test_a_test_elsewhere_that_starts_a_session_is_marked_slow_in_its_file():
    unmarked = []
    for path in sorted(set(files_in(TESTS)) - set(files_in(QUICK)) - set(files_in(SESSIONS))):
        module = read_module(path)
        if file_says_slow(module):
            continue
        unmarked += [
            f"{path.relative_to(TESTS)}::{test.name}" for test, decorators in functions_under_test(module)
            if starts_sessions_as_a_test(test, decorators, module) and not any(says_slow(d) for d in decorators)
        ]
    assert not unmarked, f"mark these `@pytest.mark.slow` (they start sessions): {unmarked}"


# The rule itself, on small sources.
HEADER = "import subprocess\nimport sys\nfrom pathlib import Path\nimport pytest\n\n"
RUNS_PYTEST = "def runs_pytest():\n    subprocess.run([sys.executable, '-m', 'pytest', '--co'], check=False)\n\n"
RUNS_PERFSUITE = ("def runs_perfsuite():\n    command = [sys.executable, '-m', 'perfsuite.cli', 'list']\n"
                  "    subprocess.run(command, check=False)\n\n")
RUNS_PYTHON = "def runs_python():\n    subprocess.run([sys.executable, '-c', 'import perfsuite'], check=False)\n\n"


def judged(source: str, tmp_path: Path) -> dict[str, bool]:
    path = tmp_path / "test_example.py"
    module = read_module(path, HEADER + source)
    return {test.name: starts_sessions_as_a_test(test, decorators, module)
            for test, decorators in functions_under_test(module)}


@pytest.mark.parametrize("source", [
    "def test_it(pytester):\n    pass\n",
    RUNS_PYTEST.replace("def runs_pytest():", "def test_it():"),
    RUNS_PERFSUITE.replace("def runs_perfsuite():", "def test_it():"),
    RUNS_PYTEST + "def test_it():\n    runs_pytest()\n",
    "def run(*command):\n    return subprocess.run(command)\n\n"
    "def test_it():\n    run(sys.executable, '-m', 'pytest')\n",
    "@pytest.fixture\ndef project(pytester):\n    return pytester\n\ndef test_it(project):\n    pass\n",
    RUNS_PERFSUITE + "@pytest.fixture\ndef listed():\n    runs_perfsuite()\n\ndef test_it(listed):\n    pass\n",
    "class TestIt:\n    def test_it(self, pytester):\n        pass\n",
    "@pytest.fixture\ndef project(pytester):\n    return pytester\n\n"
    "@pytest.mark.usefixtures('project')\ndef test_it():\n    pass\n",
], ids=["pytester", "pytest-subprocess", "perfsuite-subprocess", "helper", "helper-given-pytest",
        "fixture-with-pytester", "fixture-starting-perfsuite", "method", "usefixtures"])
def test_a_test_that_starts_a_session_is_found(source, tmp_path):
    assert judged(source, tmp_path) == {"test_it": True}


@pytest.mark.parametrize("source", [
    "def test_it(tmp_path):\n    Path(__file__).read_text()\n",
    RUNS_PYTHON + "def test_it():\n    runs_python()\n",
    "def run(*command):\n    return subprocess.run(command)\n\ndef test_it():\n    run(sys.executable, '-c', 'pass')\n",
    "def test_it():\n    assert 'pytest' in 'pytest-benchmark'\n",
], ids=["reads-a-file", "python-subprocess", "helper-given-python", "names-pytest-without-a-subprocess"])
def test_a_test_that_starts_no_session_is_not(source, tmp_path):
    assert judged(source, tmp_path) == {"test_it": False}


@pytest.mark.parametrize("source, says", [
    ("pytestmark = pytest.mark.slow\n", True),
    ("pytestmark = [pytest.mark.slow, pytest.mark.skipif(True, reason='r')]\n", True),
    ("pytestmark = pytest.mark.skipif(True, reason='slow')\n", False),
    ("SLOW = pytest.mark.slow\n", False),
])
def test_the_files_mark_is_read_from_its_pytestmark(source, says, tmp_path):
    assert file_says_slow(read_module(tmp_path / "test_example.py", HEADER + source)) is says
