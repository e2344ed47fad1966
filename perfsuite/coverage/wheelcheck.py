"""The Apple-silicon torch wheel as a source of truth: check the MPS support table, and the macOS each torch release
needs for MPS, against what the macOS arm64 wheel of the installed torch version really contains.

torchgen names each kernel it registers for MPS `wrapper_MPS_...` (register_dispatch_key.py), and those names
survive, length-prefixed, in the mangled symbols of libtorch_cpu.dylib. The op whose kernel a name is follows from
native_functions.yaml with torchgen's own naming rules, so each op the models use can be checked: the table calls
it a native MPS kernel exactly when the binary registers one (ops the table knows to be Python kernels or
always-fallbacks excepted, as facts.py records them). The macOS MPS needs is the later of the wheel's platform tag
and the minimum in the binary's own "The MPS backend is supported on MacOS X.Y+" message.

Run with `nox -s mps-wheel` (it downloads about 110 MB); the parsing is pure and tested on small fixtures.
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.coverage.support import OpSupport, Verdict, yaml_name
from perfsuite.matrix.mps_support import Release, dotted, min_macos_for_mps

LIBRARY_IN_WHEEL = "torch/lib/libtorch_cpu.dylib"
WRAPPER_PREFIX = "wrapper_MPS_"
# Itanium mangling writes each identifier after its length: ..._GLOBAL__N_122wrapper_MPS_add_TensorE...
_MANGLED_WRAPPER = re.compile(rb"(\d+)(wrapper_MPS_[A-Za-z0-9_]+)")
_MPS_MINIMUM_MESSAGE = re.compile(rb"The MPS backend is supported on [Mm]ac[Oo][Ss] (\d+)\.(\d+)\+")
_WHEEL_MACOS_TAG = re.compile(r"macosx_(\d+)_(\d+)_arm64")


def mps_wrapper_names(binary: bytes) -> set[str]:
    """The `wrapper_MPS_*` kernel names in `binary`, each cut to the length its mangled symbol declares."""
    names = set()
    for match in _MANGLED_WRAPPER.finditer(binary):
        digits, text = match.group(1).decode(), match.group(2).decode()
        # The digits may follow other digits of the symbol (_GLOBAL__N_1 then 22): the shortest suffix long
        # enough for a name that starts with the prefix is the length.
        for width in range(1, len(digits) + 1):
            length_text = digits[-width:]
            length = int(length_text)
            if length_text[0] != "0" and len(WRAPPER_PREFIX) < length <= len(text):
                names.add(text[:length])
                break
    return names


def mps_minimum_macos_in_binary(binary: bytes) -> Release | None:
    """The macOS release in the binary's "The MPS backend is supported on MacOS X.Y+" message, if present."""
    match = _MPS_MINIMUM_MESSAGE.search(binary)
    return (int(match.group(1)), int(match.group(2))) if match else None


def wheel_macos_tag(wheel_filename: str) -> Release | None:
    """The macOS release in a wheel's arm64 platform tag: torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl -> (14, 0)."""
    match = _WHEEL_MACOS_TAG.search(wheel_filename)
    return (int(match.group(1)), int(match.group(2))) if match else None


def wheel_min_macos_for_mps(tag: Release | None, in_binary: Release | None) -> Release | None:
    """The macOS MPS needs from a wheel: the later of its install tag and its binary's MPS message."""
    known = [release for release in (tag, in_binary) if release is not None]
    return max(known) if known else None


def wrapper_name(function: Any) -> str:
    """The name torchgen gives the MPS kernel of `function` (a torchgen NativeFunction), per register_dispatch_key.py:
    the out variant of a structured group, a functional or in-place variant generated from one, or an
    unstructured kernel."""
    from torchgen.api import dispatcher

    name = function.func.name
    if function.structured:
        return f"{WRAPPER_PREFIX}{name.name}_out_{name.overload_name}"
    if function.structured_delegate is not None:
        return f"{WRAPPER_PREFIX}{name.unambiguous_name()}"
    return f"{WRAPPER_PREFIX}{name.overload_name}_{dispatcher.name(function.func)}"


@functools.lru_cache(maxsize=1)
def wrapper_names_by_op() -> dict[str, str]:
    """The MPS kernel name of every op of the installed torch's native_functions.yaml, by yaml name."""
    from torchgen.gen import parse_native_yaml

    from perfsuite.coverage.support import native_yaml_paths

    parsed = parse_native_yaml(*native_yaml_paths())
    return {str(function.func.name): wrapper_name(function) for function in parsed.native_functions}


@dataclass(frozen=True)
class OpAgreement:
    """One op: whether the table calls it a native MPS kernel, whether the binary registers one (None when two
    ops share the kernel name, so the binary cannot tell), and why they may differ by design."""

    op: str
    table_native: bool
    binary_native: bool | None
    explained_by: str | None = None

    @property
    def agrees(self) -> bool:
        """Whether table and binary agree (an explained difference counts as agreement)."""
        return self.binary_native is not None and (
            self.table_native == self.binary_native or self.explained_by is not None
        )


def compare_ops(
    ops: Iterable[str],
    lookup: Callable[[str], OpSupport],
    wrapper_by_op: Mapping[str, str],
    binary_wrappers: set[str],
    python_kernels: set[str],
) -> list[OpAgreement]:
    """Each op ('aten::name.overload') with the table's verdict and the binary's registration side by side."""
    owners: dict[str, int] = {}
    for name in wrapper_by_op.values():
        owners[name] = owners.get(name, 0) + 1
    result = []
    for op in sorted(set(ops)):
        table_native = lookup(op).verdict is Verdict.NATIVE
        wrapper = wrapper_by_op.get(yaml_name(op))
        if wrapper is None or owners[wrapper] > 1:
            result.append(OpAgreement(op, table_native, None))
            continue
        binary_native = wrapper in binary_wrappers
        explained = None
        if table_native and not binary_native and yaml_name(op) in python_kernels:
            explained = "a kernel registered from Python (torch/_meta_registrations or torch/mps), not by torchgen"
        result.append(OpAgreement(op, table_native, binary_native, explained))
    return result


@dataclass(frozen=True)
class WheelCheck:
    """What the wheel check found for one torch version."""

    torch_version: str
    wheel: str
    model_ops: tuple[OpAgreement, ...]
    all_ops: tuple[OpAgreement, ...]
    table_min_macos: Release
    wheel_tag_macos: Release | None
    binary_min_macos: Release | None

    @property
    def wheel_min_macos(self) -> Release | None:
        """The macOS MPS needs according to the wheel."""
        return wheel_min_macos_for_mps(self.wheel_tag_macos, self.binary_min_macos)

    @property
    def passed(self) -> bool:
        """Whether every op the models use agrees and the macOS minimum matches the table's."""
        return all(op.agrees for op in self.model_ops) and self.wheel_min_macos == self.table_min_macos


def render_check(check: WheelCheck) -> str:
    """The report: agreement counts, each disagreement, the macOS comparison and the verdict."""

    def count(ops: tuple[OpAgreement, ...]) -> str:
        told = [op for op in ops if op.binary_native is not None]
        shown = f"{sum(op.agrees for op in told)}/{len(ops)}"
        if len(told) < len(ops):
            shown += f" ({len(ops) - len(told)} share a kernel name with another op, so the binary cannot tell)"
        return shown

    lines = [
        f"perfsuite wheel check: torch {check.torch_version}, {check.wheel}",
        f"ops the models use: table and libtorch_cpu.dylib agree on {count(check.model_ops)}",
        f"every op in native_functions.yaml: agree on {count(check.all_ops)}",
    ]
    for op in check.model_ops:
        if op.explained_by:
            lines.append(f"  explained: {op.op}: {op.explained_by}")
        elif not op.agrees:
            binary = "cannot tell (kernel name shared)" if op.binary_native is None else (
                "registered" if op.binary_native else "not registered")
            lines.append(f"  differs: {op.op}: table {'native' if op.table_native else 'not native'}, binary {binary}")
    shown_tag = dotted(check.wheel_tag_macos) if check.wheel_tag_macos else "none"
    shown_binary = dotted(check.binary_min_macos) if check.binary_min_macos else "no message"
    shown_wheel = dotted(check.wheel_min_macos) if check.wheel_min_macos else "unknown"
    verdict = "agree" if check.wheel_min_macos == check.table_min_macos else "DIFFER"
    lines.append(
        f"macOS for MPS: table {dotted(check.table_min_macos)}, wheel {shown_wheel} (platform tag {shown_tag}, "
        f"binary message {shown_binary}): {verdict}"
    )
    lines.append("passed" if check.passed else "FAILED")
    return "\n".join(lines) + "\n"


def download_macos_wheel(torch_version: str, directory: Path) -> Path:
    """The macOS arm64 wheel of `torch_version` for this Python, fetched with pip into `directory`."""
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"torch=={torch_version}", "--no-deps", "--only-binary=:all:",
         "--platform", "macosx_15_0_arm64", "--python-version", python, "--dest", str(directory), "--quiet"],
        check=True,
    )
    (wheel,) = directory.glob("torch-*.whl")
    return wheel


def model_ops(lookup_descend: Callable[[str], str | None]) -> set[str]:
    """Every op the registered workloads run at smoke size in all their modes (traced on the CPU with MPS's
    choices, as `perfsuite coverage` traces them)."""
    from perfsuite.coverage.trace import trace_workload
    from perfsuite.workloads import registered_workloads

    ops: set[str] = set()
    for workload in registered_workloads().values():
        trace = trace_workload(workload, "smoke", ("infer", "train"), descend_key=lookup_descend)
        ops.update(count.op for count in trace.counts)
    return ops


def run_check(wheel: Path) -> WheelCheck:
    """Compare the installed torch's table and macOS entry with `wheel`."""
    import torch

    from perfsuite.coverage.support import installed_mps_support_table
    from perfsuite.matrix.cases import parse_version

    with zipfile.ZipFile(wheel) as archive:
        binary = archive.read(LIBRARY_IN_WHEEL)
    table = installed_mps_support_table()
    wrappers = mps_wrapper_names(binary)
    by_op = wrapper_names_by_op()
    python_kernels = {fact.op for fact in table.facts.python_mps_kernels}

    def compare(ops: Iterable[str]) -> tuple[OpAgreement, ...]:
        return tuple(compare_ops(ops, table.lookup, by_op, wrappers, python_kernels))

    return WheelCheck(
        torch_version=torch.__version__,
        wheel=wheel.name,
        model_ops=compare(model_ops(table.descend_key)),
        all_ops=compare(f"aten::{name}" for name in by_op),
        table_min_macos=min_macos_for_mps(parse_version(torch.__version__)),
        wheel_tag_macos=wheel_macos_tag(wheel.name),
        binary_min_macos=mps_minimum_macos_in_binary(binary),
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m perfsuite.coverage.wheelcheck [--wheel W.whl]`: 0 when the wheel agrees, 1 when it does not."""
    import torch

    parser = argparse.ArgumentParser(
        prog="python -m perfsuite.coverage.wheelcheck", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--wheel", type=Path, help="a macOS arm64 torch wheel already downloaded (default: fetch it)")
    args = parser.parse_args(argv)
    if args.wheel is not None:
        check = run_check(args.wheel)
    else:
        with tempfile.TemporaryDirectory() as directory:
            check = run_check(download_macos_wheel(torch.__version__.split("+")[0], Path(directory)))
    sys.stdout.write(render_check(check))
    return 0 if check.passed else 1


if __name__ == "__main__":
    sys.exit(main())
