"""Rendering verdicts: a terminal table, JSON for machines and markdown for a CI job to post.

Pure functions from a list of `Verdict` to text; nothing here decides anything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from perfsuite.judge.verdicts import VERDICT_STATUSES, Verdict
from perfsuite.records import format_seconds
from perfsuite.store.baselines import RECORD_COMMAND

VERDICTS_SCHEMA = "perfsuite-verdicts"
VERDICTS_SCHEMA_VERSION = 1
COLUMNS = ("benchmark", "verdict", "baseline", "current", "ratio", "normalised", "CI", "p", "band", "memory")


def _order(verdict: Verdict) -> tuple[int, int, str]:
    # Failures first, then in the order of VERDICT_STATUSES, then by id, so the table reads top-down.
    return (0 if verdict.gate_failed else 1, VERDICT_STATUSES.index(verdict.status), verdict.benchmark_id)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"x{value:.3f}"


def _memory(verdict: Verdict) -> str:
    if verdict.memory_status == "not-compared":
        return "-"
    return f"{_ratio(verdict.memory_ratio)} {verdict.memory_status}"


def summary_counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """How many verdicts have each status, plus `memory-regressed` and `gate-failed`; zero counts included."""
    counts = {status: sum(v.status == status for v in verdicts) for status in VERDICT_STATUSES}
    counts["memory-regressed"] = sum(v.memory_status == "regressed" for v in verdicts)
    counts["gate-failed"] = sum(v.gate_failed for v in verdicts)
    return counts


def headline(verdicts: Sequence[Verdict]) -> str:
    """One line: whether the gate failed and the non-zero counts, e.g.
    `perfsuite gate FAILED: 1 regressed, 3 unchanged, 2 no-baseline`."""
    if not verdicts:
        return "perfsuite gate: no benchmarks were judged"
    counts = summary_counts(verdicts)
    parts = [f"{counts[name]} {name}" for name in (*VERDICT_STATUSES, "memory-regressed") if counts[name]]
    state = "FAILED" if counts["gate-failed"] else "passed"
    return f"perfsuite gate {state}: {', '.join(parts)}"


def verdict_rows(verdicts: Sequence[Verdict]) -> list[dict[str, str]]:
    """One row of display text per verdict, failures first; the columns are `COLUMNS`."""
    rows = []
    for verdict in sorted(verdicts, key=_order):
        interval = "-" if verdict.ci_low is None else f"[{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"
        rows.append({
            "benchmark": verdict.benchmark_id,
            "verdict": verdict.status,
            "baseline": format_seconds(verdict.baseline_median_s),
            "current": format_seconds(verdict.current_median_s),
            "ratio": _ratio(verdict.ratio),
            "normalised": _ratio(verdict.normalised_ratio),
            "CI": interval,
            "p": "-" if verdict.p_value is None else f"{verdict.p_value:.2g}",
            "band": f"+-{verdict.tolerance * 100:g}%",
            "memory": _memory(verdict),
        })
    return rows


def _details(verdicts: Sequence[Verdict]) -> list[str]:
    """The messages worth reading in full: failures, improvements, incompatibilities, too few rounds."""
    worth = [v for v in sorted(verdicts, key=_order) if v.gate_failed or v.status not in ("unchanged", "no-baseline")]
    lines = [v.message for v in worth]
    if any(v.status == "no-baseline" for v in verdicts):
        lines.append(f"benchmarks without a baseline are not gated; record them with `{RECORD_COMMAND}`")
    return lines


def render_terminal(verdicts: Sequence[Verdict]) -> str:
    """The headline, a fixed-width table (medians in readable units) and the messages that need reading."""
    if not verdicts:
        return headline(verdicts) + "\n"
    table = pd.DataFrame(verdict_rows(verdicts), columns=list(COLUMNS)).to_string(index=False)
    details = "".join(f"  {line}\n" for line in _details(verdicts))
    return f"{headline(verdicts)}\n{table}\n" + (f"\n{details}" if details else "")


def render_json(verdicts: Sequence[Verdict]) -> str:
    """A JSON document: schema, whether the gate failed, the counts and every verdict (seconds, bytes)."""
    document = {
        "schema": VERDICTS_SCHEMA,
        "schema_version": VERDICTS_SCHEMA_VERSION,
        "gate_failed": any(v.gate_failed for v in verdicts),
        "counts": summary_counts(verdicts),
        "verdicts": [v.to_dict() for v in sorted(verdicts, key=_order)],
    }
    return json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"


def _cell(text: str) -> str:
    # A pipe would end the cell; a newline would end the row.
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(verdicts: Sequence[Verdict]) -> str:
    """A markdown report for a pull-request comment: the headline in bold, a table, and the messages."""
    lines = [f"**{headline(verdicts)}**", ""]
    if not verdicts:
        return "\n".join(lines)
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in verdict_rows(verdicts):
        lines.append("| " + " | ".join(_cell(row[column]) for column in COLUMNS) + " |")
    details = _details(verdicts)
    if details:
        lines += ["", *(f"- {_cell(line)}" for line in details)]
    return "\n".join(lines) + "\n"
