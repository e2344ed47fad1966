"""How an A/B job reads: a sentence per verdict, the terminal table (with a few lines under each case whose ops
explain it), the summary document (schema `perfsuite-ab` version 3, which `perfsuite site --ab` shows; version 2,
without the conditions, and version 1, without `explanation` too, still read), its Markdown and a PNG of the ratios
with their intervals."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.judge.ab import AB_STATUSES, FAMILY_ERROR_RATE, JUDGED_STATUSES, AbVerdict
from perfsuite.judge.explain import OUTSIDE_OPS, Explanation, OpChange
from perfsuite.records import AbMeasurement, AbSide, Conditions, conditions_to_json
from perfsuite.render.conditions import change_text
from perfsuite.render.escape import markdown_text, plot_text, terminal_text

SCHEMA = "perfsuite-ab"
# Version 3 adds the job's conditions as it started (`conditions`), each block's readings (`conditions`), the blocks
# during which they changed (`changed_blocks`) and the verdict without those (`status_without_changed_blocks`).
SCHEMA_VERSION = 3
# Lines of an explanation under its case in the terminal table (ab.md and ab.json carry every line).
TERMINAL_EXPLANATION_LINES = 5
# Ops named in one line of calls changed, new or gone (the rest counted).
NAMED_OPS = 4


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g}"


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction * 100:.2g}%"


def interval_text(verdict: AbVerdict) -> str:
    if verdict.ratio is None:
        return "-"
    return f"x{verdict.ratio:.3f} [{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"


def ab_message(verdict: AbVerdict, inconclusive_fails: bool = True, no_base_fails: bool = False) -> str:
    """One sentence on the verdict: what changed, how sure, and what could be seen; for an inconclusive one, or a
    model the base does not have, whether it fails the job (`inconclusive_fails`, `no_base_fails`). Terminal text:
    the case's name and the reasons are escaped for it."""
    return terminal_text(_sentence(verdict, inconclusive_fails, no_base_fails))


def _sentence(verdict: AbVerdict, inconclusive_fails: bool, no_base_fails: bool) -> str:
    name, status = verdict.case.benchmark_id, verdict.status
    if status == "errored":
        return f"{name}: A/B could not judge it: " + "; ".join(verdict.reasons)
    if status == "interrupted":
        return f"{name}: interrupted, not judged (never a pass): " + "; ".join(verdict.reasons)
    if status == "no-base":
        effect = ("which fails the job (--perf-on-no-base fail)" if no_base_fails
                  else "not a pass and not a failure (--perf-on-no-base fail makes it fail the job)")
        return (f"{name}: no base: the base side does not have this model (a model the head adds?), so it was not "
                f"judged, {effect}: " + "; ".join(verdict.reasons))
    level = f"{100 * (1 - FAMILY_ERROR_RATE):.0f}% interval over {verdict.family_size} case(s)"
    where = (f"both sides in each of {verdict.processes} process(es)" if verdict.in_one_process
             else "each block a process pair")
    seen = (
        f"head/base {interval_text(verdict)} ({level}; {verdict.pairs} blocks, {where}, {verdict.windows} window "
        f"pairs, {verdict.seconds:.0f} s); detects >= {_percent(verdict.floor)} here, band "
        f"{_percent(verdict.tolerance)}"
    )
    sentence = {
        "regressed": "regressed: head is slower than base beyond the band",
        "improved": "improved: head is faster than base beyond the band",
        "unchanged": "; ".join(("unchanged", *verdict.reasons)),
        "inconclusive": (
            "inconclusive: the budget ran out before this job could tell a change of the band's size from noise, so "
            "it " + ("fails (a verdict that cannot judge is not a pass; --perf-on-inconclusive warn makes it a warning)"
                     if inconclusive_fails else "is only a warning (--perf-on-inconclusive warn)")
            + "; " + "; ".join(verdict.reasons)
        ),
    }[status]
    memory = ""
    if verdict.memory_status == "regressed":
        memory = (
            f"; memory regressed: {verdict.memory_figure} {verdict.base_memory_bytes} -> "
            f"{verdict.head_memory_bytes} bytes"
        )
    alone = ""
    if verdict.one_side_at_a_time_pairs:
        alone = (
            f"; both sides did not fit in device memory together, so {verdict.one_side_at_a_time_pairs} pair(s) "
            "measured one side at a time, in alternating blocks that each built the case anew (slower, and each "
            "block's value carries its build)"
        )
    return f"{name}: {sentence}, {seen}{memory}{alone}{changed_blocks_text(verdict)}"


def changed_blocks_text(verdict: AbVerdict) -> str:
    """What the blocks during which the conditions changed did to the verdict ('' where none did): each block with
    its changes, and whether the verdict rests on them."""
    if not verdict.changed_blocks:
        return ""
    blocks = "; ".join(
        f"block {block.block} ("
        + ", ".join(change_text(change, "the job started", "the block ran") for change in block.changes) + ")"
        for block in verdict.changed_blocks)
    them = "them" if len(verdict.changed_blocks) > 1 else "it"
    without = verdict.status_without_changed_blocks
    if without == "errored":
        effect = f"without {them} too few blocks are left to judge the case"
    elif verdict.conditions_moved_verdict:
        effect = f"the verdict rests on {them}: without {them} the case reads {without}"
    else:
        effect = f"without {them} the case reads {without} too"
    return f"; the conditions changed during {blocks}: {effect}"


TABLE_COLUMNS = ("case", "base ms", "head ms", "head/base [interval]", "floor", "verdict", "samples/s base -> head",
                 "output diff")


def table_rows(verdicts: Sequence[AbVerdict], measurements: Mapping[str, AbMeasurement]) -> list[tuple[str, ...]]:
    """A row of cells per case, in the order of `TABLE_COLUMNS`: base and head ms per step, the ratio with its
    interval, the floor, the verdict, samples/s on each side and the largest output difference. Names are as
    measured: each renderer escapes them for its target."""
    rows: list[tuple[str, ...]] = []
    for verdict in verdicts:
        measurement = measurements.get(verdict.case.benchmark_id)
        samples = measurement.pairs[0].head.samples_per_step if measurement and measurement.pairs else None
        rate = "-"
        if samples and verdict.base_median_s and verdict.head_median_s:
            rate = f"{samples / verdict.base_median_s:.4g} -> {samples / verdict.head_median_s:.4g}"
        difference = verdict.largest_output_difference
        rows.append((
            verdict.case.benchmark_id, _ms(verdict.base_median_s), _ms(verdict.head_median_s), interval_text(verdict),
            _percent(verdict.floor), verdict.status + (" (memory regressed)" if verdict.memory_status == "regressed"
                                                       else ""),
            rate, "-" if difference is None else f"{difference:.3g}",
        ))
    return rows


def render_table(verdicts: Sequence[AbVerdict], measurements: Mapping[str, AbMeasurement],
                 explanations: Mapping[str, Explanation] | None = None) -> str:
    """The terminal table of `table_rows`, its columns padded to their widest cell; under each case with an
    explanation its TERMINAL_EXPLANATION_LINES most telling lines, indented."""
    rows = [TABLE_COLUMNS, *([terminal_text(cell) for cell in row] for row in table_rows(verdicts, measurements))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    shown = [lines[0]]
    for verdict, line in zip(verdicts, lines[1:], strict=True):
        shown.append(line)
        explanation = (explanations or {}).get(verdict.case.benchmark_id)
        if explanation is not None:
            shown += [f"    {terminal_text(text)}" for text in terminal_explanation(explanation)]
    return "\n".join(shown) + "\n"


def _ms_change(seconds: float) -> str:
    return f"{seconds * 1e3:+.3g} ms"


def _calls(calls: float | None) -> str:
    if calls is None:
        return "?"
    return f"{calls:.0f}" if float(calls).is_integer() else f"{calls:.2g}"


def _op_line(change: OpChange) -> str:
    if change.name == OUTSIDE_OPS:
        return (f"host time outside ops (Python, hooks, waits): {_ms(change.base_s)} -> {_ms(change.head_s)} ms a "
                f"step, {_ms_change(change.change_s)}")
    calls = (f"calls {_calls(change.base_calls)} -> {_calls(change.head_calls)} a step"
             if change.base_calls != change.head_calls else f"{_calls(change.head_calls)} calls a step")
    return f"{change.name}: {calls}, {_ms(change.base_s)} -> {_ms(change.head_s)} ms, {_ms_change(change.change_s)}"


def _names(names: Sequence[str]) -> str:
    if not names:
        return "none"
    more = f" and {len(names) - NAMED_OPS} more" if len(names) > NAMED_OPS else ""
    return ", ".join(names[:NAMED_OPS]) + more


def explanation_lines(explanation: Explanation) -> list[tuple[int, str]]:
    """Every line of an explanation with its rank (0 the most telling), in reading order. Text as measured (names
    unescaped): each renderer escapes it for its target."""
    e = explanation
    basis = "device time (each op's own kernels)" if e.basis == "device" else "host self time"
    lines: list[tuple[int, str]] = [(0, f"why, by the ops ({basis} a step; {e.steps[0]} and {e.steps[1]} steps "
                                         f"profiled after the timing, against {e.against}):")]
    for index, change in enumerate(e.top):
        lines.append((1 if index == 0 else 5 + index, _op_line(change)))
    these = "these account" if len(e.top) > 1 else "this accounts"
    profiled_share = "" if e.profiled_share is None else f" ({e.profiled_share:.0%})"
    if e.basis == "device" and e.measured_change_s is not None:
        share = "" if e.explained_share is None else f" ({e.explained_share:.0%})"
        lines.append((2, f"{these} for {_ms_change(e.explained_s)} of the {_ms_change(e.measured_change_s)} a step "
                         f"measured{share}; the profiled device time changed by {_ms_change(e.profiled_change_s)}"))
    else:
        measured = ("" if e.measured_change_s is None else
                    f"; the timed steps changed by {_ms_change(e.measured_change_s)} (host times under the profiler "
                    "run higher than timed)")
        lines.append((2, f"{these} for {_ms_change(e.explained_s)} of the profiled steps' "
                         f"{_ms_change(e.profiled_change_s)}{profiled_share}{measured}"))
    if e.fallbacks_changed:
        lines.append((2, "MPS CPU fallbacks: " + ", ".join(
            f"{op} {'new, ' if base == 0 else 'gone, ' if head == 0 else ''}{_calls(base)} -> {_calls(head)} calls a "
            "step" for op, base, head in e.fallbacks_changed)))
    changed = [f"{c.name} {_calls(c.base_calls)} -> {_calls(c.head_calls)}" for c in e.calls_changed]
    lines.append((3, f"calls changed: {_names(changed)}; new ops: {_names(e.new_ops)}; gone: {_names(e.gone_ops)}"))
    if not any(change.name == OUTSIDE_OPS for change in e.top):
        base_s, head_s = e.host_outside_ops_s
        lines.append((4, _op_line(OpChange(OUTSIDE_OPS, None, None, base_s, head_s))))
    if e.copy_calls is not None:
        lines.append((9, f"copy ops (host-device copies among them): {_calls(e.copy_calls[0])} -> "
                         f"{_calls(e.copy_calls[1])} calls a step"))
    for region in e.regions:
        lines.append((9, f"region {region.name} (not attributable per op): {_ms(region.base_s)} -> "
                         f"{_ms(region.head_s)} ms a step"))
    lines += [(9, f"cannot say: {limit}") for limit in e.limits]
    return lines


def terminal_explanation(explanation: Explanation, limit: int = TERMINAL_EXPLANATION_LINES) -> list[str]:
    """The `limit` most telling lines of an explanation, in reading order (unescaped)."""
    lines = explanation_lines(explanation)
    kept = sorted(sorted(range(len(lines)), key=lambda index: lines[index][0])[:limit])
    return [lines[index][1] for index in kept]


def markdown_table(verdicts: Sequence[AbVerdict], measurements: Mapping[str, AbMeasurement]) -> str:
    """The rows of `table_rows` as a GitHub-flavoured Markdown table, each cell escaped for it."""
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += ["| " + " | ".join(markdown_text(cell) for cell in row) + " |"
              for row in table_rows(verdicts, measurements)]
    return "\n".join(lines) + "\n"


def side_lines(base: AbSide, head: AbSide, measuring: str | None = None) -> list[str]:
    """A line per side: its label, revision, Python and torch (as the sides state them: unescaped); then how the
    sides were measured (`measuring`), where given."""
    return [
        f"{name}: {side.label} ({side.revision or 'no git revision'}), python {side.python}, torch "
        f"{side.torch_version or 'unknown'}" for name, side in (("base", base), ("head", head))
    ] + ([f"measured: {measuring}"] if measuring else [])


def render_sides(base: AbSide, head: AbSide, measuring: str | None = None) -> str:
    """The sides for the terminal, a line each, and how they were measured."""
    return "".join(f"{terminal_text(line)}\n" for line in side_lines(base, head, measuring))


def measuring_text(in_one_process: bool, process_pairs_reason: str | None, spent_s: float,
                   budget_s: float | None, explaining_s: float | None = None, heap: str | None = None) -> str:
    """How the job measured: both sides in each warm process (and what it fixed of its heap, where it did), or
    process pairs and why; its seconds and budget, and of them the seconds spent profiling ops after the timed
    windows (`explaining_s`, where any were)."""
    how = ("both sides in each warm process, alternating windows" + (f" ({heap})" if heap else "") if in_one_process
           else f"each side in a process of its own (process pairs): {process_pairs_reason or 'as asked'}")
    explaining = (f", {explaining_s:.1f} s of them profiling ops after the timed windows (--perf-ab-explain)"
                  if explaining_s is not None else "")
    return how + f"; {spent_s:.0f} s of a {budget_s or 0:.0f} s budget (--perf-ab-budget){explaining}"


def outcome_line(verdicts: Sequence[AbVerdict], inconclusive_fails: bool = True, no_base_fails: bool = False) -> str:
    """The job's result in one line: 'perfsuite A/B passed: 2 unchanged', 'perfsuite A/B FAILED: 1 unchanged,
    1 inconclusive', 'perfsuite A/B INTERRUPTED: ...' (stopped before every case was decided) or 'perfsuite A/B
    judged nothing: 1 no-base'; counts in the order of AB_STATUSES."""
    counts = ", ".join(f"{count} {status}" for status in AB_STATUSES
                       if (count := sum(verdict.status == status for verdict in verdicts)))
    if any(verdict.status == "interrupted" for verdict in verdicts):
        outcome = "INTERRUPTED"
    elif any(verdict.fails_job(inconclusive_fails, no_base_fails) for verdict in verdicts):
        outcome = "FAILED"
    elif not any(verdict.status in JUDGED_STATUSES for verdict in verdicts):
        outcome = "judged nothing"
    else:
        outcome = "passed"
    return f"perfsuite A/B {outcome}: {counts or 'no case'}"


def summary_document(
    verdicts: Sequence[AbVerdict], measurements: Mapping[str, AbMeasurement], base: AbSide, head: AbSide,
    started_at: str, inconclusive_fails: bool = True, measuring: Mapping[str, Any] | None = None,
    no_base_fails: bool = False,
    explanations: Mapping[str, Explanation] | None = None, unexplained: Mapping[str, str] | None = None,
    conditions: Mapping[str, Conditions] | None = None,
) -> dict[str, Any]:
    """The A/B summary file's content: both sides, whether the job failed, and per case its verdict (and whether it
    fails the job), figures, every window pair, and its explanation by the ops (`explanation`: the whole diff and
    its lines; None where none was asked for, `explanation_error` saying why one asked for is missing); the
    machine's conditions by device as the job started, each block's readings, the blocks during which they changed
    and the verdict without those blocks."""

    def finite(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else value

    cases = []
    for verdict in verdicts:
        measurement = measurements.get(verdict.case.benchmark_id)
        case = verdict.case
        cases.append({
            "benchmark_id": case.benchmark_id,
            "case": {"device": case.device, "dtype": case.dtype, "model": case.model, "batch_size": case.batch_size,
                     "mode": case.mode, "profile": case.profile, "compile": case.compile},
            "status": verdict.status, "fails_job": verdict.fails_job(inconclusive_fails, no_base_fails),
            "message": ab_message(verdict, inconclusive_fails, no_base_fails),
            "base_median_s": verdict.base_median_s, "head_median_s": verdict.head_median_s,
            "ratio": verdict.ratio, "ci_low": verdict.ci_low, "ci_high": verdict.ci_high, "floor": verdict.floor,
            "tolerance": verdict.tolerance, "pairs": verdict.pairs, "blocks": verdict.pairs,
            "windows": verdict.windows, "processes": verdict.processes, "in_one_process": verdict.in_one_process,
            "seconds": verdict.seconds, "between_blocks": verdict.between_blocks,
            "within_block": verdict.within_block, "reasons": list(verdict.reasons),
            "largest_output_difference": finite(verdict.largest_output_difference),
            "outputs_differ_in_shape": verdict.largest_output_difference == math.inf,
            "memory_figure": verdict.memory_figure, "base_memory_bytes": verdict.base_memory_bytes,
            "head_memory_bytes": verdict.head_memory_bytes, "memory_status": verdict.memory_status,
            "model_files": {"base": measurement.sources[0], "head": measurement.sources[1]} if measurement else None,
            "process_pairs": [
                {"windows_s": [list(pair) for pair in process_pair.windows_s],
                 "one_side_at_a_time": process_pair.one_side_at_a_time,
                 "process": process_pair.process, "in_one_process": process_pair.in_one_process,
                 "warmup_s": {"base": process_pair.base_warmup_s, "head": process_pair.head_warmup_s},
                 "steps_per_round": {"base": process_pair.base.steps_per_round,
                                     "head": process_pair.head.steps_per_round},
                 "conditions": [conditions_to_json(reading) for reading in process_pair.conditions]}
                for process_pair in (measurement.pairs if measurement else ())
            ],
            "explanation": _explanation_document((explanations or {}).get(case.benchmark_id)),
            "explanation_error": (unexplained or {}).get(case.benchmark_id),
            "changed_blocks": [{"block": block.block, "changes": [
                {"fact": change.fact, "at_start": list(change.before), "in_block": list(change.after)}
                for change in block.changes]} for block in verdict.changed_blocks],
            "status_without_changed_blocks": verdict.status_without_changed_blocks,
        })
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "started_at": started_at,
        "base": {"label": base.label, "revision": base.revision, "python": base.python,
                 "torch_version": base.torch_version},
        "head": {"label": head.label, "revision": head.revision, "python": head.python,
                 "torch_version": head.torch_version},
        "family_error_rate": FAMILY_ERROR_RATE, "inconclusive_fails": inconclusive_fails,
        "no_base_fails": no_base_fails, "measuring": dict(measuring or {}),
        "conditions": {device: conditions_to_json(reading) for device, reading in (conditions or {}).items()},
        "interrupted": any(verdict.status == "interrupted" for verdict in verdicts),
        "job_failed": any(verdict.fails_job(inconclusive_fails, no_base_fails) for verdict in verdicts),
        "cases": cases,
    }


def _explanation_document(explanation: Explanation | None) -> dict[str, Any] | None:
    if explanation is None:
        return None
    return {**explanation.to_dict(), "lines": [text for _, text in explanation_lines(explanation)]}


def summary_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=1, allow_nan=False) + "\n"


def summary_markdown(verdicts: Sequence[AbVerdict], measurements: Mapping[str, AbMeasurement], base: AbSide,
                     head: AbSide, inconclusive_fails: bool = True, measuring: str | None = None,
                     no_base_fails: bool = False, explanations: Mapping[str, Explanation] | None = None) -> str:
    """The summary as Markdown (a CI job summary): the outcome, the sides and how they were measured, the table and
    a sentence per case, with every line of its explanation beneath it."""

    def explained(verdict: AbVerdict) -> str:
        explanation = (explanations or {}).get(verdict.case.benchmark_id)
        if explanation is None:
            return ""
        return "".join(f"  - {markdown_text(text)}\n" for _, text in explanation_lines(explanation))

    return (
        "# perfsuite A/B\n\n" + f"**{outcome_line(verdicts, inconclusive_fails, no_base_fails)}**\n\n"
        + "".join(f"- {markdown_text(line)}\n" for line in side_lines(base, head, measuring)) + "\n"
        + markdown_table(verdicts, measurements) + "\n"
        + "".join(f"- {markdown_text(ab_message(verdict, inconclusive_fails, no_base_fails))}\n{explained(verdict)}"
                  for verdict in verdicts)
    )


def write_ratio_plot(verdicts: Sequence[AbVerdict], path: Path) -> bool:
    """A PNG of each case's ratio with its interval and the band; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    judged = [v for v in verdicts if v.ratio is not None]
    figure, axes = plt.subplots(figsize=(8, 0.45 * max(len(judged), 1) + 1.5))
    colours = {"regressed": "tab:red", "improved": "tab:green", "unchanged": "tab:grey", "inconclusive": "tab:orange"}
    for row, verdict in enumerate(judged):
        assert verdict.ratio is not None and verdict.ci_low is not None and verdict.ci_high is not None
        axes.errorbar(verdict.ratio, row, xerr=[[verdict.ratio - verdict.ci_low], [verdict.ci_high - verdict.ratio]],
                      fmt="o", color=colours.get(verdict.status, "black"), capsize=3)
    axes.axvline(1.0, color="black", linewidth=0.8)
    if judged:
        band = judged[0].tolerance
        axes.axvspan(1 / (1 + band), 1 + band, color="tab:blue", alpha=0.08, label=f"band ±{band:.0%}")
        axes.legend(loc="lower right", fontsize=7)
    axes.set_yticks(range(len(judged)), [plot_text(v.case.benchmark_id) for v in judged], fontsize=7)
    axes.set_xlabel(f"head / base time per step (simultaneous {100 * (1 - FAMILY_ERROR_RATE):.0f}% intervals)")
    axes.set_title("perfsuite A/B")
    figure.tight_layout()
    tmp = path.with_name(path.name + ".partial")
    figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)
    tmp.replace(path)
    return True
