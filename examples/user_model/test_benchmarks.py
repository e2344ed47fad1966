def test_model(perf_run, perf_case):
    perf_run(perf_case)
