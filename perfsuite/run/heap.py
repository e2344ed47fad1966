"""A steady heap for a process that alternates two sides of an A/B job.

glibc's malloc serves a block above its mmap threshold with mmap and returns the top of its heap to the kernel once
more than its trim threshold lies free there; it raises both as a program frees large blocks (the mmap threshold to
the largest block freed, at most 32 MiB on a 64-bit system, the trim threshold to twice that). A loop that runs one
model settles; two models taking turns in one process do not: the heap is handed back to the kernel and faulted in
again between the sides' windows, and whole windows of one side run slower. On this VM (2 shared cores, load about
1), two copies of a small training step (tools/ab/decides' tiny conv net, bs8, one thread) alternating 0.125 s
windows in one process: the spread of a window pair's log ratio was 1.9-2.8% with glibc's defaults and 1.3-2.0% with
the thresholds fixed (one copy alternating with itself: 1.3-1.5%); windows off by more than 10% fell from 12-15 to
6-9 of 119 pairs. Fixing both thresholds at the values glibc's own adjustment reaches at most leaves the heap as a
long loop's is at its steadiest, the same for both sides.
"""

from __future__ import annotations

import ctypes
import platform

# From glibc's malloc.h: mallopt's parameters.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# What glibc's dynamic adjustment raises the mmap threshold to at most on a 64-bit system (DEFAULT_MMAP_THRESHOLD_MAX,
# 4 * 1024 * 1024 * sizeof(long)), and the trim threshold it keeps beside it (twice the mmap threshold).
STEADY_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
STEADY_TRIM_THRESHOLD_BYTES = 2 * STEADY_MMAP_THRESHOLD_BYTES


def steady_heap() -> str | None:
    """Fix this process's malloc thresholds at STEADY_MMAP_THRESHOLD_BYTES and STEADY_TRIM_THRESHOLD_BYTES where the
    C library is glibc; returns what was set, or None where nothing was (another C library: macOS's, musl)."""
    if platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)  # the process's own C library
    if libc.mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD_BYTES) != 1:
        return None
    if libc.mallopt(M_TRIM_THRESHOLD, STEADY_TRIM_THRESHOLD_BYTES) != 1:
        return None
    return (f"glibc malloc thresholds fixed: mmap {STEADY_MMAP_THRESHOLD_BYTES // 2**20} MiB, trim "
            f"{STEADY_TRIM_THRESHOLD_BYTES // 2**20} MiB")
