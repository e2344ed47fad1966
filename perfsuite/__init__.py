"""perfsuite: PyTorch training and inference benchmarks with a regression gate, for MPS, CUDA and CPU."""

from perfsuite.workloads import Workload, register_workload

__version__ = "0.1.0"

__all__ = ["Workload", "register_workload", "__version__"]
