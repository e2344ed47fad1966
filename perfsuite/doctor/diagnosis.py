"""What is wrong with a machine for perfsuite, decided from its facts alone.

`perfsuite.commands.doctor` gathers the facts (Python, OS, torch, MPS, CUDA) into plain JSON-able data; everything
here is a pure function of that data, so the facts of a Mac can be diagnosed on a Linux box. Each check
returns findings: `ok`, a `warning` (a feature is limited, the device still runs) or a `problem` (the
devices it names cannot run). Every finding that is not ok carries its fix.

Version thresholds, and where they come from:
- The macOS MPS needs, which depends on the torch release (`MIN_MACOS_FOR_MPS_BY_TORCH`), the fp16/bf16
  autocast, bf16 and GradScaler thresholds, how each release reads PYTORCH_ENABLE_MPS_FALLBACK and
  PYTORCH_MPS_METAL_VERSION, and which facts are only assumed for a torch newer than the newest release read:
  `perfsuite.matrix.mps_support`, which cites its sources and is shared with the case matrix, the device layer
  and the coverage runtime check.
- torch >= 2.0 is the source article's minimum; 2.2.2 is the last torch wheel for x86_64 macOS
  (pytorch/pytorch#141864), which is what a Rosetta Python gets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from perfsuite.matrix.mps_support import (
    CHECKED_TORCH_RELEASES,
    METAL_VERSIONS,
    MIN_MACOS_FOR_MPS_BF16,
    MIN_TORCH_FOR_GET_ENV_FALLBACK_SWITCH,
    MIN_TORCH_FOR_MPS_BF16_AUTOCAST,
    MIN_TORCH_FOR_MPS_FP16_AUTOCAST,
    MIN_TORCH_FOR_MPS_GRAD_SCALER,
    MIN_TORCH_FOR_MPS_METAL_VERSION_VARIABLE,
    NEWEST_TORCH_CHECKED,
    Release,
    assumed_facts_note,
    default_metal_version,
    is_at_least,
    min_macos_for_mps,
    newest_torch_for_macos,
    unchecked_note,
)

FACTS_VERSION = 1
DEVICES = ("cpu", "mps", "cuda")

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 0)

Facts = Mapping[str, Any]
# Versions are compared part by part, so they stay strings: 14.10 as a JSON number would read as 14.1.
VERSION_FIELDS = (("python", "version"), ("platform", "macos_version"), ("torch", "version"))


@dataclass(frozen=True)
class Finding:
    """The outcome of one check.

    `devices` are the devices a `problem` makes unusable, or a `warning` limits; empty for a plain `ok`.
    """

    check: str
    status: str
    summary: str
    fix: str = ""
    devices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain JSON-able data."""
        data = asdict(self)
        data["devices"] = list(self.devices)
        return data


def facts_shape_errors(facts: Any) -> list[str]:
    """What makes `facts` unreadable as doctor facts; empty when they can be diagnosed."""
    if not isinstance(facts, dict):
        return [f"expected a JSON object, found {type(facts).__name__}"]
    errors = []
    if facts.get("facts_version") != FACTS_VERSION:
        errors.append(f"facts_version is {facts.get('facts_version')!r}, this perfsuite reads {FACTS_VERSION}")
    for section in ("python", "platform", "torch", "environment"):
        if not isinstance(facts.get(section), dict):
            errors.append(f"section {section!r} is missing or not an object")
    for section, key in VERSION_FIELDS:
        section_facts = facts.get(section)
        value = section_facts.get(key) if isinstance(section_facts, dict) else None
        if value is not None and not isinstance(value, str):
            errors.append(f'{section}.{key} is {value!r}, expected a version string such as "2.5.1" or null')
    return errors


def diagnose(facts: Facts) -> list[Finding]:
    """Every finding about the machine described by `facts`, in report order."""
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(facts))
    return findings


def device_is_usable(findings: list[Finding], device: str) -> bool:
    """Whether no problem among `findings` makes `device` unusable."""
    return not blocking_problems(findings, device)


def blocking_problems(findings: list[Finding], device: str) -> list[Finding]:
    """The problems among `findings` that make `device` unusable."""
    return [f for f in findings if f.status == "problem" and device in f.devices]


def release(version: str | None) -> tuple[int, ...] | None:
    """The numeric release of a version string: '2.13.0+cpu' -> (2, 13, 0), '14.5' -> (14, 5); None if unreadable."""
    if not version:
        return None
    match = re.match(r"(\d+(?:\.\d+)*)", version)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def at_least(version: str | None, minimum: tuple[int, ...]) -> bool | None:
    """Whether `version` is `minimum` or later; None when the version is unknown."""
    parts = release(version)
    return None if parts is None else is_at_least(parts, minimum)


def _dotted(minimum: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in minimum)


def _gib(size_bytes: int) -> str:
    return f"{size_bytes / 2**30:.1f} GiB"


def _section(facts: Facts, name: str) -> Mapping[str, Any]:
    return facts.get(name) or {}


def _on_macos(facts: Facts) -> bool:
    return _section(facts, "platform").get("system") == "Darwin"


def _torch_imports(facts: Facts) -> bool:
    torch = _section(facts, "torch")
    return bool(torch.get("version")) and not torch.get("import_error")


def _min_macos_for_mps(facts: Facts) -> tuple[int, ...]:
    """The macOS MPS needs under the torch of `facts` (the oldest requirement when torch is unknown)."""
    return min_macos_for_mps(release(_section(facts, "torch").get("version")))


def _macos_too_old_for_mps(facts: Facts) -> bool:
    macos = _section(facts, "platform").get("macos_version")
    return _on_macos(facts) and at_least(macos, _min_macos_for_mps(facts)) is False


def _runs_under_rosetta(facts: Facts) -> bool:
    return _on_macos(facts) and _section(facts, "platform").get("rosetta_translated") is True


def _intel_mac(facts: Facts) -> bool:
    return _on_macos(facts) and _section(facts, "platform").get("apple_silicon") is False


def check_python(facts: Facts) -> list[Finding]:
    """Python must be new enough for perfsuite itself."""
    version = _section(facts, "python").get("version")
    if at_least(version, MIN_PYTHON) is False:
        return [
            Finding(
                "python",
                "problem",
                f"Python {version} is older than {_dotted(MIN_PYTHON)}, which perfsuite needs",
                f"create the environment with Python >= {_dotted(MIN_PYTHON)}",
                DEVICES,
            )
        ]
    return [Finding("python", "ok", f"Python {version} ({_section(facts, 'python').get('implementation', '?')})")]


def check_torch(facts: Facts) -> list[Finding]:
    """torch must import and be at least the source article's 2.0."""
    torch = _section(facts, "torch")
    if torch.get("import_error") or not torch.get("version"):
        return [
            Finding(
                "torch",
                "problem",
                f"torch does not import: {torch.get('import_error') or 'not installed'}",
                "python -m pip install --upgrade torch (inside the environment that runs perfsuite)",
                DEVICES,
            )
        ]
    version = torch["version"]
    if at_least(version, MIN_TORCH) is False:
        return [
            Finding(
                "torch",
                "problem",
                f"torch {version} is older than {_dotted(MIN_TORCH)}",
                f'python -m pip install --upgrade "torch>={_dotted(MIN_TORCH)}"',
                DEVICES,
            )
        ]
    return [Finding("torch", "ok", f"torch {version} (>= {_dotted(MIN_TORCH)})")]


def check_macos_version(facts: Facts) -> list[Finding]:
    """On macOS, the MPS backend needs the macOS its torch release was built for (`min_macos_for_mps`); for a torch
    newer than the newest release read, the requirement is carried over and the finding says so."""
    version = _section(facts, "platform").get("macos_version")
    macos = release(version)
    if not _on_macos(facts) or macos is None:
        return []
    needed = _dotted(_min_macos_for_mps(facts))
    torch_version = _section(facts, "torch").get("version")
    torch_release = release(torch_version)
    under = f"torch {torch_version}" if torch_version else "torch"
    note = unchecked_note(torch_release) if torch_release is not None else None
    unchecked = f" ({note})" if note else ""
    if _macos_too_old_for_mps(facts):
        fix = f"update macOS to {needed} or later (System Settings > General > Software Update)"
        fitting = newest_torch_for_macos(macos)
        if fitting is not None:
            fix += (f', or install the newest torch whose MPS runs on macOS {version}: python -m pip install '
                    f'"torch<{fitting[0]}.{fitting[1] + 1}"')
        return [
            Finding(
                "macos",
                "problem",
                f"macOS {version} is older than {needed}: the MPS backend of {under} needs {needed} or "
                f"later{unchecked}",
                fix + f"; macOS {_dotted(MIN_MACOS_FOR_MPS_BF16)} or later also gives bf16 on MPS",
                ("mps",),
            )
        ]
    return [Finding("macos", "ok", f"macOS {version} (the MPS backend of {under} needs >= {needed}){unchecked}")]


def check_mps_facts(facts: Facts) -> list[Finding]:
    """On macOS, whether perfsuite's MPS facts were read for this torch release or are assumed from an older one."""
    torch_release = release(_section(facts, "torch").get("version"))
    if not (_on_macos(facts) and _torch_imports(facts)) or torch_release is None:
        return []
    note = assumed_facts_note(torch_release)
    if note is None:
        return [Finding("mps-facts", "ok", f"perfsuite's MPS facts cover torch {_dotted(torch_release)} (macOS wheels "
                        f"read: {_dotted(CHECKED_TORCH_RELEASES[0])} to {_dotted(NEWEST_TORCH_CHECKED)})")]
    return [
        Finding(
            "mps-facts",
            "warning",
            note,
            f"read the release's wheel (python -m perfsuite.coverage.wheelcheck --torch {_dotted(torch_release)}) "
            f"before trusting skips, fallback verdicts and event times, or install torch "
            f"{_dotted(NEWEST_TORCH_CHECKED)}",
            ("mps",),
        )
    ]


def check_native_python(facts: Facts) -> list[Finding]:
    """On an Apple-silicon Mac, Python must be a native arm64 build: under Rosetta it sees no MPS."""
    if not _on_macos(facts):
        return []
    platform = _section(facts, "platform")
    if _runs_under_rosetta(facts):
        return [
            Finding(
                "rosetta",
                "problem",
                f"this Python is an {platform.get('machine', 'x86_64')} interpreter running under Rosetta 2 on an "
                "Apple-silicon Mac (sysctl.proc_translated = 1); an x86_64 process sees no MPS device",
                "install an arm64 Python (python.org universal2 installer, Homebrew in /opt/homebrew, or "
                "Miniforge arm64), create a fresh environment with it and reinstall torch; "
                '`python -c "import platform; print(platform.machine())"` must print arm64',
                ("mps",),
            )
        ]
    if _intel_mac(facts) and not _section(facts, "torch").get("mps_available"):
        return [
            Finding(
                "apple-silicon",
                "problem",
                "this is an Intel Mac: PyTorch's MPS backend targets Apple-silicon GPUs, and 2.2.2 was the last "
                "torch release for x86_64 macOS",
                "run MPS benchmarks on an Apple-silicon Mac; here benchmark the CPU: pytest --benchmark-only "
                "--perf-device cpu",
                ("mps",),
            )
        ]
    if platform.get("rosetta_translated") is False:
        return [Finding("rosetta", "ok", f"native {platform.get('machine')} Python (not under Rosetta)")]
    return []


def check_xcode_command_line_tools(facts: Facts) -> list[Finding]:
    """On macOS, the Xcode command line tools: the source article's second fix for a missing MPS device."""
    if not _on_macos(facts):
        return []
    path = _section(facts, "platform").get("xcode_command_line_tools")
    if path:
        return [Finding("xcode-clt", "ok", f"Xcode command line tools at {path}")]
    return [
        Finding(
            "xcode-clt",
            "warning",
            "Xcode command line tools not found (`xcode-select -p` failed); PyPI wheels run without them, but "
            "building torch or any C++ extension needs them, and the source article lists them as a fix for "
            "'The MPS device is not available'",
            "xcode-select --install",
            ("mps",),
        )
    ]


def check_mps(facts: Facts) -> list[Finding]:
    """Whether torch has an MPS backend and a device, and if not, why."""
    if not _torch_imports(facts):
        return []
    torch = _section(facts, "torch")
    platform = _section(facts, "platform")
    version = torch["version"]
    if not _on_macos(facts):
        built = "was built without MPS" if not torch.get("mps_built") else "has MPS built in"
        return [
            Finding(
                "mps",
                "problem",
                f"MPS is absent: MPS exists only on macOS with Apple silicon, this is {platform.get('system')} "
                f"{platform.get('machine')}, and torch {version} {built} (torch.backends.mps.is_built() is "
                f"{bool(torch.get('mps_built'))})",
                f"run MPS benchmarks on an Apple-silicon Mac (macOS >= {_dotted(_min_macos_for_mps(facts))}, arm64 "
                "Python, torch from PyPI); "
                "here benchmark the CPU (pytest --benchmark-only --perf-device cpu), or cuda where an NVIDIA GPU is "
                "present",
                ("mps",),
            )
        ]
    if not torch.get("mps_built"):
        return [
            Finding(
                "mps",
                "problem",
                f"torch {version} was built without MPS (torch.backends.mps.is_built() is False)",
                "reinstall torch from PyPI, whose macOS arm64 wheels include MPS: "
                "python -m pip install --force-reinstall torch (in an arm64 Python)",
                ("mps",),
            )
        ]
    if torch.get("mps_available"):
        return [Finding("mps", "ok", _mps_ok_summary(torch))]
    if _macos_too_old_for_mps(facts) or _runs_under_rosetta(facts) or _intel_mac(facts):
        # The specific cause is already a problem with its own fix; repeating it here adds nothing.
        return []
    return [
        Finding(
            "mps",
            "problem",
            "torch has MPS built in but torch.backends.mps.is_available() is False, for no reason these facts show",
            f"check, as the source article advises, that macOS is >= {_dotted(_min_macos_for_mps(facts))} and the "
            "Xcode command line tools are installed (xcode-select --install); then upgrade torch "
            "(python -m pip install --upgrade torch)",
            ("mps",),
        )
    ]


def _mps_ok_summary(torch: Mapping[str, Any]) -> str:
    count = torch.get("mps_device_count")
    memory = torch.get("mps_recommended_max_memory_bytes")
    parts = ["MPS available"]
    parts.append(f"{count} device(s)" if count is not None else "torch.mps.device_count() not in this torch")
    if memory is not None:
        parts.append(f"recommended max memory {_gib(memory)}")
    return ", ".join(parts)


def mps_fallback_setting(value: str | None, torch_release: Release | None = None) -> bool | None:
    """Whether torch turns the CPU fallback on for PYTORCH_ENABLE_MPS_FALLBACK=`value`, as MPSFallback.mm of
    `torch_release` reads it. From 2.8 (`c10::utils::get_env`) any value but exactly "0" turns it on; before (and
    for an unknown release) `std::stoi` reads it, so any integer other than 0 turns it on (" 2", "+1", "1abc" too),
    and None stands for a value stoi cannot read, on which torch throws while registering its MPS kernels."""
    if value is None:
        return False
    if torch_release is not None and is_at_least(torch_release, MIN_TORCH_FOR_GET_ENV_FALLBACK_SWITCH):
        return value != "0"
    match = re.match(r"\s*[+-]?(\d+)", value)
    return None if match is None else int(match.group(1)) != 0


def check_mps_fallback(facts: Facts) -> list[Finding]:
    """PYTORCH_ENABLE_MPS_FALLBACK set to turn the fallback on moves ops without an MPS kernel to the CPU, which skews
    MPS timings."""
    if not _on_macos(facts):
        return []
    value = _section(facts, "environment").get("PYTORCH_ENABLE_MPS_FALLBACK")
    torch_release = release(_section(facts, "torch").get("version"))
    enabled = mps_fallback_setting(value, torch_release)
    if enabled is None:
        return [
            Finding(
                "mps-fallback",
                "warning",
                f"PYTORCH_ENABLE_MPS_FALLBACK={value!r} is not an integer: this torch reads it with std::stoi, which "
                "throws on it when the MPS backend loads",
                "unset PYTORCH_ENABLE_MPS_FALLBACK (or set it to 0, or to 1 to run ops without an MPS kernel on "
                "the CPU)",
                ("mps",),
            )
        ]
    if enabled:
        return [
            Finding(
                "mps-fallback",
                "warning",
                f"PYTORCH_ENABLE_MPS_FALLBACK={value!r}: ops without an MPS kernel run on the CPU, so MPS timings "
                "include CPU work and copies",
                "unset PYTORCH_ENABLE_MPS_FALLBACK (or set it to 0) so a missing kernel raises NotImplementedError, "
                "or keep it and check which ops fell back before trusting the timings",
                ("mps",),
            )
        ]
    shown = "unset" if value is None else f"{value!r}, which torch reads as 0"
    return [
        Finding(
            "mps-fallback",
            "ok",
            f"PYTORCH_ENABLE_MPS_FALLBACK is {shown}: an op without an MPS kernel raises NotImplementedError "
            "(set it to 1 before starting Python to run such ops on the CPU instead)",
        )
    ]


def check_mps_metal_version(facts: Facts) -> list[Finding]:
    """PYTORCH_MPS_METAL_VERSION, read from torch 2.15: the Metal language MPS compiles its shaders with."""
    value = _section(facts, "environment").get("PYTORCH_MPS_METAL_VERSION")
    torch_release = release(_section(facts, "torch").get("version"))
    if not _on_macos(facts) or value is None or torch_release is None:
        return []
    if not is_at_least(torch_release, MIN_TORCH_FOR_MPS_METAL_VERSION_VARIABLE):
        return [Finding("mps-metal-version", "ok", f"PYTORCH_MPS_METAL_VERSION={value!r} has no effect: torch "
                        f"{_dotted(torch_release)} does not read it (torch reads it from "
                        f"{_dotted(MIN_TORCH_FOR_MPS_METAL_VERSION_VARIABLE)})")]
    note = unchecked_note(torch_release)
    unchecked = f" ({note})" if note else ""
    macos = release(_section(facts, "platform").get("macos_version"))
    default = default_metal_version(macos) if macos is not None else None
    compiled_for = f"Metal {default}, this macOS's default" if default else "this macOS's default"
    if value not in METAL_VERSIONS:
        return [
            Finding(
                "mps-metal-version",
                "warning",
                f"PYTORCH_MPS_METAL_VERSION={value!r} is not one of {', '.join(METAL_VERSIONS)}: torch warns "
                f'"Ignoring PYTORCH_MPS_METAL_VERSION" and compiles for {compiled_for}{unchecked}',
                f"unset PYTORCH_MPS_METAL_VERSION or set it to one of {', '.join(METAL_VERSIONS)}",
                ("mps",),
            )
        ]
    if default is not None and (release(value) or ()) > (release(default) or ()):
        return [
            Finding(
                "mps-metal-version",
                "warning",
                f"PYTORCH_MPS_METAL_VERSION={value} asks for a newer Metal language than macOS "
                f"{_dotted(macos or ())} gets by default ({default}): torch fails rather than falls back when the "
                f"host cannot provide it{unchecked}",
                f"unset PYTORCH_MPS_METAL_VERSION, or set it to {default} or older",
                ("mps",),
            )
        ]
    return [Finding("mps-metal-version", "ok", f"PYTORCH_MPS_METAL_VERSION={value}: MPS shaders are compiled for "
                    f"Metal {value}{unchecked}")]


def check_mps_mixed_precision(facts: Facts) -> list[Finding]:
    """fp16 and bf16 autocast and GradScaler on MPS, each gated by a torch or macOS version."""
    torch = _section(facts, "torch")
    if not (_on_macos(facts) and _torch_imports(facts) and torch.get("mps_built")):
        return []
    version = torch["version"]
    macos = _section(facts, "platform").get("macos_version")
    findings = []
    if at_least(version, MIN_TORCH_FOR_MPS_FP16_AUTOCAST) is False:
        findings.append(
            _upgrade_torch("mps-fp16-autocast", "fp16 autocast on MPS", MIN_TORCH_FOR_MPS_FP16_AUTOCAST, version)
        )
    else:
        findings.append(Finding("mps-fp16-autocast", "ok", f"fp16 autocast on MPS (torch {version})"))
    if at_least(macos, MIN_MACOS_FOR_MPS_BF16) is False:
        findings.append(
            Finding(
                "mps-bf16",
                "warning",
                f"bf16 on MPS needs macOS {_dotted(MIN_MACOS_FOR_MPS_BF16)} or later; this is macOS {macos}",
                f"update macOS to {_dotted(MIN_MACOS_FOR_MPS_BF16)} or later, or benchmark MPS in fp32 or fp16",
                ("mps",),
            )
        )
    elif at_least(version, MIN_TORCH_FOR_MPS_BF16_AUTOCAST) is False:
        findings.append(_upgrade_torch("mps-bf16", "bf16 autocast on MPS", MIN_TORCH_FOR_MPS_BF16_AUTOCAST, version))
    else:
        findings.append(Finding("mps-bf16", "ok", f"bf16 autocast on MPS (macOS {macos}, torch {version})"))
    if at_least(version, MIN_TORCH_FOR_MPS_GRAD_SCALER) is False:
        findings.append(
            Finding(
                "mps-grad-scaler",
                "warning",
                f"GradScaler on MPS needs torch >= {_dotted(MIN_TORCH_FOR_MPS_GRAD_SCALER)} (earlier ones fail "
                f"casting the scale to float64); this is torch {version}",
                f'python -m pip install --upgrade "torch>={_dotted(MIN_TORCH_FOR_MPS_GRAD_SCALER)}" and use '
                'torch.amp.GradScaler("mps") (not torch.cuda.amp, as the source article does); bf16 needs no scaler',
                ("mps",),
            )
        )
    else:
        findings.append(Finding("mps-grad-scaler", "ok", f'torch.amp.GradScaler("mps") (torch {version})'))
    return findings


def _upgrade_torch(check: str, feature: str, minimum: tuple[int, ...], version: str) -> Finding:
    return Finding(
        check,
        "warning",
        f"{feature} needs torch >= {_dotted(minimum)}; this is torch {version}",
        f'python -m pip install --upgrade "torch>={_dotted(minimum)}"',
        ("mps",),
    )


def check_cpu_fp16_autocast(facts: Facts) -> list[Finding]:
    """Whether torch.autocast("cpu", dtype=torch.float16) really casts: older torch warns and runs fp32."""
    torch = _section(facts, "torch")
    casts = torch.get("cpu_fp16_autocast")
    if not _torch_imports(facts) or casts is None:
        return []
    if casts:
        return [Finding("cpu-fp16-autocast", "ok", "fp16 autocast on the CPU casts matmuls to float16")]
    return [
        Finding(
            "cpu-fp16-autocast",
            "warning",
            f"torch {torch['version']} disables fp16 autocast on the CPU (a matmul under it stays float32), so "
            "cpu-fp16 cases would time fp32",
            "python -m pip install --upgrade torch, or benchmark the CPU in bf16 or fp32",
            ("cpu",),
        )
    ]


def check_cuda(facts: Facts) -> list[Finding]:
    """Whether torch has CUDA (or ROCm) and sees a GPU; lists the devices and versions when it does."""
    if not _torch_imports(facts):
        return []
    torch = _section(facts, "torch")
    version = torch["version"]
    toolkit = f"CUDA {torch['cuda_version']}" if torch.get("cuda_version") else None
    if torch.get("hip_version"):
        toolkit = f"ROCm (HIP {torch['hip_version']})"
    if toolkit is None:
        fix = (
            "CUDA does not exist on macOS: benchmark MPS with pytest --benchmark-only --perf-device mps"
            if _on_macos(facts)
            else "on a machine with an NVIDIA GPU, install a CUDA build of torch matching its driver, e.g. "
            "python -m pip install torch --index-url https://download.pytorch.org/whl/cu126"
        )
        return [
            Finding(
                "cuda",
                "problem",
                f"torch {version} was built without CUDA (torch.version.cuda is None)",
                fix,
                ("cuda",),
            )
        ]
    devices = torch.get("cuda_devices") or []
    if not torch.get("cuda_available") or not devices:
        hidden = _section(facts, "environment").get("CUDA_VISIBLE_DEVICES")
        return [
            Finding(
                "cuda",
                "problem",
                f"torch {version} is built for {toolkit} but sees no GPU",
                "check that `nvidia-smi` lists a GPU and that its driver supports this CUDA version"
                + (f"; CUDA_VISIBLE_DEVICES={hidden!r} may hide the GPUs" if hidden is not None else ""),
                ("cuda",),
            )
        ]
    cudnn = f", cuDNN {torch['cudnn_version']}" if torch.get("cudnn_version") else ""
    listed = "; ".join(_cuda_device_summary(index, device) for index, device in enumerate(devices))
    return [Finding("cuda", "ok", f"{toolkit}{cudnn}: {listed}")]


def _cuda_device_summary(index: int, device: Mapping[str, Any]) -> str:
    capability = str(device.get("capability", "?")).replace(".", "")
    return f"{index}: {device.get('name')} (sm_{capability}, {_gib(device.get('total_memory_bytes', 0))})"


CHECKS: tuple[Callable[[Facts], list[Finding]], ...] = (
    check_python,
    check_torch,
    check_macos_version,
    check_native_python,
    check_xcode_command_line_tools,
    check_mps,
    check_mps_facts,
    check_mps_fallback,
    check_mps_metal_version,
    check_mps_mixed_precision,
    check_cpu_fp16_autocast,
    check_cuda,
)


def render_text(facts: Facts, findings: list[Finding], device: str) -> str:
    """The report a person reads: a header, each finding with its fix, which devices are usable, the verdict."""
    python, platform, torch = (_section(facts, name) for name in ("python", "platform", "torch"))
    where = f"{platform.get('system', '?')} {platform.get('machine', '?')}"
    if platform.get("chip"):
        where += f" ({platform['chip']})"
    if platform.get("macos_version"):
        where += f", macOS {platform['macos_version']}"
    lines = [f"perfsuite doctor: {where}, Python {python.get('version', '?')}, torch {torch.get('version') or 'none'}"]
    width = max((len(f.check) for f in findings), default=0)
    for finding in findings:
        lines.append(f"  {finding.status:<8} {finding.check:<{width}}  {finding.summary}")
        if finding.fix:
            lines.append(f"  {'':<8} {'':<{width}}  fix: {finding.fix}")
    usable = ", ".join(f"{d} {'usable' if device_is_usable(findings, d) else 'unusable'}" for d in DEVICES)
    lines.append(f"devices: {usable}")
    blockers = blocking_problems(findings, device)
    if blockers:
        lines.append(f"--device {device}: unusable, see {', '.join(f.check for f in blockers)} above")
    else:
        lines.append(f"--device {device}: usable")
    return "\n".join(lines) + "\n"


def report_data(facts: Facts, findings: list[Finding], device: str) -> dict[str, Any]:
    """The report as plain JSON-able data, for `--format json`."""
    return {
        "device": device,
        "device_usable": device_is_usable(findings, device),
        "devices_usable": {d: device_is_usable(findings, d) for d in DEVICES},
        "findings": [f.to_dict() for f in findings],
        "facts": dict(facts),
    }
