"""perfsuite: PyTorch training and inference benchmarks with a regression gate, for MPS, CUDA and CPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = ["Workload", "register_workload", "__version__"]

if TYPE_CHECKING:
    from perfsuite.workloads import Workload, register_workload


def __getattr__(name: str) -> Any:
    # The workload API needs torch; importing the package (for `perfsuite --version`, compare, gains or
    # doctor) must not, so it loads on first use.
    if name in ("Workload", "register_workload"):
        from perfsuite import workloads

        return getattr(workloads, name)
    raise AttributeError(f"module 'perfsuite' has no attribute {name!r}")
