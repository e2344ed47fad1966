"""Every use perfsuite makes of pytest-benchmark's private API, in one place.

pytest-benchmark has no public way to hand its `benchmark` fixture rounds timed elsewhere (in worker processes,
or on an A/B job's head side), nor to build the fixture outside a pytest session (workers, the selftest). Both
are done here with what its `BenchmarkFixture` has kept since release 4: the constructor's keyword arguments, the
`_mode` attribute (what the fixture was used as; unset, pytest-benchmark warns the fixture was never used) and
`_make_stats(iterations)` (the statistics its table and JSON report). `private_api_problems` says what of it a
release no longer has; tests/quick/test_benchmark_fixture.py runs it, so a release that changes it fails loudly,
naming the attribute and the release.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

# What the fixture is said to have been used as, for rounds measured by perfsuite outside it.
FED_MODE = "perfsuite processes"
# The private attributes used here: the method that makes the fixture's statistics, and its mode.
PRIVATE_METHODS = ("_make_stats",)
PRIVATE_ATTRIBUTES = ("_mode",)
# The constructor's keyword arguments a standalone fixture needs (each release takes a subset of these).
CONSTRUCTOR_ARGUMENTS = ("node", "timer", "min_rounds", "min_time", "max_time", "add_stats", "logger", "disabled")


class _SilentLogger:
    """pytest-benchmark's fixture logs calibration details; outside pytest nobody reads them."""

    def debug(self, *args: Any, **kwargs: Any) -> None:
        pass

    info = warning = error = debug


def standalone_fixture(name: str, min_rounds: int, min_time_s: float, max_time_s: float) -> Any:
    """pytest-benchmark's `benchmark` fixture outside a pytest session, with its command-line defaults
    (perf_counter, no warm-up on CPython) and the given round settings."""
    from pytest_benchmark.fixture import BenchmarkFixture
    from pytest_benchmark.timers import default_timer
    from pytest_benchmark.utils import NameWrapper

    node = SimpleNamespace(name=name, nodeid=f"perfsuite::{name}", _nodeid=f"perfsuite::{name}")
    options = {
        # Releases before 5.2 read the node id from `_nodeid` (as pytest items have it), later ones from `nodeid`.
        "node": node, "disable_gc": False, "timer": NameWrapper(default_timer), "min_rounds": min_rounds,
        "min_time": min_time_s, "max_time": max_time_s, "precision": None, "confidence": 0.99,
        "warmup": False, "warmup_iterations": 100000, "calibration_precision": 10, "add_stats": lambda stats: None,
        "logger": _SilentLogger(), "warner": lambda *args, **kwargs: None, "disabled": False, "cprofile": False,
        "cprofile_loops": None, "cprofile_dump": None,
    }
    # The constructor's arguments differ between pytest-benchmark releases; pass the ones this one takes.
    accepted = inspect.signature(BenchmarkFixture).parameters
    return BenchmarkFixture(**{key: value for key, value in options.items() if key in accepted})


def feed_rounds(benchmark: Any, round_times_s: Sequence[float], extra_info: Mapping[str, object]) -> bool:
    """Give pytest-benchmark's fixture `benchmark` rounds timed elsewhere (seconds each, one step a round), so its
    table and JSON show them, and `extra_info`; False (nothing given) when the fixture is disabled
    (--benchmark-disable) or is not pytest-benchmark's."""
    if getattr(benchmark, "disabled", False) or not hasattr(benchmark, "_make_stats"):
        return False
    benchmark._mode = FED_MODE
    stats = benchmark._make_stats(1)
    for round_time_s in round_times_s:
        stats.update(round_time_s)
    benchmark.extra_info.update(extra_info)
    return True


def private_api_problems() -> list[str]:
    """What this module uses of pytest-benchmark's private API that the installed release does not have, one
    sentence each naming the attribute and the release (empty: everything is there)."""
    import pytest_benchmark
    from pytest_benchmark.fixture import BenchmarkFixture

    release = f"pytest-benchmark {pytest_benchmark.__version__}"
    accepted = inspect.signature(BenchmarkFixture).parameters
    problems = [f"{release}: BenchmarkFixture() takes no {name!r} argument (perfsuite.benchmark_fixture builds the "
                "fixture with it)" for name in CONSTRUCTOR_ARGUMENTS if name not in accepted]
    if problems:
        return problems
    fixture = standalone_fixture("private-api-check", 1, 1e-6, 1e-3)
    problems += [f"{release}: BenchmarkFixture has no method {name} (perfsuite.benchmark_fixture feeds rounds "
                 "through it)" for name in PRIVATE_METHODS if not callable(getattr(fixture, name, None))]
    problems += [f"{release}: BenchmarkFixture has no attribute {name} (perfsuite.benchmark_fixture sets it)"
                 for name in PRIVATE_ATTRIBUTES if not hasattr(fixture, name)]
    return problems
