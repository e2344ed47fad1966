"""How a bisect reads: a line per step, the finding in sentences, its Markdown (a CI job summary) and the record
(schema `perfsuite-bisect` version 1, which `perfsuite site --bisect` marks on the case pages)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from perfsuite.judge.bisect import Change, Finding, Judge, Position, Step
from perfsuite.render.escape import markdown_text, terminal_text

SCHEMA = "perfsuite-bisect"
SCHEMA_VERSION = 1
LOG_FILE = "bisect.log"
RECORD_FILE = "bisect.json"
SUMMARY_FILE = "bisect.md"
PURPOSES = {"reproduce": "does the slowdown reproduce?", "search": "search", "parent": "against its parent",
            "rest": "any further change after it?"}


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}%"


def reading_text(step: Step) -> str:
    """The step's status with its headline case's ratio, interval and floor."""
    case = step.headline
    if case is None or case.ratio is None:
        return step.status + (f" ({_last_line(step.reason)})" if step.reason else "")
    bounds = case.ci_low is not None and case.ci_high is not None
    interval = f" [{case.ci_low:.3f}, {case.ci_high:.3f}]" if bounds else ""
    several = f" ({case.benchmark_id} of {len(step.cases)} cases)" if len(step.cases) > 1 else ""
    return f"{step.status}: x{case.ratio:.3f}{interval}, floor {_percent(case.floor)}{several}"


def _last_line(reason: str) -> str:
    """The last line of a reason (pytest's says why; the whole tail is in the step's record and the log)."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    return lines[-1] if lines else reason


def range_line(positions: Sequence[Position]) -> str:
    return terminal_text(f"perfsuite bisect: {len(positions)} positions from good {positions[0].label} to bad "
                         f"{positions[-1].label}")


def asking_line(number: int, judge: Judge, positions: Sequence[Position]) -> str:
    attempt = f", attempt {judge.attempt} with x{judge.budget_scale:g} budget" if judge.attempt > 1 else ""
    return terminal_text(f"perfsuite bisect: step {number} ({PURPOSES[judge.purpose]}{attempt}): "
                         f"{positions[judge.head].label} against {positions[judge.base].label} ...")


def step_line(number: int, step: Step, positions: Sequence[Position]) -> str:
    head, base = positions[step.judge.head], positions[step.judge.base]
    return terminal_text(f"perfsuite bisect: step {number}: {_short(head)} against {_short(base)}: "
                         f"{reading_text(step)} ({step.seconds:.0f} s)")


def _short(position: Position) -> str:
    return position.commit[:12] if position.commit else f"torch {position.torch_version}"


def _when(position: Position) -> str:
    return f" ({position.author_date})" if position.author_date else ""


def _alone_step(change: Change, steps: Sequence[Step]) -> Step | None:
    """The last step that judged the change's first bad position against the one its ratio is given against."""
    return next((step for step in reversed(steps)
                 if (step.judge.head, step.judge.base) == (change.first_bad, change.against)), None)


def finding_lines(finding: Finding, steps: Sequence[Step], positions: Sequence[Position]) -> list[str]:
    """The finding in sentences (plain text; callers escape for where it goes)."""
    kind = "release" if positions[0].python else "commit"
    good, bad = positions[0], positions[-1]
    if finding.reproduced != "regressed":
        first = steps[-1] if steps else None
        floor = first.headline.floor if first and first.headline else None
        said = {"unchanged": "does not reproduce here", "improved": "does not reproduce here (it reads faster)",
                "inconclusive": "could not be judged here", "errored": "could not be measured"}[finding.reproduced]
        why = f": {first.reason}" if first and first.reason and finding.reproduced == "errored" else ""
        return [f"{_short(bad)} against {_short(good)} {said} (floor {_percent(floor)}){why}; "
                f"{reading_text(first) if first else ''}; nothing to bisect"]
    lines = []
    if len(finding.changes) > 1:
        lines.append(f"the range holds more than one change: {len(finding.changes)} {kind}s each make part of the "
                     "slowdown")
    for change in finding.changes:
        first_bad = positions[change.first_bad]
        step = _alone_step(change, steps)
        against = positions[change.against]
        relation = "its parent" if change.against == change.first_bad - 1 else "the nearest good one"
        ratio = (f"against {relation} {_short(against)}: {reading_text(step)}" if step
                 else "not judged against its parent")
        if change.single:
            lines.append(f"first bad {kind}: {first_bad.label}{_when(first_bad)}: {ratio}")
        else:
            named = ", ".join(positions[p].label for p in change.candidates)
            lines.append(f"first bad {kind} is one of {named} (the others could not be measured or judged): {ratio}")
        if change.alone in ("unchanged", "improved"):
            lines.append(f"gradual: {_short(first_bad)} alone is within the band; the slowdown builds up over several "
                         f"{kind}s and crosses the band there")
        elif change.alone in ("inconclusive", "errored"):
            lines.append(f"whether {_short(first_bad)} alone makes the slowdown could not be judged")
    if finding.after_last_change in ("inconclusive", "errored"):
        lines.append(f"whether more changes follow {_short(positions[finding.changes[-1].first_bad])} could not be "
                     "judged")
    for position in finding.errored:
        reason = next((s.reason for s in steps if s.judge.head == position and s.reason), None)
        lines.append(f"skipped, could not be measured (does not build or import?): {positions[position].label}"
                     + (f": {_last_line(reason)}" if reason else ""))
    for position in finding.undecided:
        lines.append(f"skipped, undecided after more budget: {positions[position].label}")
    lines.append(f"{len(steps)} A/B judgements, {sum(step.seconds for step in steps):.0f} s")
    return lines


def finding_text(finding: Finding, steps: Sequence[Step], positions: Sequence[Position]) -> str:
    """The finding for the terminal, a line each."""
    return "".join(f"perfsuite bisect: {terminal_text(line)}\n" for line in finding_lines(finding, steps, positions))


def bisect_markdown(finding: Finding, steps: Sequence[Step], positions: Sequence[Position]) -> str:
    """The finding and the chain of steps as Markdown (the CI job summary)."""
    lines = ["# perfsuite bisect", ""]
    lines += [f"- {markdown_text(line)}" for line in finding_lines(finding, steps, positions)]
    lines += ["", "| step | head | against | why | verdict |", "|---|---|---|---|---|"]
    for number, step in enumerate(steps, 1):
        head, base = positions[step.judge.head], positions[step.judge.base]
        lines.append(f"| {number} | {markdown_text(head.label)} | {markdown_text(_short(base))} | "
                     f"{PURPOSES[step.judge.purpose]} | {markdown_text(reading_text(step))} |")
    return "\n".join(lines) + "\n"


def bisect_document(finding: Finding, steps: Sequence[Step], positions: Sequence[Position], tracked: Sequence[str],
                    started_at: str) -> dict[str, Any]:
    """The bisect record: the range, the cases followed, every step with its verdict and floor, and the finding
    (each change with its first bad position, its candidates and its own judgement)."""
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "started_at": started_at,
        "positions": [asdict(position) for position in positions],
        "tracked_cases": list(tracked),
        "steps": [{"head": step.judge.head, "base": step.judge.base, "purpose": step.judge.purpose,
                   "attempt": step.judge.attempt, "budget_scale": step.judge.budget_scale, "status": step.status,
                   "seconds": step.seconds, "reason": step.reason, "summary": step.summary_path,
                   "cases": [asdict(case) for case in step.cases]} for step in steps],
        "finding": {
            "reproduced": finding.reproduced, "gradual": finding.gradual,
            "after_last_change": finding.after_last_change,
            "errored": list(finding.errored), "undecided": list(finding.undecided),
            "changes": [_change_document(change, steps) for change in finding.changes],
        },
        "sentences": finding_lines(finding, steps, positions),
    }


def _change_document(change: Change, steps: Sequence[Step]) -> Mapping[str, Any]:
    step = _alone_step(change, steps)
    return {"first_bad": change.first_bad, "candidates": list(change.candidates), "against": change.against,
            "alone": change.alone, "segment_good": change.segment_good,
            "cases": [asdict(case) for case in step.cases] if step else []}


def bisect_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=1) + "\n"
