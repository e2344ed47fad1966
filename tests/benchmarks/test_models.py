"""The benchmark matrix: every registered workload, parametrized by perfsuite's plugin."""


def test_model(perf_run, perf_case):
    perf_run(perf_case)
