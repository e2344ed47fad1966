"""Project-wide pytest configuration; perfsuite's plugin itself loads through its pytest11 entry point."""
