"""Helpers for tests that hand perfsuite files that are not what they seem: a FIFO that would block an open, a
device that never ends. Each guard turns a hang or a flood into a test failure instead of a stuck or killed run."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

MEMORY_CAP_BYTES = 1 << 30


class Blocked(BaseException):
    """Raised into a test whose code blocked too long; not an OSError, so no `except OSError` can swallow it."""


@contextmanager
def fails_after(seconds: float) -> Iterator[None]:
    """Raise Blocked in the test if the block blocks longer than `seconds` (a FIFO's open would hang)."""

    def give_up(signum: int, frame: object) -> None:
        raise Blocked(f"blocked for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def run_with_memory_cap(code: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """Run Python `code` in a child limited to 1 GiB of address space, so a reader that reads /dev/zero without
    bound dies of MemoryError there instead of taking the test machine's memory."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, preexec_fn=_cap_memory
    )
