"""Runtime detection on a Mac: run a workload on MPS in a subprocess and report every op that fell back.

The subprocess (`perfsuite.coverage.probe`) starts with PYTORCH_ENABLE_MPS_FALLBACK=1 in its environment,
so the variable is set before torch is imported (MPSFallback.mm reads it when torch registers its MPS
fallback). Two witnesses report each fallback call, not only the first of the process:
- PYTORCH_MPS_LOG_PROFILE_INFO with the CPU_FALLBACK_INFO bit (1 << 2) makes MPSProfiler print one
  "CPU Fallback::<op>:<tensors> (id=.., run=.., CopyOverhead=..)" line per call to stderr;
- torch.set_warn_always(True) turns the fallback's TORCH_WARN_ONCE (one call site for every op, so only
  the first fallback op of a process would warn) into a warning per call.
Warnings of MPS kernels that copy to the CPU themselves ("... is supported natively starting from macOS
13.0. Falling back on CPU ...") and the NotImplementedError raised where fallback is off are recognised
too. The parsers are pure functions, tested on recorded messages.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from perfsuite.coverage.facts import release_of
from perfsuite.matrix.mps_support import mps_unusable_hint

# MPSProfiler LogOptions (aten/src/ATen/mps/MPSProfiler.h): CPU_FALLBACK_INFO = 1 << 2.
CPU_FALLBACK_INFO = 1 << 2
PHASE_MARKER = "[perfsuite-coverage] phase="
# A kernel's CPU copy whose message does not name the kernel: reported, but it cannot be allowlisted.
UNNAMED_KERNEL = "(unnamed MPS kernel)"
PROBE_TIMEOUT_S = 600.0

# MPSFallback.mm, mps_fallback(): TORCH_WARN_ONCE("The operator '", op.schema().operator_name(), ...).
_FALLBACK_WARNING = re.compile(
    r"The operator '(?P<op>[^']+)' is not currently supported on the MPS backend and will fall back to run on the CPU"
)
# MPSFallback.mm, mps_error_fallback(): the text up to "for the MPS device" is the same before and after 2.6,
# which changed the issue it points to from #77764 to #141287.
_NOT_IMPLEMENTED = re.compile(r"The operator '(?P<op>[^']+)' is not currently implemented for the MPS device")
# MPS kernels that copy their inputs to the CPU on older macOS (e.g. median_mps in ReduceOps.mm).
_NATIVE_FROM_MACOS = re.compile(
    r"MPS: (?P<op>\w+) op is supported natively starting from macOS (?P<macos>[\d.]+)\.\s*Falling back on CPU"
)
# Other MPS kernels that copy to the CPU for some inputs (e.g. avg_pool2d with int64 input and a divisor).
_KERNEL_FALLS_BACK = re.compile(r"MPS: (?P<detail>.+?)\s*Falling back on CPU")
# MPSProfiler.mm, CpuFbInfo::toString(): "CPU Fallback::{} (id={}, run={}, CopyOverhead={}{})", where {}
# is the op's schema name followed by ":<device>:<dtype>[<sizes>]" for each tensor.
_PROFILER_LINE = re.compile(r"CPU Fallback::(?P<op>[A-Za-z_]\w*::[A-Za-z_]\w*)")


@dataclass(frozen=True)
class RuntimeFinding:
    """Evidence that `op` ran on the CPU during `phase`, `calls` times.

    `evidence` is one of: 'profiler log', 'fallback warning', 'not implemented' (fallback off),
    'kernel copies to CPU' (an MPS kernel's own CPU path; `op` is 'aten::<kernel>', or UNNAMED_KERNEL when
    the message does not name it).
    """

    op: str
    phase: str
    calls: int
    evidence: str
    message: str = ""


@dataclass(frozen=True)
class RuntimeCoverage:
    """What one workload's run on MPS showed; `skipped` says why it did not run."""

    model: str
    findings: tuple[RuntimeFinding, ...] = ()
    skipped: str | None = None
    torch_version: str = ""
    error: str | None = None


def fallback_op_of_warning(message: str) -> str | None:
    """The op named by MPSFallback.mm's fallback warning ('aten::linalg_svd.U'), or None."""
    match = _FALLBACK_WARNING.search(message)
    return match["op"] if match else None


def fallback_op_of_error(message: str) -> str | None:
    """The op named by the NotImplementedError raised when fallback is off (both the text before 2.6,
    pointing to issue 77764, and the one after, pointing to 141287), or None."""
    match = _NOT_IMPLEMENTED.search(message)
    return match["op"] if match else None


def kernel_cpu_copy(message: str) -> tuple[str, str] | None:
    """('aten::<kernel>' or UNNAMED_KERNEL, what the message says) for an MPS kernel that runs its work on
    the CPU, or None for any other message."""
    match = _NATIVE_FROM_MACOS.search(message)
    if match:
        return f"aten::{match['op']}", f"supported natively from macOS {match['macos']}"
    match = _KERNEL_FALLS_BACK.search(message)
    if match:
        return UNNAMED_KERNEL, match["detail"].strip()
    return None


def profiler_fallback_calls(stderr_text: str) -> Counter[tuple[str, str]]:
    """Calls per (op, phase) from MPSProfiler's CPU-fallback log lines; the phase is the last
    `PHASE_MARKER` line before each log line ('' before any marker)."""
    calls: Counter[tuple[str, str]] = Counter()
    phase = ""
    for line in stderr_text.splitlines():
        if line.startswith(PHASE_MARKER):
            phase = line[len(PHASE_MARKER):].strip()
            continue
        match = _PROFILER_LINE.search(line)
        if match:
            calls[(match["op"], phase)] += 1
    return calls


def findings_from_probe(stderr_text: str, report: dict) -> tuple[RuntimeFinding, ...]:
    """Every CPU fallback the probe saw, from its stderr (profiler lines) and its JSON report
    (warnings per phase, and the error that stopped it, if any).

    The profiler counts every call; a fallback warning counts only where the profiler line is missing
    (a build or environment where the profiler log is off).
    """
    findings = [
        RuntimeFinding(op, phase, calls, "profiler log")
        for (op, phase), calls in profiler_fallback_calls(stderr_text).items()
    ]
    logged = {(finding.op, finding.phase) for finding in findings}
    warned: Counter[tuple[str, str, str]] = Counter()
    copies: Counter[tuple[str, str, str]] = Counter()
    for warning in report.get("warnings", []):
        message, phase = warning.get("message", ""), warning.get("phase", "")
        op = fallback_op_of_warning(message)
        if op is not None:
            if (op.split(".")[0], phase) not in logged:
                warned[(op, phase, message)] += 1
            continue
        copy = kernel_cpu_copy(message)
        if copy is not None:
            copies[(copy[0], phase, copy[1])] += 1
    findings += [RuntimeFinding(op, phase, n, "fallback warning", text) for (op, phase, text), n in warned.items()]
    findings += [RuntimeFinding(op, phase, n, "kernel copies to CPU", text) for (op, phase, text), n in copies.items()]
    error = report.get("error")
    if error:
        op = fallback_op_of_error(error.get("message", ""))
        if op is not None:
            findings.append(RuntimeFinding(op, error.get("phase", ""), 1, "not implemented", error["message"]))
    return tuple(findings)


def probe_command(
    model: str, profile: str, modes: tuple[str, ...], user_module: tuple[str, str] | None = None
) -> list[str]:
    """The command line of the probe subprocess; `user_module` is (module, directory) to import first."""
    command = [sys.executable, "-m", "perfsuite.coverage.probe", "--model", model, "--profile", profile,
               "--modes", ",".join(modes)]
    if user_module is not None:
        command += ["--import", user_module[0], "--import-from", user_module[1]]
    return command


def probe_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The probe's environment: fallback on and the profiler's CPU-fallback log on, from before torch's import."""
    env = dict(os.environ if base is None else base)
    env["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"
    env["PYTORCH_MPS_LOG_PROFILE_INFO"] = str(CPU_FALLBACK_INFO)
    # perfsuite must be importable in the child when it runs from a checkout rather than an install.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    return env


def mps_unavailable_reason() -> str | None:
    """Why MPS cannot run here, or None where it can; the macOS it names is the installed torch release's."""
    import torch

    if not torch.backends.mps.is_built():
        return f"this torch ({torch.__version__}) is built without MPS"
    if not torch.backends.mps.is_available():
        needs = mps_unusable_hint(release_of(torch.__version__).release)
        return f"MPS is built into torch {torch.__version__} but not available: it needs {needs}"
    return None


def run_runtime_check(
    model: str,
    profile: str,
    modes: tuple[str, ...],
    user_module: tuple[str, str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> RuntimeCoverage:
    """Run `model` on MPS in a probe subprocess and collect its CPU fallbacks; skipped where MPS is absent."""
    reason = mps_unavailable_reason()
    if reason is not None:
        return RuntimeCoverage(model, skipped=reason)
    try:
        done = subprocess.run(
            probe_command(model, profile, modes, user_module), env=probe_environment(), capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired:
        return RuntimeCoverage(model, error=f"the MPS probe of {model} ran past {timeout_s:.0f} s and was stopped")
    report = _last_json_line(done.stdout)
    if report is None:
        tail = "\n".join(done.stderr.splitlines()[-20:])
        message = f"the MPS probe of {model} exited {done.returncode} with no report:\n{tail}"
        return RuntimeCoverage(model, error=message)
    error = report.get("error")
    return RuntimeCoverage(
        model, findings_from_probe(done.stderr, report), torch_version=report.get("torch_version", ""),
        error=None if not error or fallback_op_of_error(error.get("message", "")) else error.get("message"),
    )


def _last_json_line(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def workload_import(build_function_module: str, module_file: str | None) -> tuple[str, str] | None:
    """(module, its directory) that the probe must import to find a workload registered outside perfsuite,
    i.e. the module defining the workload's build function; None for perfsuite's own workloads."""
    if build_function_module.startswith("perfsuite.") or module_file is None:
        return None
    return build_function_module, str(Path(module_file).resolve().parent)
