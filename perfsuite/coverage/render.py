"""Render coverage reports as text, markdown or JSON; rendering only, no decisions."""

from __future__ import annotations

import json

from perfsuite.coverage.assess import ModelCoverage, OpUsage
from perfsuite.coverage.check import ModelReport
from perfsuite.coverage.runtime import RuntimeCoverage
from perfsuite.coverage.support import Verdict

FORMATS = ("text", "md", "json")


def _summary(coverage: ModelCoverage) -> str:
    counts = {verdict: len(coverage.with_verdict(verdict)) for verdict in Verdict}
    parts = ", ".join(f"{counts[v]} {v.value}" for v in (Verdict.NATIVE, Verdict.COMPOSITE, Verdict.UNKNOWN,
                                                           Verdict.FALLBACK))
    return f"{len(coverage.ops)} ops: {parts}"


def _phases(usage: OpUsage) -> str:
    return ", ".join(f"{phase} {calls}" for phase, calls in usage.calls_by_phase)


def _result_line(report: ModelReport) -> str:
    fallbacks = report.coverage.fallbacks
    if not fallbacks:
        return "no op would fall back to the CPU"
    allowed = len(fallbacks) - len(report.unexpected)
    if not report.unexpected:
        return f"{allowed} CPU fallback(s), all allowed by the allowlist"
    return (f"{len(report.unexpected)} CPU fallback(s) not in the allowlist: "
            f"{', '.join(u.op for u in report.unexpected)}" + (f" ({allowed} allowed)" if allowed else ""))


def _runtime_lines(runtime: RuntimeCoverage | None) -> list[str]:
    if runtime is None:
        return []
    if runtime.skipped:
        return [f"runtime check on MPS: skipped ({runtime.skipped})"]
    lines = [f"runtime check on MPS (torch {runtime.torch_version}): "
             + (f"{len(runtime.findings)} finding(s)" if runtime.findings else "no CPU fallback seen")]
    lines += [f"  {f.op}: {f.phase} {f.calls} call(s), {f.evidence}" + (f": {f.message}" if f.message else "")
              for f in runtime.findings]
    if runtime.error:
        lines.append(f"  the run stopped: {runtime.error}")
    return lines


def render_text(reports: list[ModelReport], allowlist_source: str) -> str:
    """A plain-text report: per model a summary, then one row per op (worst verdict first) with calls per
    phase, and the reason and suggestion under each op that is not native or composite."""
    lines = [_header(reports, allowlist_source)]
    for report in reports:
        coverage = report.coverage
        title = f"{coverage.model} ({coverage.profile} profile, batch {coverage.batch_size})"
        lines += ["", f"{title}: {_summary(coverage)}"]
        lines.append(f"  {'verdict':<17} {'calls':>6}  {'op':<46} phases")
        for usage in coverage.ops:
            inside = f" (inside {', '.join(usage.inside)})" if usage.inside else ""
            lines.append(f"  {usage.verdict.value:<17} {usage.calls:>6}  {usage.op:<46} {_phases(usage)}{inside}")
            if usage.verdict in (Verdict.FALLBACK, Verdict.UNKNOWN):
                lines.append(f"      why: {usage.reason}")
            if usage.suggestion:
                lines.append(f"      suggestion: {usage.suggestion}")
        lines.append(f"  result: {_result_line(report)}")
        lines += [f"  {line}" for line in _runtime_lines(report.runtime)]
    return "\n".join(lines) + "\n"


def _header(reports: list[ModelReport], allowlist_source: str) -> str:
    version = reports[0].coverage.torch_version if reports else "?"
    note = reports[0].coverage.note if reports else None
    return (f"MPS operator coverage: torch {version}, ops traced on the CPU with the kernel choices MPS makes; "
            f"allowlist {allowlist_source}" + (f"\n{note}" if note else ""))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(reports: list[ModelReport], allowlist_source: str) -> str:
    """The same report as markdown: a section and a table per model."""
    lines = [f"## {_header(reports, allowlist_source)}"]
    for report in reports:
        coverage = report.coverage
        lines += ["", f"### {coverage.model}", "",
                  f"{coverage.profile} profile, batch {coverage.batch_size}: {_summary(coverage)}. "
                  f"Result: {_result_line(report)}.", ""]
        lines += ["| op | calls | phases | verdict | why / suggestion |", "|---|---:|---|---|---|"]
        for usage in coverage.ops:
            notes = []
            if usage.inside:
                notes.append(f"inside {', '.join(usage.inside)}")
            if usage.verdict is not Verdict.NATIVE:
                notes.append(usage.reason)
            if usage.suggestion:
                notes.append(f"suggestion: {usage.suggestion}")
            lines.append(f"| `{usage.op}` | {usage.calls} | {_phases(usage)} | {usage.verdict.value} | "
                         f"{_cell('; '.join(notes))} |")
        runtime = _runtime_lines(report.runtime)
        if runtime:
            lines += [""] + [f"- {_cell(line.strip())}" for line in runtime]
    return "\n".join(lines) + "\n"


def report_as_dict(reports: list[ModelReport], allowlist_source: str) -> dict:
    """The report as plain data (what `--format json` prints)."""
    return {
        "torch_version": reports[0].coverage.torch_version if reports else None,
        "allowlist": allowlist_source,
        "models": [_model_dict(report) for report in reports],
    }


def _model_dict(report: ModelReport) -> dict:
    coverage = report.coverage
    unexpected = {usage.op for usage in report.unexpected}
    runtime = report.runtime
    return {
        "model": coverage.model,
        "profile": coverage.profile,
        "batch_size": coverage.batch_size,
        "traced_on": coverage.traced_on,
        "note": coverage.note,
        "verdict_counts": {v.value: len(coverage.with_verdict(v)) for v in Verdict},
        "ops": [
            {
                "op": usage.op,
                "verdict": usage.verdict.value,
                "calls": usage.calls,
                "calls_by_phase": dict(usage.calls_by_phase),
                "inside": list(usage.inside),
                "reason": usage.reason,
                "suggestion": usage.suggestion,
                "allowed": usage.verdict is Verdict.FALLBACK and usage.op not in unexpected,
            }
            for usage in coverage.ops
        ],
        "unexpected_fallbacks": sorted(unexpected),
        "runtime": None if runtime is None else {
            "skipped": runtime.skipped,
            "torch_version": runtime.torch_version,
            "error": runtime.error,
            "findings": [vars(finding) for finding in runtime.findings],
            "unexpected": list(report.runtime_unexpected),
        },
    }


def render_json(reports: list[ModelReport], allowlist_source: str) -> str:
    """The report as indented JSON."""
    return json.dumps(report_as_dict(reports, allowlist_source), indent=2) + "\n"


def render(reports: list[ModelReport], allowlist_source: str, output_format: str) -> str:
    """The report in `output_format` (one of FORMATS)."""
    renderers = {"text": render_text, "md": render_markdown, "json": render_json}
    return renderers[output_format](reports, allowlist_source)
