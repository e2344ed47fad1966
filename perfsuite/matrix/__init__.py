"""The matrix of cases: which device x dtype x model x batch size x mode to run, and why one is skipped."""
