"""Measuring the measurer: plan, measurement in subprocesses, analysis through the real decision code, report."""
