"""`perfsuite doctor`: gather this machine's facts (or read recorded ones) and report what keeps a device from
running benchmarks, each problem with its fix.

Gathering is the only impure part and stays thin; the decisions live in `perfsuite.doctor.diagnosis`, which works on
the plain JSON-able facts, so `--facts FILE.json` diagnoses a machine recorded elsewhere with `--save-facts`; the
machine's conditions (power, energy mode, heat, clocks: `perfsuite.judge.conditions`) are said beside them, with what
to change before measuring (degraded states are warnings: the devices still run).
Exit status: 0 when the device asked for is usable, 1 when it is not, 2 when the facts file cannot be read or written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfsuite.doctor.diagnosis import (
    DEVICES,
    FACTS_VERSION,
    Finding,
    device_is_usable,
    diagnose,
    facts_shape_errors,
    render_text,
    report_data,
)
from perfsuite.errors import BadFileError
from perfsuite.judge.conditions import degradations, suggestions
from perfsuite.records import conditions_from_json, conditions_to_json
from perfsuite.render.conditions import conditions_text, degraded_text
from perfsuite.store.files import write_text_atomically
from perfsuite.store.jsonfile import read_json_file

ENVIRONMENT_VARIABLES = ("PYTORCH_ENABLE_MPS_FALLBACK", "PYTORCH_MPS_METAL_VERSION", "CUDA_VISIBLE_DEVICES")
COMMAND_TIMEOUT_S = 10.0


class FactsFileError(Exception):
    """A facts file that cannot be diagnosed; the message names the file and what to do."""


def gather_facts() -> dict[str, Any]:
    """This machine's facts as plain JSON-able data (see `tests/fixtures/doctor/*.json` for the shape)."""
    return {
        "facts_version": FACTS_VERSION,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "platform": _platform_facts(),
        "torch": _torch_facts(),
        "environment": {name: os.environ.get(name) for name in ENVIRONMENT_VARIABLES},
        "conditions": _conditions_facts(),
    }


def _conditions_facts() -> dict[str, Any]:
    """The machine's conditions now, by device: the host's (every device's), and each usable GPU's besides."""
    from perfsuite.run.devices import available_accelerators, backend

    try:
        devices = ["cpu", *available_accelerators()]
    except Exception:  # torch does not import: the host's conditions are still worth saying
        devices = ["cpu"]
    return {device: conditions_to_json(backend(device).conditions()) for device in devices}


def conditions_findings(facts: Mapping[str, Any]) -> list[Finding]:
    """What the machine's conditions mean for measuring, as `perfsuite doctor` says it (pyperf's `system show`):
    each device's conditions, a warning with its fix per degraded state (on battery, Low Power, thermal pressure,
    a GPU slowdown), and what would help besides (High Power where offered). Facts recorded without conditions say
    so."""
    recorded = facts.get("conditions")
    if not isinstance(recorded, dict):
        return [Finding("conditions", "warning", "these facts hold no conditions (power, energy mode, heat, clocks): "
                        "recorded by an older perfsuite doctor", "record them again: perfsuite doctor --save-facts "
                        "FILE.json", DEVICES)]
    try:
        readings = {device: conditions_from_json(reading, f"conditions {device}") for device, reading in
                    recorded.items()}
    except ValueError as error:
        return [Finding("conditions", "warning", f"unreadable conditions in these facts: {error}",
                        "record them again: perfsuite doctor --save-facts FILE.json", DEVICES)]
    findings = [Finding("conditions", "ok", f"{device}: {conditions_text(reading)}")
                for device, reading in readings.items()]
    for found in degradations(readings.values()):
        findings.append(Finding("conditions", "warning", f"the machine runs degraded: {degraded_text([found])}; "
                                "timings taken now are slower than the machine's own and a history recorded now "
                                "would hide a slowdown", found.remedy, DEVICES))
    for hint in dict.fromkeys(h for reading in readings.values() for h in suggestions(reading)):
        findings.append(Finding("conditions", "warning", "sustained work runs slower in Automatic than in High Power "
                                "Mode on this Mac", hint, ("mps", "cpu")))
    return findings


def _platform_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {"system": platform.system(), "machine": platform.machine(), "release": platform.release()}
    if facts["system"] != "Darwin":
        return facts
    translated = _command_output(["sysctl", "-n", "sysctl.proc_translated"])
    # hw.optional.arm64 is 1 on Apple silicon even inside a Rosetta process; Intel Macs lack the key.
    arm64_hardware = _command_output(["sysctl", "-n", "hw.optional.arm64"])
    facts.update(
        macos_version=_macos_version(),
        apple_silicon=arm64_hardware == "1",
        rosetta_translated=translated == "1" if translated is not None else False,
        chip=_command_output(["sysctl", "-n", "machdep.cpu.brand_string"]),
        xcode_command_line_tools=_command_output(["xcode-select", "-p"]),
    )
    return facts


def _macos_version() -> str | None:
    version = platform.mac_ver()[0]
    if version == "10.16":
        # A Python built against an old SDK is told 10.16 on macOS 11 and later; ask without the compat shim.
        version = _command_output(["sw_vers", "-productVersion"], {"SYSTEM_VERSION_COMPAT": "0"}) or version
    return version or None


def _command_output(command: list[str], extra_env: dict[str, str] | None = None) -> str | None:
    """The stripped stdout of `command`, or None when it is missing, fails or hangs."""
    env = {**os.environ, **extra_env} if extra_env else None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _torch_facts() -> dict[str, Any]:
    try:
        import torch
    except Exception as error:  # a broken install raises OSError or others, not only ImportError
        return {"version": None, "import_error": f"{type(error).__name__}: {error}"}
    mps_available = torch.backends.mps.is_available()
    cuda_available = torch.cuda.is_available()
    return {
        "version": torch.__version__,
        "import_error": None,
        "mps_built": torch.backends.mps.is_built(),
        "mps_available": mps_available,
        "mps_device_count": torch.mps.device_count() if hasattr(torch.mps, "device_count") else None,
        "mps_recommended_max_memory_bytes": (
            torch.mps.recommended_max_memory()
            if mps_available and hasattr(torch.mps, "recommended_max_memory")
            else None
        ),
        "cuda_version": torch.version.cuda,
        "hip_version": getattr(torch.version, "hip", None),
        "cuda_available": cuda_available,
        "cudnn_version": torch.backends.cudnn.version() if cuda_available else None,
        "cuda_devices": [_cuda_device_facts(torch, index) for index in range(torch.cuda.device_count())]
        if cuda_available
        else [],
        "cpu_fp16_autocast": _cpu_fp16_autocast_casts(torch),
    }


def _cuda_device_facts(torch: Any, index: int) -> dict[str, Any]:
    properties = torch.cuda.get_device_properties(index)
    return {
        "name": properties.name,
        "capability": f"{properties.major}.{properties.minor}",
        "total_memory_bytes": properties.total_memory,
    }


def _cpu_fp16_autocast_casts(torch: Any) -> bool | None:
    # A probe, not a version rule: where fp16 is unsupported, autocast only warns and the matmul stays fp32.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast("cpu", dtype=torch.float16):
                return torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.float16
    except Exception:
        return None


def load_facts(path: Path) -> dict[str, Any]:
    """Recorded facts from `path`, checked to be diagnosable; raises FactsFileError saying what is wrong."""
    try:
        facts = read_json_file(path, "Record facts with `perfsuite doctor --save-facts`.")
    except BadFileError as error:
        raise FactsFileError(str(error)) from None
    errors = facts_shape_errors(facts)
    if errors:
        raise FactsFileError(
            f"{path}: not doctor facts: {'; '.join(errors)}; record them again with `perfsuite doctor --save-facts`"
        )
    return facts


def save_facts(facts: dict[str, Any], path: Path) -> None:
    """Write `facts` to `path` as indented JSON in one step (a new file, or a regular file replaced). Raises
    BadFileError for a folder, device, FIFO or other special file there, OSError when it cannot be written."""
    write_text_atomically(path, json.dumps(facts, indent=2, sort_keys=True) + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the doctor's options to `parser` (used by `perfsuite doctor` and `python -m perfsuite.commands.doctor`)."""
    parser.add_argument(
        "--device", choices=DEVICES, default="cpu", help="exit non-zero when this device is unusable (default: cpu)"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--facts", type=Path, metavar="FILE.json", help="diagnose facts recorded on another machine")
    source.add_argument("--save-facts", type=Path, metavar="FILE.json", help="also record this machine's facts")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")


def run(args: argparse.Namespace) -> int:
    """Diagnose, print the report to stdout, and return the exit status (0 usable, 1 unusable, 2 facts that cannot
    be read or saved)."""
    if args.facts is not None:
        try:
            facts = load_facts(args.facts)
        except FactsFileError as error:
            print(f"perfsuite doctor: {error}", file=sys.stderr)
            return 2
    else:
        facts = gather_facts()
        if args.save_facts is not None:
            try:
                save_facts(facts, args.save_facts)
            except BadFileError as error:
                print(f"perfsuite doctor: {error}", file=sys.stderr)
                return 2
            except OSError as error:
                print(
                    f"perfsuite doctor: cannot write {args.save_facts} ({error.strerror}); name another file with "
                    "--save-facts", file=sys.stderr,
                )
                return 2
            print(f"perfsuite doctor: facts recorded in {args.save_facts}", file=sys.stderr)
    findings = diagnose(facts) + conditions_findings(facts)
    if args.format == "json":
        print(json.dumps(report_data(facts, findings, args.device), indent=2))
    else:
        print(render_text(facts, findings, args.device), end="")
    return 0 if device_is_usable(findings, args.device) else 1
