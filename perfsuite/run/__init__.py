"""Timed runs: devices, the composed step, the runner around pytest-benchmark, DDP and the DataLoader benchmark."""
