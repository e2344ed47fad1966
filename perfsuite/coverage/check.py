"""The coverage check of one model, shared by `perfsuite coverage` and the tests in tests/coverage."""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfsuite.coverage.allowlist import Allowlist, runtime_unexpected, unexpected_fallbacks
from perfsuite.coverage.assess import ModelCoverage, OpUsage, assess_trace
from perfsuite.coverage.runtime import UNNAMED_KERNEL, RuntimeCoverage, RuntimeFinding
from perfsuite.workloads import Workload


@dataclass(frozen=True)
class ModelReport:
    """What the check found for one model: the static verdicts, the fallbacks the allowlist does not
    allow, and the runtime check's result where it ran."""

    coverage: ModelCoverage
    unexpected: tuple[OpUsage, ...] = ()
    runtime: RuntimeCoverage | None = None
    runtime_unexpected: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Whether some op outside the allowlist would fall back (static) or fell back (runtime)."""
        return bool(self.unexpected or self.runtime_unexpected)


def static_check(
    workload: Workload, allowlist: Allowlist, profile: str = "smoke", modes: tuple[str, ...] | None = None
) -> ModelReport:
    """Trace `workload` on the CPU with MPS's choices and judge every op with the installed torch's table."""
    from perfsuite.coverage.support import installed_mps_support_table
    from perfsuite.coverage.trace import trace_workload

    table = installed_mps_support_table()
    trace = trace_workload(workload, profile, modes, descend_key=table.descend_key)
    coverage = assess_trace(trace, table.lookup, table.torch_version, table.note)
    return ModelReport(coverage, unexpected_fallbacks(coverage, allowlist))


def runtime_check(
    report: ModelReport, workload: Workload, allowlist: Allowlist, profile: str, modes: tuple[str, ...]
) -> ModelReport:
    """`report` with the result of running `workload` on MPS in a probe subprocess (skipped without MPS)."""
    import sys

    from perfsuite.coverage.runtime import run_runtime_check, workload_import

    module = sys.modules.get(workload.build_module.__module__)
    user_module = workload_import(workload.build_module.__module__, getattr(module, "__file__", None))
    runtime = run_runtime_check(workload.name, profile, modes, user_module)
    seen = [finding.op for finding in runtime.findings if finding.op != UNNAMED_KERNEL]
    return replace(report, runtime=runtime, runtime_unexpected=runtime_unexpected(workload.name, seen, allowlist))


def describe_runtime_finding(model: str, finding: RuntimeFinding) -> str:
    """One line naming the op, the model, the phase and the calls of a fallback seen on MPS."""
    detail = f": {finding.message}" if finding.message else ""
    return (f"{finding.op} fell back to the CPU on MPS in model {model}: {finding.phase} {finding.calls} "
            f"call{'s' if finding.calls != 1 else ''} ({finding.evidence}){detail}")
