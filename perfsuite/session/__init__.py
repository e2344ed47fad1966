"""The jobs a user runs over a project's benchmarks: a pytest session (`pytest_session`) of one of two kinds, the
history gate (`gate`) or the A/B job (`ab`), and the bisect (`bisect`) that runs A/B jobs commit by commit."""
