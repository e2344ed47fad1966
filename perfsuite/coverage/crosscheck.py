"""Check the MPS support table against a source nobody here wrote: the lists of ops torch's own MPS tests
expect to fail (torch/testing/_internal/common_mps.py).

That module builds its lists only where MPS is available, so its text is read with `ast`, not imported.
The claims checked are those that an op lacks an MPS implementation for every dtype:
- UNIMPLEMENTED_XFAILLIST entries whose dtypes are None (all dtypes);
- XFAILLIST_GRAD entries under its "Unimplemented ops" comment (backward);
- ON_MPS_XFAILLIST entries under "lack of implementation of downstream functions".
Each list names OpInfos (`op.name + op.variant_test_name`), not aten ops, so every claimed OpInfo's sample
inputs are run on the CPU under the tracer (as the workloads are) and the worst verdict of the aten ops
they reach is compared with the claim. Needs torch's test utilities (they import `expecttest`).

`python -m perfsuite.coverage.crosscheck` prints the comparison as markdown.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfsuite.coverage.support import OpSupport

FORWARD_LIST = "UNIMPLEMENTED_XFAILLIST"
GRAD_LIST = "XFAILLIST_GRAD"
DOWNSTREAM_LIST = "ON_MPS_XFAILLIST"
_LISTS = (FORWARD_LIST, GRAD_LIST, DOWNSTREAM_LIST)


@dataclass(frozen=True)
class ListEntry:
    """One entry of a list in common_mps.py: `dtypes` None means every dtype; `section` is the comment
    block that heads the entry's group (its first line)."""

    list_name: str
    function: str
    key: str
    dtypes: tuple[str, ...] | None
    section: str


@dataclass(frozen=True)
class Comparison:
    """A claim of common_mps.py against the table's verdict for the ops the OpInfo's samples reach."""

    entry: ListEntry
    verdict: str
    fallback_ops: tuple[str, ...]
    agrees: bool
    detail: str = ""


def read_xfail_lists(source: str) -> list[ListEntry]:
    """Every entry of the three lists in common_mps.py's text, with its dtypes and section comment."""
    lines = source.splitlines()
    entries = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            if not (isinstance(target, ast.Name) and target.id in _LISTS and isinstance(value, ast.Dict)):
                continue
            section = ""
            previous_line = value.lineno
            for key, item in zip(value.keys, value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):  # None: a `**` entry
                    raise ValueError(f"{target.id} near line {previous_line}: a key that is not an op name in quotes")
                comment = _comment_block_above(lines, key.lineno, previous_line)
                section = comment or section
                previous_line = key.lineno
                dtypes = None if isinstance(item, ast.Constant) and item.value is None else tuple(
                    element.attr for element in getattr(item, "elts", []) if isinstance(element, ast.Attribute)
                )
                entries.append(ListEntry(target.id, function.name, key.value, dtypes, section))
    return entries


def _comment_block_above(lines: list[str], line_number: int, stop_line: int) -> str:
    """The first line of the full-line comment block right above `line_number` (1-based), '' if none."""
    block = []
    index = line_number - 2
    while index >= stop_line and lines[index].strip().startswith("#"):
        text = lines[index].strip().lstrip("#").strip()
        # A commented-out entry ('# "kthvalue": None,') is not a heading.
        if not text.startswith('"'):
            block.append(text)
        index -= 1
    return block[-1] if block else ""


def claims_missing_op(entry: ListEntry) -> bool:
    """Whether `entry` says the op lacks an MPS implementation for every dtype (the claims checked here)."""
    if entry.list_name == FORWARD_LIST:
        return entry.dtypes is None
    if entry.list_name == GRAD_LIST:
        # The grad tests run float16 and float32; an entry for one of them only is a dtype claim.
        every_dtype = entry.dtypes is None or {"float16", "float32"} <= set(entry.dtypes)
        return every_dtype and entry.section.lower().startswith("unimplemented ops")
    return "lack of implementation" in entry.section.lower()


def common_mps_path() -> Path:
    """torch/testing/_internal/common_mps.py of the installed torch."""
    import torch

    return Path(torch.__file__).parent / "testing" / "_internal" / "common_mps.py"


def compare(
    entry: ListEntry,
    opinfos: dict,
    lookup: Callable[[str], OpSupport],
    descend_key: Callable[[str], str | None],
    samples: int = 50,
) -> Comparison:
    """Run up to `samples` sample inputs of the entry's OpInfo (float32 where it has that dtype) on the CPU
    under the tracer, backward too for the grad list, and compare the worst verdict with the claim."""
    import torch

    from perfsuite.coverage.support import Verdict
    from perfsuite.coverage.trace import OpRecorder, mps_like_choices

    opinfo = opinfos.get(entry.key)
    if opinfo is None:
        return Comparison(entry, "-", (), False, "no OpInfo of that name in this torch")
    dtypes = opinfo.supported_dtypes("cpu")
    dtype = torch.float32 if torch.float32 in dtypes else next(iter(sorted(dtypes, key=str)), torch.float32)
    backward = entry.list_name == GRAD_LIST
    recorder = OpRecorder(descend_key)
    recorder.phase = "train/backward" if backward else "infer/forward"
    try:
        with mps_like_choices():
            for index, sample in enumerate(opinfo.sample_inputs("cpu", dtype, requires_grad=backward)):
                if index >= samples:
                    break
                with recorder:
                    result = opinfo(sample.input, *sample.args, **sample.kwargs)
                    if backward:
                        outputs = [t for t in _tensors(result) if t.requires_grad]
                        if outputs:
                            torch.autograd.backward([t.sum() for t in outputs])
    except Exception as error:  # an OpInfo sample that cannot run on the CPU says nothing about MPS
        detail = f"sample did not run on the CPU: {type(error).__name__}: {error}"
        return Comparison(entry, "-", (), False, detail[:200])
    verdicts = {count.op: lookup(count.op).verdict for count in recorder.counts()}
    if not verdicts:
        return Comparison(entry, "-", (), False, "the samples reached no aten op")
    worst = max(verdicts.values(), key=lambda verdict: verdict.rank)
    fallbacks = tuple(sorted(op for op, verdict in verdicts.items() if verdict is Verdict.FALLBACK))
    return Comparison(entry, worst.value, fallbacks, worst is Verdict.FALLBACK)


def _tensors(value: object) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def run_crosscheck() -> list[Comparison]:
    """Compare every op-level claim of the installed torch's common_mps.py with the installed table."""
    from torch.testing._internal.common_methods_invocations import op_db

    from perfsuite.coverage.support import installed_mps_support_table

    table = installed_mps_support_table()
    opinfos = {opinfo.name + opinfo.variant_test_name: opinfo for opinfo in op_db}
    claims = [e for e in read_xfail_lists(common_mps_path().read_text()) if claims_missing_op(e)]
    seen, comparisons = set(), []
    for entry in claims:
        if (entry.list_name, entry.key) not in seen:
            seen.add((entry.list_name, entry.key))
            comparisons.append(compare(entry, opinfos, table.lookup, table.descend_key))
    return comparisons


def render_markdown(comparisons: list[Comparison], out_of_scope: int) -> str:
    """The comparison as a markdown table with the agreement count."""
    checked = [c for c in comparisons if c.verdict != "-"]
    agreed = sum(c.agrees for c in checked)
    lines = [
        f"{len(comparisons)} op-level claims; {len(checked)} could be traced; the table agrees on {agreed} of "
        f"them ({len(checked) - agreed} disagreements); {len(comparisons) - len(checked)} not traceable; "
        f"{out_of_scope} dtype-only entries of {FORWARD_LIST} out of scope.",
        "",
        "| list | OpInfo | verdict | fallback ops | agrees |",
        "|---|---|---|---|---|",
    ]
    for c in comparisons:
        note = c.detail or ", ".join(f"`{op}`" for op in c.fallback_ops)
        lines.append(f"| {c.entry.list_name} | `{c.entry.key}` | {c.verdict} | {note.replace('|', '/')} | "
                     f"{'yes' if c.agrees else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Print the cross-check as markdown."""
    entries = read_xfail_lists(common_mps_path().read_text())
    out_of_scope = sum(1 for e in entries if e.list_name == FORWARD_LIST and e.dtypes is not None)
    sys.stdout.write(render_markdown(run_crosscheck(), out_of_scope))
    return 0


if __name__ == "__main__":
    sys.exit(main())
