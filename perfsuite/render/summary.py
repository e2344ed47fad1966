"""Rendering verdicts: a terminal table, JSON for machines and markdown for a CI job to post.

Pure functions from a list of `Verdict` (and each verdict's explanation by the ops against its history, where there
is one) to text; nothing here decides anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pandas as pd

from perfsuite.judge.explain import Explanation
from perfsuite.judge.verdicts import VERDICT_STATUSES, Verdict
from perfsuite.records import Conditions, conditions_to_json
from perfsuite.render.ab import explanation_lines, terminal_explanation
from perfsuite.render.conditions import conditions_text
from perfsuite.render.escape import markdown_text, terminal_text
from perfsuite.render.units import format_bytes, format_ratio, format_seconds
from perfsuite.render.verdicts import RECORD_COMMAND, verdict_message

VERDICTS_SCHEMA = "perfsuite-verdicts"
# Version 4 adds each verdict's explanation by the ops (`explanation`, `explanation_note`); version 5 the session's
# conditions by device (`conditions`), each verdict's judgement of them (`conditions`) and the conditions-differ status.
VERDICTS_SCHEMA_VERSION = 5
# A verdict's explanation by the ops against its history, or the one line saying why there is none.
Explained = Explanation | str
COLUMNS = (
    "benchmark", "verdict", "baseline", "current", "ratio", "CI", "p", "runs", "band", "detects", "samples/s",
    "memory", "memory change",
)
LEGEND = (
    "ratio: median of the current runs' median times over the baseline runs'; CI: its interval at the test's "
    "level; p: one-sided Mann-Whitney test on the run medians; runs: current vs baseline processes; band: the "
    "smallest change that matters; detects: the smallest slowdown called with 95% power given these runs (the "
    "floor); uncalibrated: too few runs for p < 0.01 to be possible, only a change x2 beyond the slowest "
    "baseline run fails; memory: the case's own figure (CUDA peak allocated, or a fresh process's peak RSS), "
    "'-' where not its own. "
    "launch-bound: under half the step is GPU kernels, so it measures the host CPU and Python as much as the GPU."
)


def _order(verdict: Verdict) -> tuple[int, int, str]:
    # Failures first, then in the order of VERDICT_STATUSES, then by id, so the table reads top-down.
    return (0 if verdict.gate_failed else 1, VERDICT_STATUSES.index(verdict.status), verdict.benchmark_id)


def _memory(verdict: Verdict) -> str:
    if verdict.memory_status == "not-compared":
        return "-"
    return f"{format_ratio(verdict.memory_ratio)} {verdict.memory_status}"


def summary_counts(verdicts: Sequence[Verdict], errors: int = 0) -> dict[str, int]:
    """How many verdicts have each status, plus `memory-regressed`, `errored` (cases that failed before a
    verdict) and `gate-failed`; zero counts included."""
    counts: dict[str, int] = {status: sum(v.status == status for v in verdicts) for status in VERDICT_STATUSES}
    counts["memory-regressed"] = sum(v.memory_status == "regressed" for v in verdicts)
    counts["errored"] = errors
    counts["gate-failed"] = sum(v.gate_failed for v in verdicts) + errors
    return counts


def judged(verdict: Verdict) -> bool:
    """Whether the gate compared this case with a history: not a case without one, nor one changed against its
    history that only warns (`--perf-on-change warn`)."""
    return verdict.status != "no-baseline" and (verdict.status != "incompatible" or verdict.gate_failed)


def headline(verdicts: Sequence[Verdict], errors: int = 0) -> str:
    """One line: whether the gate failed and the non-zero counts, the cases it could not judge apart, e.g.
    `perfsuite gate FAILED: 1 regressed, 3 unchanged, 1 errored; not judged: 2 no-baseline`. Where no case was
    judged and none failed, it says so rather than that the gate passed."""
    if not verdicts and not errors:
        return "perfsuite gate: no benchmarks were judged"
    counts = summary_counts([verdict for verdict in verdicts if judged(verdict)], errors)
    parts = [f"{counts[name]} {name}" for name in (*VERDICT_STATUSES, "memory-regressed", "errored") if counts[name]]
    unjudged = summary_counts([verdict for verdict in verdicts if not judged(verdict)])
    not_judged = ", ".join(f"{unjudged[name]} {name}" for name in VERDICT_STATUSES if unjudged[name])
    if not parts:
        return f"perfsuite gate judged nothing: {not_judged}"
    state = "FAILED" if counts["gate-failed"] else "passed"
    return f"perfsuite gate {state}: {', '.join(parts)}" + (f"; not judged: {not_judged}" if not_judged else "")


def verdict_rows(verdicts: Sequence[Verdict]) -> list[dict[str, str]]:
    """One row of display text per verdict, failures first; the columns are `COLUMNS`. The benchmark ids are as
    measured: each renderer escapes them for its target."""
    rows = []
    for verdict in sorted(verdicts, key=_order):
        interval = "-" if verdict.ci_low is None else f"[{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"
        floor = verdict.detectable_slowdown
        rows.append({
            "benchmark": verdict.benchmark_id + (" (launch-bound)" if verdict.launch_bound else ""),
            "verdict": verdict.status,
            "baseline": format_seconds(verdict.baseline_median_s),
            "current": format_seconds(verdict.current_median_s),
            "ratio": format_ratio(verdict.ratio),
            "CI": interval,
            "p": "-" if verdict.p_value is None else f"{verdict.p_value:.2g}",
            "runs": f"{verdict.current_runs}/{'-' if verdict.baseline_runs is None else verdict.baseline_runs}",
            "band": f"+-{verdict.tolerance * 100:g}%",
            "detects": "-" if floor is None else f">={floor * 100:.3g}%",
            "samples/s": f"{verdict.samples_per_s:.4g}",
            "memory": format_bytes(verdict.current_memory_bytes),
            "memory change": _memory(verdict),
        })
    return rows


def explained_lines(explained: Explained) -> list[str]:
    """Every line of a verdict's explanation by the ops (unescaped), or the one line saying why it has none."""
    if isinstance(explained, str):
        return [explained]
    return [text for _, text in explanation_lines(explained)]


def _explanation_shown(explained: Explained | None, every_line: bool) -> list[str]:
    """The lines under a case: none, the one line of a note, or an explanation's most telling lines (the terminal)
    or all of them."""
    if explained is None:
        return []
    if isinstance(explained, str) or every_line:
        return explained_lines(explained)
    return terminal_explanation(explained)


def _details(
    verdicts: Sequence[Verdict], explained: Mapping[str, Explained] | None = None, every_line: bool = False,
) -> list[tuple[str, list[str]]]:
    """The messages worth reading in full (failures, improvements, incompatibilities, too few rounds, and any case
    with an explanation by the ops), each with the lines of its explanation beneath it."""
    explained = explained or {}
    worth = [v for v in sorted(verdicts, key=_order)
             if v.gate_failed or v.status not in ("unchanged", "no-baseline") or v.benchmark_id in explained]
    lines = [(verdict_message(v), _explanation_shown(explained.get(v.benchmark_id), every_line)) for v in worth]
    if any(v.status == "no-baseline" for v in verdicts):
        lines.append((f"benchmarks without a baseline are not gated; record them with `{RECORD_COMMAND}`", []))
    return lines


def _error_lines(errors: Mapping[str, str]) -> list[str]:
    return [f"{benchmark_id} errored: {message.strip().splitlines()[0] if message.strip() else '?'}"
            for benchmark_id, message in sorted(errors.items())]


def render_terminal(verdicts: Sequence[Verdict], errors: Mapping[str, str] | None = None,
                    explained: Mapping[str, Explained] | None = None) -> str:
    """The headline, a fixed-width table (medians in readable units), the messages that need reading with the most
    telling lines of each explanation by the ops beneath its case, the cases that errored and the legend."""
    errors = errors or {}
    if not verdicts:
        return headline(verdicts, len(errors)) + "\n" + "".join(
            f"  {terminal_text(line)}\n" for line in _error_lines(errors))
    table = pd.DataFrame(verdict_rows(verdicts), columns=list(COLUMNS)).map(terminal_text).to_string(index=False)
    details = "".join(
        f"  {terminal_text(line)}\n" + "".join(f"    {terminal_text(text)}\n" for text in beneath)
        for line, beneath in [*_details(verdicts, explained), *((line, []) for line in _error_lines(errors))]
    )
    return f"{headline(verdicts, len(errors))}\n{table}\n" + (f"\n{details}" if details else "") + f"\n{LEGEND}\n"


def render_json(verdicts: Sequence[Verdict], errors: Mapping[str, str] | None = None,
                explained: Mapping[str, Explained] | None = None,
                conditions: Mapping[str, Conditions] | None = None) -> str:
    """A JSON document: schema, whether the gate failed, the counts, the machine's conditions by device as the
    session started, every verdict (seconds, bytes) with its explanation by the ops (`explanation`: the whole diff
    and its lines, or None; `explanation_note`: why a case that asked for one has none) and its conditions'
    judgement, and the cases that errored with their messages."""
    errors = errors or {}
    explained = explained or {}
    counts = summary_counts(verdicts, len(errors))
    document = {
        "schema": VERDICTS_SCHEMA,
        "schema_version": VERDICTS_SCHEMA_VERSION,
        "gate_failed": counts["gate-failed"] > 0,
        "counts": counts,
        "conditions": {device: conditions_to_json(reading) for device, reading in (conditions or {}).items()},
        "verdicts": [
            {**v.to_dict(), "message": verdict_message(v), **_explanation_fields(explained.get(v.benchmark_id))}
            for v in sorted(verdicts, key=_order)
        ],
        "errors": dict(sorted(errors.items())),
    }
    return json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"


def _explanation_fields(explained: Explained | None) -> dict[str, object]:
    if explained is None or isinstance(explained, str):
        return {"explanation": None, "explanation_note": explained}
    return {"explanation": {**explained.to_dict(), "lines": explained_lines(explained)}, "explanation_note": None}


def render_markdown(verdicts: Sequence[Verdict], errors: Mapping[str, str] | None = None,
                    explained: Mapping[str, Explained] | None = None,
                    conditions: Mapping[str, Conditions] | None = None) -> str:
    """A markdown report for a pull-request comment: the headline in bold, the machine's conditions as the session
    started, a table, the messages with every line of each explanation by the ops beneath its case, the legend."""
    errors = errors or {}
    lines = [f"**{headline(verdicts, len(errors))}**", ""]
    if conditions:
        lines += [f"- conditions ({markdown_text(device)}): {markdown_text(conditions_text(reading))}"
                  for device, reading in conditions.items()] + [""]
    if not verdicts:
        return "\n".join(lines + [f"- {markdown_text(line)}" for line in _error_lines(errors)]) + "\n"
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in verdict_rows(verdicts):
        lines.append("| " + " | ".join(markdown_text(row[column]) for column in COLUMNS) + " |")
    details = [*_details(verdicts, explained, every_line=True), *((line, []) for line in _error_lines(errors))]
    if details:
        lines.append("")
        for line, beneath in details:
            lines += [f"- {markdown_text(line)}", *(f"  - {markdown_text(text)}" for text in beneath)]
    lines += ["", f"_{markdown_text(LEGEND)}_"]
    return "\n".join(lines) + "\n"
