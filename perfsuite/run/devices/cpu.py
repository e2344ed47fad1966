"""The CPU: always available, runs eagerly (nothing to wait for), the process's peak resident set as its memory."""

from __future__ import annotations

import os
import re
import resource
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.matrix.axes import EAGER
from perfsuite.matrix.cases import DeviceFacts, ModelFacts
from perfsuite.records import Case
from perfsuite.run.devices import Availability, gib
from perfsuite.run.devices.base import TorchDevice

PEAK_FIGURE = "cpu_peak_rss_bytes"


class Backend(TorchDevice):
    name = "cpu"
    is_accelerator = False
    ddp_backend = "gloo"

    def availability(self) -> Availability:
        return Availability(True)

    def synchronize(self) -> None:
        return None  # the CPU runs eagerly: a step has finished when it returns

    def memory_figure_name(self) -> str:
        return PEAK_FIGURE

    def reset_memory_peak(self) -> None:
        # Writing 5 to clear_refs resets VmHWM (Linux >= 4.0); elsewhere the peak covers the process's life.
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass

    def memory_figures_bytes(self) -> dict[str, int]:
        return {PEAK_FIGURE: _peak_rss_bytes()}

    def memory_in_use_bytes(self) -> int | None:
        try:
            resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            return None
        return resident_pages * os.sysconf("SC_PAGE_SIZE")

    def machine_identity(self, fingerprint: Mapping[str, Any]) -> dict[str, str]:
        facts = {
            "cpu_model": fingerprint.get("cpu_model"), "cpu_count": fingerprint.get("cpu_count"),
            "memory_gib": gib(fingerprint.get("memory_bytes")), "os": fingerprint.get("os"),
            "machine_arch": fingerprint.get("machine_arch"),
        }
        return {key: str(value) for key, value in facts.items() if value is not None}

    def machine_name(self, fingerprint: Mapping[str, Any]) -> str:
        return str(fingerprint.get("cpu_model") or "")

    def skip_reason(self, case: Case, model: ModelFacts, facts: DeviceFacts) -> str | None:
        if case.mode == "train-ddp":
            return super().skip_reason(case, model, facts)
        if case.compile != EAGER and facts.cpp_compiler is None:
            return (
                "torch.compile's inductor backend needs a C++ compiler on the CPU: none found (install g++ or clang, "
                "or set CXX)"
            )
        return None


def _peak_rss_bytes() -> int:
    status = Path("/proc/self/status")
    if status.exists():
        match = re.search(r"^VmHWM:\s+(\d+) kB", status.read_text(), re.MULTILINE)
        if match:
            return int(match.group(1)) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux
