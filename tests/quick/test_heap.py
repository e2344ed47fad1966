"""The steady heap of a worker holding both sides of an A/B job (`perfsuite.run.heap`): glibc's malloc thresholds
fixed at the values its own adjustment reaches at most, and nothing done (None) where the C library is another."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from perfsuite.run import heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_on_glibc_both_thresholds_are_fixed_and_said():
    script = ("from perfsuite.run.heap import steady_heap\nprint(steady_heap())\n"
              "import ctypes; libc = ctypes.CDLL(None)\n"
              # mallopt answers 1 for a value it accepts: the parameters named are the ones glibc knows
              "print(libc.mallopt(-3, 32 * 2**20), libc.mallopt(-1, 64 * 2**20))\n")
    lines = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert lines == ["glibc malloc thresholds fixed: mmap 32 MiB, trim 64 MiB", "1 1"]
    assert heap.STEADY_TRIM_THRESHOLD_BYTES == 2 * heap.STEADY_MMAP_THRESHOLD_BYTES == 64 * 2**20


def test_another_c_library_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("", ""))
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda *args: pytest.fail("no C library call off glibc"))
    assert heap.steady_heap() is None


def test_a_refused_setting_is_not_claimed(monkeypatch):
    class RefusingLibc:
        @staticmethod
        def mallopt(parameter: int, value: int) -> int:
            return 0

    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda *args: RefusingLibc())
    assert heap.steady_heap() is None
