"""Worker processes end with the process that started them.

A worker whose parent was killed (Ctrl-C twice, a CI timeout, kill -9) would otherwise go on measuring, holding
a CPU core or GPU memory that the next session then measures beside. Each worker watches its parent and exits
when it has gone: its parent process id then changes (to init or a subreaper).
"""

from __future__ import annotations

import os
import threading
import time

POLL_S = 1.0


def exit_when_orphaned(parent_pid: int, poll_s: float = POLL_S) -> None:
    """Loop until the parent is no longer `parent_pid`, then end this process at once."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)
        time.sleep(poll_s)


def watch_parent(parent_pid: int | None = None) -> None:
    """Start a daemon thread that ends this process when its parent (`parent_pid`, default: the current one) ends."""
    pid = os.getppid() if parent_pid is None else parent_pid
    threading.Thread(target=exit_when_orphaned, args=(pid,), daemon=True, name="perfsuite-orphan-watch").start()
