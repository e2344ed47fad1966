"""Files: one JSON reader that explains a bad file, and the baseline store's codec."""
