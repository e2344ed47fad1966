"""The regression decision: pure functions on records, no files, no torch."""
