"""perfsuite.benchmark_fixture holds every use of pytest-benchmark's private API; a release that changes what it uses
fails here, naming the attribute and the release, before a session shows wrong tables."""

from __future__ import annotations

import pytest_benchmark

from perfsuite import benchmark_fixture
from perfsuite.benchmark_fixture import feed_rounds, private_api_problems, standalone_fixture


def test_the_installed_pytest_benchmark_has_every_private_attribute_perfsuite_uses():
    problems = private_api_problems()
    assert not problems, (
        f"pytest-benchmark {pytest_benchmark.__version__} changed the private API perfsuite uses; adapt "
        "perfsuite/benchmark_fixture.py:\n" + "\n".join(problems)
    )


def test_a_missing_private_method_is_named_with_the_release(monkeypatch):
    monkeypatch.setattr(benchmark_fixture, "PRIVATE_METHODS", ("_make_stats", "_gone_in_the_next_release"))
    assert private_api_problems() == [
        f"pytest-benchmark {pytest_benchmark.__version__}: BenchmarkFixture has no method _gone_in_the_next_release "
        "(perfsuite.benchmark_fixture feeds rounds through it)"
    ]


def test_a_missing_constructor_argument_is_named_with_the_release(monkeypatch):
    monkeypatch.setattr(benchmark_fixture, "CONSTRUCTOR_ARGUMENTS", ("node", "renamed_timer"))
    assert private_api_problems() == [
        f"pytest-benchmark {pytest_benchmark.__version__}: BenchmarkFixture() takes no 'renamed_timer' argument "
        "(perfsuite.benchmark_fixture builds the fixture with it)"
    ]


def test_fed_rounds_are_the_fixtures_statistics_and_its_extra_info():
    fixture = standalone_fixture("fed", min_rounds=1, min_time_s=1e-6, max_time_s=1e-3)
    assert feed_rounds(fixture, [0.003, 0.001, 0.002], {"samples_per_s": 12.5})
    stats = fixture.stats.stats
    assert (stats.rounds, stats.min, stats.max, stats.median) == (3, 0.001, 0.003, 0.002)
    assert fixture.extra_info == {"samples_per_s": 12.5}


def test_a_disabled_fixture_is_given_nothing():
    fixture = standalone_fixture("disabled", min_rounds=1, min_time_s=1e-6, max_time_s=1e-3)
    fixture.disabled = True
    assert not feed_rounds(fixture, [0.001], {"samples_per_s": 1.0})
    assert fixture.stats is None and fixture.extra_info == {}


def test_a_standalone_fixture_times_rounds_as_its_settings_say():
    fixture = standalone_fixture("timed", min_rounds=4, min_time_s=1e-6, max_time_s=1e-3)
    fixture.pedantic(lambda: None, rounds=4, iterations=1)
    assert fixture.stats.stats.rounds == 4
