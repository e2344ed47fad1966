"""Check a torch release's macOS arm64 wheel against perfsuite's MPS facts, so a new release takes minutes to read:

    python -m perfsuite.coverage.wheelcheck --torch 2.16.0    # download the wheel (about 140 MB), read it, report
    python -m perfsuite.coverage.wheelcheck --wheel W.whl     # a wheel already downloaded
    python -m perfsuite.coverage.wheelcheck                   # the installed torch's release (nox -s mps-wheel)

Exit status 0 when every check agrees, 1 when one disagrees or cannot be judged, 2 when the wheel cannot be had or
read. Three checks, each against the wheel itself, not the installed torch:

- Every op of the wheel's native_functions.yaml (parsed by the wheel's own torchgen, in a process of its own,
  `perfsuite.coverage.yamlread`), and every op the registered workloads run (traced with the installed torch): the
  MPS support table built from that yaml and `mps_facts.json` for the wheel's release calls an op a native MPS kernel
  exactly when libtorch_cpu.dylib registers one. torchgen names each kernel it registers for MPS `wrapper_MPS_...`
  (register_dispatch_key.py), and those names survive, length-prefixed, in the binary's mangled symbols; the op
  whose kernel a name is follows from the yaml with torchgen's own naming rules. Ops whose kernels share one name
  cannot be told apart by the binary: they are listed and counted apart, never counted as agreeing. Any op the
  binary tells apart that disagrees fails the check, named.
- The ops MPSFallback.mm sends to the CPU (`perfsuite.coverage.wheelbinary` reads its block's arm64 code) against
  the facts' `always_cpu_fallback` for the release.
- The macOS MPS needs: the later of the wheel's platform tag and its binary's "The MPS backend is supported on
  macOS X.Y+" message, against `mps_support.min_macos_for_mps`.
- Two facts that change with releases: whether torch's own tests still skip fp16 convolution backward on MPS
  (`SKIPLIST_GRAD` of the wheel's torch/testing/_internal/common_mps.py) against perfsuite's guard, and whether the
  GPU stamps MPS events (`wheelbinary.events_stamped_on_gpu`) against `mps_support.mps_gpu_event_times`.

For a release newer than the newest one read, the report says the facts are unchecked and compares the wheel with
what perfsuite assumes (the newest release read's facts); a pass there is what to review before adding the release
to `mps_support.CHECKED_TORCH_RELEASES` and `mps_facts.json`. The parsing is pure and tested on small fixtures.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.coverage.facts import facts_for_torch, load_mps_facts
from perfsuite.coverage.support import MpsSupportTable, OpKernels, OpSupport, Verdict, yaml_name
from perfsuite.coverage.wheelbinary import BinaryReadError, events_stamped_on_gpu, mps_fallback_block, read_macho
from perfsuite.matrix.mps_support import (
    NEWEST_TORCH_CHECKED,
    Release,
    dotted,
    fp16_convolution_backward_may_abort,
    is_checked,
    min_macos_for_mps,
    mps_gpu_event_times,
    parse_release,
    unchecked_note,
)

LIBRARY_IN_WHEEL = "torch/lib/libtorch_cpu.dylib"
TORCH_MPS_TEST_LISTS = "torch/testing/_internal/common_mps.py"
# The OpInfo whose fp16 backward perfsuite's guard stands for: the models train nn.Conv2d layers.
CONVOLUTION_OPINFO = "nn.functional.conv2d"
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


def wheel_version(wheel_filename: str) -> str:
    """The torch release of a wheel's file name: torch-2.15.0-cp311-cp311-macosx_14_0_arm64.whl -> '2.15.0'."""
    match = re.match(r"torch-([^-]+)-", Path(wheel_filename).name)
    if match is None:
        raise ValueError(f"{wheel_filename}: not a torch wheel's name (torch-<version>-<python>-...-<platform>.whl)")
    return match.group(1)


def kernels_of(ops: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, OpKernels], dict[str, str]]:
    """(OpKernels by yaml name, MPS kernel name by yaml name) from `perfsuite.coverage.yamlread`'s JSON."""
    kernels = {
        op: OpKernels(
            name=str(entry["name"]), has_mps_kernel=bool(entry["has_mps_kernel"]),
            structured_delegate=entry["structured_delegate"],
            delegate_has_mps_kernel=bool(entry["delegate_has_mps_kernel"]), composite_key=entry["composite_key"],
            device_kernels=tuple(entry["device_kernels"]),
        )
        for op, entry in ops.items()
    }
    return kernels, {op: str(entry["wrapper"]) for op, entry in ops.items()}


def read_wheel_yaml(wheel: zipfile.ZipFile, directory: Path) -> dict[str, dict[str, Any]]:
    """The ops of the wheel's native_functions.yaml, parsed by the wheel's own torchgen (extracted into `directory`)
    in a Python process of its own; WheelError where the wheel has no yaml or the parse fails."""
    members = [name for name in wheel.namelist() if name.startswith("torchgen/")]
    yaml, tags = (f"torchgen/packaged/ATen/native/{name}" for name in ("native_functions.yaml", "tags.yaml"))
    if yaml not in members or tags not in members:
        raise WheelError(f"{wheel.filename}: no {yaml} and {tags}: is it a torch wheel?")
    wheel.extractall(directory, members)
    project = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "perfsuite.coverage.yamlread", str(directory / yaml), str(directory / tags)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(directory), str(project)])},
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-10:])
        raise WheelError(f"{wheel.filename}: its torchgen could not parse its native_functions.yaml:\n{tail}")
    ops: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return ops


def fp16_convolution_backward_skipped(source: str) -> bool:
    """Whether common_mps.py's text skips the fp16 backward of conv2d on MPS (its SKIPLIST_GRAD names
    nn.functional.conv2d with torch.float16)."""
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        if not any(isinstance(target, ast.Name) and target.id == "SKIPLIST_GRAD" for target in node.targets):
            continue
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == CONVOLUTION_OPINFO:
                dtypes = getattr(value, "elts", [])
                return any(isinstance(dtype, ast.Attribute) and dtype.attr == "float16" for dtype in dtypes)
    return False


class WheelError(Exception):
    """The wheel cannot be had or read: the message says which and what to do."""


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
    """What the wheel check found for one torch release's wheel.

    `fallback_in_binary` is None where the MPSFallback.mm block could not be read (`fallback_unread` says why);
    `facts_note` is `mps_support.unchecked_note` for a release newer than the newest one read."""

    torch_version: str
    wheel: str
    traced_with: str
    model_ops: tuple[OpAgreement, ...]
    all_ops: tuple[OpAgreement, ...]
    fallback_in_binary: tuple[str, ...] | None
    fallback_in_facts: tuple[str, ...]
    table_min_macos: Release
    wheel_tag_macos: Release | None
    binary_min_macos: Release | None
    fp16_convolution_skipped_by_torch: bool = False
    fp16_convolution_guarded: bool = False
    events_on_gpu: bool | None = None
    events_read_as_gpu: bool = False
    facts_note: str | None = None
    fallback_unread: str = ""
    events_unread: str = ""

    @property
    def wheel_min_macos(self) -> Release | None:
        """The macOS MPS needs according to the wheel."""
        return wheel_min_macos_for_mps(self.wheel_tag_macos, self.binary_min_macos)

    @property
    def disagreements(self) -> tuple[OpAgreement, ...]:
        """Every op the binary tells apart on which table and binary disagree (models' ops and the yaml's)."""
        found = {op.op: op for op in (*self.all_ops, *self.model_ops) if op.binary_native is not None and not op.agrees}
        return tuple(found[name] for name in sorted(found))

    @property
    def cannot_tell(self) -> tuple[str, ...]:
        """The yaml's ops the binary cannot tell apart (their kernels share one name), counted apart."""
        return tuple(op.op for op in self.all_ops if op.binary_native is None)

    @property
    def fallback_agrees(self) -> bool:
        """Whether the binary's MPSFallback.mm block sends exactly the facts' ops to the CPU (False when unread)."""
        return self.fallback_in_binary is not None and set(self.fallback_in_binary) == set(self.fallback_in_facts)

    @property
    def releases_agree(self) -> bool:
        """Whether the fp16 convolution guard and the event stamps match what the wheel does."""
        return (self.fp16_convolution_skipped_by_torch == self.fp16_convolution_guarded
                and self.events_on_gpu is not None and self.events_on_gpu == self.events_read_as_gpu)

    @property
    def passed(self) -> bool:
        """Whether every op the binary tells apart agrees, and the fallback block, the macOS, the fp16 convolution
        guard and the event stamps match."""
        return (not self.disagreements and self.fallback_agrees and self.wheel_min_macos == self.table_min_macos
                and self.releases_agree)


def render_check(check: WheelCheck) -> str:
    """The report: which facts it checks, agreement counts, each disagreement by name, the ops the binary cannot
    tell apart, the fallback block, the macOS comparison and the verdict."""

    def count(ops: tuple[OpAgreement, ...]) -> str:
        told = [op for op in ops if op.binary_native is not None]
        return (f"{len(ops)} ops, {len(told)} told apart by the binary: table and libtorch_cpu.dylib agree on "
                f"{sum(op.agrees for op in told)}/{len(told)}")

    facts = (f"perfsuite's MPS facts are {check.facts_note}" if check.facts_note
             else f"perfsuite's MPS facts for torch {check.torch_version} were read from its wheel")
    lines = [
        f"perfsuite wheel check: torch {check.torch_version}, {check.wheel}",
        facts,
        f"ops the models use (traced with the installed torch {check.traced_with}): {count(check.model_ops)}",
        f"every op of the wheel's native_functions.yaml: {count(check.all_ops)}",
    ]
    for op in check.disagreements:
        binary = "registered" if op.binary_native else "not registered"
        lines.append(f"  differs: {op.op}: table {'native' if op.table_native else 'not native'}, binary {binary}")
    for op in (*check.model_ops, *check.all_ops):
        if op.explained_by and op.binary_native is not None:
            lines.append(f"  explained: {op.op}: {op.explained_by}")
    if check.cannot_tell:
        lines.append(f"cannot tell apart ({len(check.cannot_tell)} ops whose MPS kernels share one name, not counted "
                     f"above): {', '.join(check.cannot_tell)}")
    facts_ops = ", ".join(sorted(check.fallback_in_facts)) or "none"
    if check.fallback_in_binary is None:
        lines.append(f"ops MPSFallback.mm sends to the CPU: cannot read the block ({check.fallback_unread}); facts "
                     f"{facts_ops}: CANNOT JUDGE")
    else:
        binary_ops = ", ".join(sorted(check.fallback_in_binary)) or "none"
        verdict = "agree" if check.fallback_agrees else "DIFFER"
        lines.append(f"ops MPSFallback.mm sends to the CPU: binary {binary_ops}; facts {facts_ops}: {verdict}")
    shown_tag = dotted(check.wheel_tag_macos) if check.wheel_tag_macos else "none"
    shown_binary = dotted(check.binary_min_macos) if check.binary_min_macos else "no message"
    shown_wheel = dotted(check.wheel_min_macos) if check.wheel_min_macos else "unknown"
    verdict = "agree" if check.wheel_min_macos == check.table_min_macos else "DIFFER"
    lines.append(
        f"macOS for MPS: table {dotted(check.table_min_macos)}, wheel {shown_wheel} (platform tag {shown_tag}, "
        f"binary message {shown_binary}): {verdict}"
    )
    skipped = "skip" if check.fp16_convolution_skipped_by_torch else "run"
    guarded = "skips" if check.fp16_convolution_guarded else "runs"
    verdict = "agree" if check.fp16_convolution_skipped_by_torch == check.fp16_convolution_guarded else "DIFFER"
    lines.append(f"fp16 convolution backward on MPS: torch's own tests {skipped} it ({TORCH_MPS_TEST_LISTS}), "
                 f"perfsuite {guarded} fp16 training of convolutional models: {verdict}")
    if check.events_on_gpu is None:
        lines.append(f"MPS event stamps: cannot read them ({check.events_unread}): CANNOT JUDGE")
    else:
        stamped = "the GPU (GPUEndTime)" if check.events_on_gpu else "a host callback"
        read = "GPU stamps" if check.events_read_as_gpu else "host-callback stamps, after a drain"
        verdict = "agree" if check.events_on_gpu == check.events_read_as_gpu else "DIFFER"
        if check.facts_note and check.events_read_as_gpu:
            read += ", as assumed (until this release is read, perfsuite reads them after a drain)"
        lines.append(f"MPS event stamps: the wheel stamps them by {stamped}; perfsuite's facts take them for {read}: "
                     f"{verdict}")
    if check.passed and check.facts_note:
        lines.append(f"passed: the wheel agrees with what perfsuite assumes for torch {check.torch_version}; review "
                     "docs/coverage.md's list for a new release before adding it to the releases read")
    else:
        lines.append("passed" if check.passed else f"FAILED: {', '.join(failed_parts(check))}")
    return "\n".join(lines) + "\n"


def failed_parts(check: WheelCheck) -> list[str]:
    """What failed, in words, for the verdict line."""
    parts = []
    if check.disagreements:
        parts.append(f"{len(check.disagreements)} op(s) differ")
    if check.fallback_in_binary is None:
        parts.append("the fallback block could not be read")
    elif not check.fallback_agrees:
        parts.append("the fallback ops differ")
    if check.wheel_min_macos != check.table_min_macos:
        parts.append("the macOS differs")
    if check.fp16_convolution_skipped_by_torch != check.fp16_convolution_guarded:
        parts.append("the fp16 convolution guard differs")
    if check.events_on_gpu is None:
        parts.append("the event stamps could not be read")
    elif check.events_on_gpu != check.events_read_as_gpu:
        parts.append("the event stamps differ")
    return parts


def download_macos_wheel(torch_version: str, directory: Path) -> Path:
    """The macOS arm64 wheel of `torch_version` for this Python in `directory`, fetched with pip unless already
    there; WheelError when pip cannot fetch it."""
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    present = sorted(directory.glob(f"torch-{torch_version}-*macosx_*_arm64.whl"))
    if present:
        return present[0]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", f"torch=={torch_version}", "--no-deps", "--only-binary=:all:",
         "--platform", "macosx_15_0_arm64", "--python-version", python, "--dest", str(directory), "--quiet"],
        capture_output=True, text=True, check=False,
    )
    present = sorted(directory.glob(f"torch-{torch_version}-*macosx_*_arm64.whl"))
    if done.returncode != 0 or not present:
        tail = "\n".join(done.stderr.splitlines()[-5:])
        raise WheelError(f"pip could not download the macOS arm64 wheel of torch {torch_version} for Python "
                         f"{python}:\n{tail}\nDownload it yourself and pass --wheel.")
    return present[0]


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
    """Check `wheel` against perfsuite's facts for its release (see the module's docstring)."""
    import torch

    version = wheel_version(wheel.name)
    try:
        archive = zipfile.ZipFile(wheel)
        binary = archive.read(LIBRARY_IN_WHEEL)
        test_lists = archive.read(TORCH_MPS_TEST_LISTS).decode()
    except (OSError, zipfile.BadZipFile, KeyError) as error:
        raise WheelError(f"{wheel}: cannot read {LIBRARY_IN_WHEEL} and {TORCH_MPS_TEST_LISTS} from it ({error})"
                         ) from None
    with tempfile.TemporaryDirectory() as directory, archive:
        kernels, by_op = kernels_of(read_wheel_yaml(archive, Path(directory)))
    table = MpsSupportTable(kernels, load_mps_facts(), version)
    wrappers = mps_wrapper_names(binary)
    python_kernels = {fact.op for fact in table.facts.python_mps_kernels}
    image = read_macho(binary)
    try:
        fallback_in_binary: tuple[str, ...] | None = tuple(r.op for r in mps_fallback_block(image) if r.to_fallback)
        unread = ""
    except BinaryReadError as error:
        fallback_in_binary, unread = None, str(error)
    try:
        events_on_gpu: bool | None = events_stamped_on_gpu(image)
        events_unread = ""
    except BinaryReadError as error:
        events_on_gpu, events_unread = None, str(error)

    def compare(ops: Iterable[str]) -> tuple[OpAgreement, ...]:
        return tuple(compare_ops(ops, table.lookup, by_op, wrappers, python_kernels))

    release = parse_release(version)
    assumed = release if is_checked(release) else NEWEST_TORCH_CHECKED
    return WheelCheck(
        torch_version=version,
        wheel=wheel.name,
        traced_with=str(torch.__version__),
        model_ops=compare(model_ops(table.descend_key)),
        all_ops=compare(f"aten::{name}" for name in by_op),
        fallback_in_binary=fallback_in_binary,
        fallback_in_facts=tuple(fact.op for fact in facts_for_torch(load_mps_facts(), version).always_cpu_fallback),
        table_min_macos=min_macos_for_mps(release),
        wheel_tag_macos=wheel_macos_tag(wheel.name),
        binary_min_macos=mps_minimum_macos_in_binary(binary),
        fp16_convolution_skipped_by_torch=fp16_convolution_backward_skipped(test_lists),
        fp16_convolution_guarded=fp16_convolution_backward_may_abort(release),
        events_on_gpu=events_on_gpu,
        events_read_as_gpu=mps_gpu_event_times(assumed),
        facts_note=unchecked_note(release),
        fallback_unread=unread,
        events_unread=events_unread,
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m perfsuite.coverage.wheelcheck [--torch X | --wheel W.whl] [--into DIR]`: 0 when the wheel agrees,
    1 when it does not or cannot be judged, 2 when it cannot be had or read."""
    parser = argparse.ArgumentParser(
        prog="python -m perfsuite.coverage.wheelcheck", description=__doc__.splitlines()[0]
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=Path, help="a macOS arm64 torch wheel already downloaded")
    source.add_argument("--torch", metavar="VERSION", help="download this release's wheel (default: the installed "
                        "torch's release)")
    parser.add_argument("--into", type=Path, help="keep the downloaded wheel in this folder (and reuse one there)")
    args = parser.parse_args(argv)
    try:
        if args.wheel is not None:
            check = run_check(args.wheel)
        else:
            version = args.torch or installed_release()
            if args.into is not None:
                args.into.mkdir(parents=True, exist_ok=True)
                check = run_check(download_macos_wheel(version, args.into))
            else:
                with tempfile.TemporaryDirectory() as directory:
                    check = run_check(download_macos_wheel(version, Path(directory)))
    except (WheelError, ValueError) as error:
        sys.stderr.write(f"perfsuite wheel check: {error}\n")
        return 2
    sys.stdout.write(render_check(check))
    return 0 if check.passed else 1


def installed_release() -> str:
    """The installed torch's release, without a local build suffix: '2.13.0+cpu' -> '2.13.0'."""
    import torch

    return str(torch.__version__).split("+")[0]


if __name__ == "__main__":
    sys.exit(main())
