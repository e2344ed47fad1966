"""The two kinds of error a user can hit, a bad option value and a file that cannot be used, the commands their
messages point to, and what a case's test is told when its case fails or is skipped.

Both carry a message that says what was wrong, where, and what to do next; commands print it and exit 2,
the pytest plugin turns it into a usage error or a failed case. Nothing here imports torch.
"""

from __future__ import annotations

from pathlib import Path

# The command a message tells the user to run next to start a baseline history over.
REBASELINE_COMMAND = "pytest --benchmark-only --perf-rebaseline"


class UsageError(ValueError):
    """A bad option value: the message names the option (or the pyproject.toml key), the value and the valid ones."""


class CaseFailed(Exception):
    """A case's test must fail with this message (a failure to measure, a regression, an unreadable baseline)."""


class CaseSkipped(Exception):
    """A case's test must be skipped with this message (out of memory, impossible here, a model the base lacks)."""


class BadFileError(Exception):
    """A file exists but cannot be used: the message names the file, the problem and the way forward.

    `path` is the file, `problem` what is wrong with it (one clause), `remedy` what to do next.
    """

    def __init__(self, path: Path | str, problem: str, remedy: str) -> None:
        self.path = Path(path)
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{self.path}: {problem}. {remedy}")
