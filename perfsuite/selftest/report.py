"""docs/measurement-quality.md from selftest files: pure rendering of their figures, no measuring.

`render_report(documents)` takes the parsed `selftest-*.json` documents (perfsuite/selftest/measure.py) and
returns the markdown; `target_rows` and `band_choice` are the judgements the report states, kept apart so
they are tested on their own.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.records import format_seconds

FALSE_ALARM_TARGET = 0.01
DETECTION_TARGET = 0.95
GPU_ACCURACY_TARGET = 0.02
OVERHEAD_TARGET = 0.01
DEFAULT_BAND_KEY = "0.10"
CHAIN_NAME = "matmul-chain"
RULES = (("gate", "gate"), ("raw", "gate, no reference"), ("normalised", "gate, reference alone"),
         ("pytest_benchmark", "pytest-benchmark median:N%"))


@dataclass(frozen=True)
class TargetRow:
    """One target judged on one run: what, the figure as text, and whether it was met."""

    run: str
    target: str
    subject: str
    figure: str
    met: bool | None


def run_label(document: Mapping[str, Any]) -> str:
    """How the report names a run: the device and its accelerator or CPU; on the CPU also the thread count,
    the load average when it started and the busy processes the run added."""
    machine = document.get("machine") or {}
    device = document["device"]
    plan = document.get("plan") or {}
    name = machine.get("accelerator_name") if device == "cuda" else machine.get("cpu_model")
    label = f"{device}" + (f" ({name})" if name else "")
    if device != "cpu":
        return label
    threads = plan.get("threads")
    used = threads or (document.get("probe") or {}).get("torch_threads")
    label += f", {used} thread{'s' if used != 1 else ''}" if used else ""
    label += "" if threads else " (torch's default)"
    label += f", load {document.get('load_average_before', 0):.1f}"
    if plan.get("contention"):
        label += f", +{plan['contention']} busy processes"
    return label


def percent(fraction: float | None, digits: int = 1) -> str:
    """0.0123 -> `1.2%`; `-` for None."""
    return "-" if fraction is None else f"{fraction * 100:.{digits}f}%"


def signed_percent(fraction: float | None) -> str:
    """A relative difference: 0.0123 -> `+1.2%`; `-` for None."""
    return "-" if fraction is None else f"{fraction * 100:+.1f}%"


def rate_text(counts: Mapping[str, int], outcome: str = "regressed") -> str:
    """`3/210 (1.4%)`: pairs with `outcome` over pairs judged."""
    pairs = counts.get("pairs", 0)
    if not pairs:
        return "no pairs"
    return f"{counts[outcome]}/{pairs} ({percent(counts[outcome] / pairs)})"


def fraction(counts: Mapping[str, int], outcome: str = "regressed") -> float | None:
    """The share of judged pairs with `outcome`; None when no pair was judged."""
    return counts[outcome] / counts["pairs"] if counts.get("pairs") else None


def relative_difference(value: float | None, reference: float | None) -> float | None:
    """value / reference - 1; None when either is missing or the reference is not > 0."""
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference - 1


INTERLEAVED_SUFFIX = "~interleaved"


def _sets(document: Mapping[str, Any], interleaved: bool) -> dict[str, Mapping[str, Any]]:
    sets = document["analysis"]["sets"]
    return {name: s for name, s in sets.items() if name.endswith(INTERLEAVED_SUFFIX) == interleaved}


def unchanged_sets(document: Mapping[str, Any], interleaved: bool = False) -> dict[str, Mapping[str, Any]]:
    """The comparison sets of unchanged cases (every flag a false alarm), by name; the runner's way of
    timing the reference, or with `interleaved` the experiment's."""
    return {name: s for name, s in _sets(document, interleaved).items() if not s["extra_blocks"]}


def slowdown_sets(document: Mapping[str, Any], interleaved: bool = False) -> dict[float, Mapping[str, Any]]:
    """The comparison sets of the slowed chain, by nominal slowdown (0.15 for 3 extra blocks on 20)."""
    return {
        s["extra_blocks"] / 20: s for s in _sets(document, interleaved).values() if s["extra_blocks"] and s["pairs"]
    }


def gpu_reference_s(row: Mapping[str, Any]) -> float | None:
    """The profiler's GPU time of a CUDA accuracy row: kernel time summed per step."""
    return row.get("profiler_kernel_s")


def target_rows(document: Mapping[str, Any]) -> list[TargetRow]:
    """Each target of the issue judged on one run (None for `met` where the run has no figure)."""
    label = run_label(document)
    rows = []
    for name, s in unchanged_sets(document).items():
        share = fraction(s["gate"])
        rows.append(TargetRow(label, "false alarms <= 1% per benchmark", name, rate_text(s["gate"]),
                              None if share is None else share <= FALSE_ALARM_TARGET))
    by_size = slowdown_sets(document)
    wanted = 1.5 * 0.10
    if any(abs(size - wanted) < 1e-9 for size in by_size):
        s = next(s for size, s in by_size.items() if abs(size - wanted) < 1e-9)
        share = fraction(s["gate"])
        rows.append(TargetRow(label, ">= 95% detection of +15% (1.5x the 10% band)", CHAIN_NAME,
                              rate_text(s["gate"]), None if share is None else share >= DETECTION_TARGET))
    if document["device"] == "cuda":
        for row in (document.get("probe") or {}).get("accuracy", []):
            difference = relative_difference(row.get("suite_s"), gpu_reference_s(row))
            rows.append(TargetRow(
                label, "GPU timing within 2% of the profiler's GPU time", row["name"],
                signed_percent(difference) if difference is not None else row.get("error", "no figure"),
                None if difference is None else abs(difference) <= GPU_ACCURACY_TARGET,
            ))
    overhead = (document.get("probe") or {}).get("overhead") or {}
    share = overhead.get("harness_fraction_of_1ms")
    rows.append(TargetRow(label, "overhead <= 1% of a 1 ms step", "empty step",
                          percent(share, 3) if share is not None else overhead.get("error", "no figure"),
                          None if share is None else share <= OVERHEAD_TARGET))
    return rows


def band_choice(document: Mapping[str, Any], rule: str = "gate", interleaved: bool = False) -> float | None:
    """The smallest band (a fraction) at which, by `rule`, every unchanged case has <= 1% false alarms and
    >= 95% of pairs detect the largest measured slowdown no bigger than 1.5x the band (a smaller slowdown
    is harder to detect, so this errs against the band); None when no band in the sweep does both."""
    unchanged = [s for s in unchanged_sets(document, interleaved).values() if s["pairs"]]
    by_size = slowdown_sets(document, interleaved)
    if not unchanged or not by_size:
        return None
    bands = sorted(float(key) for key in unchanged[0]["by_band"])
    for band in bands:
        key = f"{band:.2f}"
        alarms_ok = all((fraction(s["by_band"][key][rule]) or 0.0) <= FALSE_ALARM_TARGET for s in unchanged)
        small_enough = [size for size in by_size if size <= 1.5 * band + 1e-9]
        if not small_enough:
            continue
        detected = fraction(by_size[max(small_enough)]["by_band"][key][rule])
        if alarms_ok and detected is not None and detected >= DETECTION_TARGET:
            return band
    return None


# --- rendering ----------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def _met_text(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "no figure"}[met]


def _render_targets(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [
        (row.target, row.run, row.subject, row.figure, _met_text(row.met))
        for document in documents for row in target_rows(document)
    ]
    return ["## The targets", "", *_table(("target", "run", "case", "figure", "verdict"), rows)]


def _render_runs(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## The runs", ""]
    rows = []
    for document in documents:
        plan = document["plan"]
        analysis = document["analysis"]
        machine = document.get("machine") or {}
        rows.append((
            run_label(document), document.get("started_at", "-"), str(analysis["processes"]),
            f"{plan['max_time_s']:g} s", str(document.get("cpu_count", "-")),
            f"{document.get('load_average_before', 0):.1f} / {document.get('load_average_after', 0):.1f}",
            f"{document.get('wall_s', 0):.0f} s", machine.get("torch_version", document.get("torch_version", "-")),
        ))
    lines += _table(("run", "started (UTC)", "processes K", "max time per case", "CPU cores",
                     "load average before / after", "wall", "torch"), rows)
    lines.append("Commands:")
    lines.append("")
    for document in documents:
        lines.append(f"- {run_label(document)}: `{document.get('command', 'perfsuite selftest')}`"
                     f"{' (file ' + document['source_file'] + ')' if document.get('source_file') else ''}")
        for note in document.get("notes", []):
            lines.append(f"  - {note}")
        if document.get("worker_failures"):
            lines.append(f"  - failed processes: {len(document['worker_failures'])}: "
                         f"{document['worker_failures'][0][:200]}")
    return lines + [""]


def _render_accuracy(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Accuracy", ""]
    for document in documents:
        accuracy = (document.get("probe") or {}).get("accuracy", [])
        if not accuracy:
            continue
        lines += [f"### {run_label(document)}", ""]
        if document["device"] == "cuda":
            header = ("case", "suite median", "profiler GPU kernel time", "diff", "profiler GPU span", "diff",
                      "CUDA events around the step", "diff", "Timer per call", "diff")
            rows = []
            for row in accuracy:
                if "error" in row:
                    rows.append((row["name"], row["error"][:120], *["-"] * 8))
                    continue
                suite = row["suite_s"]
                cells = [row["name"], format_seconds(suite)]
                for key in ("profiler_kernel_s", "profiler_span_s", "events_s", "timer_per_call_s"):
                    cells += [format_seconds(row.get(key)), signed_percent(relative_difference(suite, row.get(key)))]
                rows.append(cells)
        else:
            header = ("case", "suite median", "Timer per call", "diff", "Timer blocked_autorange", "diff")
            rows = []
            for row in accuracy:
                if "error" in row:
                    rows.append((row["name"], row["error"][:120], "-", "-", "-", "-"))
                    continue
                suite = row["suite_s"]
                cells = [row["name"], format_seconds(suite)]
                for key in ("timer_per_call_s", "timer_blocked_s"):
                    cells += [format_seconds(row.get(key)), signed_percent(relative_difference(suite, row.get(key)))]
                rows.append(cells)
        lines += _table(header, rows)
    return lines


def _render_overhead(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = []
    for document in documents:
        overhead = (document.get("probe") or {}).get("overhead") or {}
        if "harness_round_s" not in overhead:
            rows.append((run_label(document), overhead.get("error", "not measured"), *["-"] * 6))
            continue
        rows.append((
            run_label(document), format_seconds(overhead["harness_round_s"]),
            percent(overhead["harness_fraction_of_1ms"], 3), format_seconds(overhead["timer_pair_s"]),
            format_seconds(overhead["synchronize_idle_s"]), format_seconds(overhead["tiny_step_round_s"]),
            format_seconds(overhead.get("tiny_step_event_s")), format_seconds(overhead["harness_wall_per_round_s"]),
        ))
    return ["## Overhead", "", *_table(
        ("run", "round of an empty step", "of a 1 ms step", "timer pair alone", "synchronize, idle device",
         "round of a one-element add", "its device time (events)", "wall time per round"), rows)]


def _render_false_alarms(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## False alarms", ""]
    for document in documents:
        sets = unchanged_sets(document)
        if not sets:
            continue
        lines += [f"### {run_label(document)}", ""]
        rows = []
        for name, s in sets.items():
            band = s["by_band"].get(DEFAULT_BAND_KEY, {})
            ratios = s.get("ratio_quantiles") or {}
            medians = list((s.get("process_medians_s") or {}).values())
            rows.append((
                name, str(s["pairs"]), rate_text(s["gate"]), rate_text(s["gate"], "improved"),
                rate_text(band["pytest_benchmark"]) if band else "-",
                rate_text(band["raw"]) if band else "-", rate_text(band["normalised"]) if band else "-",
                rate_text(s["memory"]),
                f"{ratios.get('p5', 0):.2f} / {ratios.get('median', 0):.2f} / {ratios.get('p95', 0):.2f}"
                if ratios else "-",
                f"{format_seconds(min(medians))} - {format_seconds(max(medians))}" if medians else "-",
            ))
        lines += _table(("case", "pairs", "gate: regressed", "gate: improved", "pytest-benchmark median:10%",
                         "gate, no reference", "gate, reference alone", "memory regressed",
                         "median ratio p5 / p50 / p95", "process medians, min - max"), rows)
        flagged = [(name, f) for name, s in sets.items() for f in s.get("flagged", [])]
        if flagged:
            shown = ", ".join(
                f"{name} {f['baseline']}->{f['current']} (x{f['ratio']:.2f}"
                + (f", normalised x{f['normalised_ratio']:.2f})" if f.get("normalised_ratio") else ")")
                for name, f in flagged[:12]
            )
            lines += [f"Pairs the gate flagged (baseline process -> current process): {shown}"
                      f"{' and more' if len(flagged) > 12 else ''}.", ""]
    return lines


def _render_detection(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Detection", ""]
    for document in documents:
        by_size = slowdown_sets(document)
        if not by_size:
            continue
        lines += [f"### {run_label(document)}", ""]
        rows = []
        for size, s in sorted(by_size.items()):
            band = s["by_band"].get(DEFAULT_BAND_KEY, {})
            within = s.get("within_process_ratio") or {}
            time_to_verdict = (s.get("measure_wall_s_median") or 0) + (s.get("judge_s_median") or 0)
            rows.append((
                f"+{size * 100:.0f}% ({s['extra_blocks']} block{'s' if s['extra_blocks'] != 1 else ''})",
                f"x{within['median']:.3f}" if within else "-", str(s["pairs"]), rate_text(s["gate"]),
                rate_text(band["pytest_benchmark"]) if band else "-", rate_text(band["raw"]) if band else "-",
                rate_text(band["normalised"]) if band else "-",
                f"{time_to_verdict:.1f} s (judging {format_seconds(s.get('judge_s_median'))})",
            ))
        lines += _table(("slowdown (extra work)", "measured, same process (median)", "pairs", "gate: regressed",
                         "pytest-benchmark median:10%", "gate, no reference", "gate, reference alone",
                         "time to a verdict"), rows)
    return lines


BAND_RULES = (
    ("gate", "the gate"), ("raw", "the gate without the reference workload"),
    ("pytest_benchmark", "pytest-benchmark's median:N% rule"),
)
INTERLEAVED_BAND_RULES = (
    ("gate", "the gate, drift from the interleaved reference"), ("per_round", "per-round normalised rounds"),
)


def _render_bands(
    documents: Sequence[Mapping[str, Any]], interleaved: bool = False, heading: str = "## The band"
) -> list[str]:
    lines = [heading, ""]
    for document in documents:
        unchanged = unchanged_sets(document, interleaved)
        by_size = slowdown_sets(document, interleaved)
        if not unchanged or not by_size:
            continue
        lines += [f"### {run_label(document)}", ""]
        bands = sorted(next(iter(unchanged.values()))["by_band"])
        for rule, title in INTERLEAVED_BAND_RULES if interleaved else BAND_RULES:
            header = ["band", *[f"false alarms, {name}" for name in unchanged],
                      *[f"+{size * 100:.0f}%" for size in sorted(by_size)]]
            rows = []
            for key in bands:
                rows.append([
                    f"{float(key) * 100:.0f}%",
                    *[percent(fraction(s["by_band"][key][rule])) for s in unchanged.values()],
                    *[percent(fraction(by_size[size]["by_band"][key][rule])) for size in sorted(by_size)],
                ])
            chosen = band_choice(document, rule, interleaved)
            lines += [f"By {title} (regressed share of pairs):", "", *_table(header, rows)]
            lines += [
                f"Smallest band meeting both targets by {title}: "
                + (f"**{chosen * 100:.0f}%**." if chosen is not None else "**none in this sweep**."), "",
            ]
    return lines


def _render_interleaved(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "## Experiment: the reference timed between the rounds",
        "",
        "The runner times its reference workload in 10 rounds before and 10 after a case; here the same",
        "processes also timed some cases with one reference round (a single 256x256 matmul) right before",
        "every round (`perfsuite.selftest.measure.measure_interleaved`). The gate then takes its drift factor from",
        "those rounds; *per-round normalised* divides each round by the reference round before it and",
        "judges those quotients by the gate's rule without drift.",
        "",
    ]
    for document in documents:
        sets = _sets(document, interleaved=True)
        if not sets:
            continue
        lines += [f"### {run_label(document)}", ""]
        rows = []
        for name, s in sets.items():
            band = s["by_band"].get(DEFAULT_BAND_KEY, {})
            rows.append((
                name, str(s["pairs"]), rate_text(s["gate"]),
                *[rate_text(band[rule]) if band else "-" for rule in ("raw", "normalised", "per_round",
                                                                         "pytest_benchmark")],
            ))
        lines += _table(("case", "pairs", "gate (interleaved drift)", "gate, no reference", "gate, reference alone",
                         "per-round normalised", "pytest-benchmark median:10%"), rows)
    return lines + _render_bands(documents, interleaved=True, heading="## The band, with the reference interleaved")


def _render_repeats(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Process repeats", ""]
    for document in documents:
        analysis = document["analysis"]
        lines += [f"### {run_label(document)}", ""]
        repeats = analysis.get("repeats")
        if not repeats:
            lines += [analysis.get("repeats_skipped_reason") or "not computed", ""]
            continue
        single = analysis["sets"]
        names = [name for name in single if single[name]["pairs"] and not name.endswith(INTERLEAVED_SUFFIX)]
        header = ["processes per side", *names]
        rows = [["1 (pairs above)", *[_repeat_cell(single[name]) for name in names]]]
        for group_size, sets in sorted(repeats.items()):
            rows.append([group_size, *[_repeat_cell(sets[name]) if name in sets else "-" for name in names]])
        lines += _table(header, rows)
    return lines


def _repeat_cell(s: Mapping[str, Any]) -> str:
    wall = s.get("measure_wall_s_median")
    return f"{rate_text(s['gate'])}, {wall:.1f} s" if wall is not None else rate_text(s["gate"])


# --- what the figures say: statements computed from the runs ----------------------------------------


def process_median_spread(comparison_set: Mapping[str, Any]) -> float | None:
    """Slowest over fastest process median of one case in one run: 1.0 when every process agreed."""
    medians = list((comparison_set.get("process_medians_s") or {}).values())
    return max(medians) / min(medians) if medians else None


def reference_drift_spread(document: Mapping[str, Any]) -> float | None:
    """Largest over smallest median of the runner's reference workload across every case of every
    process in a run: how far the drift factor can swing between two sessions."""
    medians = [
        float(statistics.median(record["reference_round_times_s"]))
        for worker in document.get("workers", []) for record in worker["records"]
        if record["reference_round_times_s"] and not record.get("reference_interleaved")
    ]
    return max(medians) / min(medians) if medians else None


def _rate(s: Mapping[str, Any], rule: str = "gate", band_key: str = DEFAULT_BAND_KEY) -> float | None:
    if rule == "gate" and band_key == DEFAULT_BAND_KEY:
        return fraction(s["gate"])
    counts = s["by_band"].get(band_key, {}).get(rule)
    return fraction(counts) if counts else None


def _worst_false_alarms(document: Mapping[str, Any], rule: str, interleaved: bool = False) -> float | None:
    rates = [_rate(s, rule) for s in unchanged_sets(document, interleaved).values() if s["pairs"]]
    rates = [r for r in rates if r is not None]
    return max(rates) if rates else None


def _detection(document: Mapping[str, Any], size: float, rule: str, interleaved: bool = False) -> float | None:
    s = slowdown_sets(document, interleaved).get(size)
    return _rate(s, rule) if s else None


QUIET_LOAD = 2.0


def _is_quiet_one_thread_cpu(document: Mapping[str, Any]) -> bool:
    """A CPU run with one thread (busy or not; the name says what the paragraphs compare)."""
    plan = document.get("plan") or {}
    return document["device"] == "cpu" and plan.get("threads") == 1


def is_quiet(document: Mapping[str, Any]) -> bool:
    """Whether a run had the machine to itself: no busy processes added and a load average under 2 at
    its start (the load is recorded, not controlled: other users may have started later)."""
    plan = document.get("plan") or {}
    return not plan.get("contention") and (document.get("load_average_before") or 0.0) < QUIET_LOAD


def _turn_spread(row: Mapping[str, Any], key: str) -> float | None:
    turns = [t for t in (row.get("turns") or {}).get(key, []) if t]
    return max(turns) / min(turns) - 1 if turns else None


def discussion(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """Paragraphs that read the tables: each figure in them is computed from the runs it speaks of, and a
    paragraph whose runs are absent is left out."""
    lines = ["## What the figures say", ""]
    overheads = [
        ((d.get("probe") or {}).get("overhead") or {}).get("harness_fraction_of_1ms") for d in documents
    ]
    overheads = [o for o in overheads if o is not None]
    if overheads:
        lines += [
            f"- **Overhead is not what limits the gate.** The harness adds at most {percent(max(overheads), 3)} "
            "of a 1 ms step to each round on every run: a timer pair, two Python calls and the device "
            "synchronize.", "",
        ]
    cpu_one = [d for d in documents if _is_quiet_one_thread_cpu(d)]

    def per_call_differences(runs: Sequence[Mapping[str, Any]]) -> list[float]:
        return [
            abs(relative_difference(row.get("suite_s"), row.get("timer_per_call_s")))
            for d in runs for row in (d.get("probe") or {}).get("accuracy", [])
            if relative_difference(row.get("suite_s"), row.get("timer_per_call_s")) is not None
        ]

    quiet = per_call_differences([d for d in cpu_one if is_quiet(d)])
    busy_runs = [d for d in cpu_one if not is_quiet(d)]
    busy = per_call_differences(busy_runs)
    turns = [
        spread for d in busy_runs for row in (d.get("probe") or {}).get("accuracy", [])
        if (spread := _turn_spread(row, "suite_s")) is not None
    ]
    if quiet:
        text = (
            f"- **CPU timings are accurate.** With one thread on a quiet machine, the suite's median and torch's "
            f"Timer timing single calls differ by at most {percent(max(quiet))} on every case: the harness "
            "measures the step."
        )
        if busy and turns:
            text += (
                f" On busy runs they differ by up to {percent(max(busy))}, but so do the suite's own three turns "
                f"of the same step (up to {percent(max(turns))} apart): the methods ran at different moments of a "
                "machine whose speed moved."
            )
        lines += [
            text + " Timer.blocked_autorange can read far from both when the machine is busy: a block's mean "
            "carries every round another process interrupted, a median of single rounds does not.", "",
        ]
    for document in documents:
        if document["device"] != "cuda":
            continue
        rows = [r for r in (document.get("probe") or {}).get("accuracy", []) if "error" not in r]
        off = [r for r in rows if (relative_difference(r["suite_s"], gpu_reference_s(r)) or 0) > GPU_ACCURACY_TARGET]
        if rows:
            text = (f"- **GPU timing on {run_label(document)}.** ")
            if not off:
                text += "Every case's median lies within 2% of the profiler's GPU time."
            else:
                parts = []
                for r in off:
                    gaps = relative_difference(r.get("profiler_span_s"), gpu_reference_s(r))
                    parts.append(
                        f"{r['name']} reads {signed_percent(relative_difference(r['suite_s'], gpu_reference_s(r)))}"
                        + (f" (its GPU span exceeds its kernel time by {percent(gaps)}: the GPU waited between "
                           "kernels)" if gaps is not None else "")
                    )
                text += (
                    "; ".join(parts) + ". Where the step waits on the host to launch kernels, the GPU's busy time "
                    "leaves that out, while the suite's figure is the time a user waits for a step."
                )
            lines += [text, ""]
    defaults = [d for d in documents if d["device"] == "cpu" and not (d.get("plan") or {}).get("threads")]
    for document in defaults:
        chain = document["analysis"]["sets"].get(CHAIN_NAME)
        spread = process_median_spread(chain) if chain else None
        threads = (document.get("probe") or {}).get("torch_threads")
        if spread is None or not threads or threads < 2:
            continue
        one_thread = [process_median_spread(d["analysis"]["sets"][CHAIN_NAME]) for d in cpu_one
                      if CHAIN_NAME in d["analysis"]["sets"]]
        lines += [
            f"- **Threads.** With torch's default {threads} threads ({run_label(document)}), the same 1 ms chain's "
            f"median differed ×{spread:.0f} between processes, and {rate_text(chain['gate'])} of its unchanged pairs "
            "were flagged; likely because threads that wait for each other at every operation lose whole "
            "scheduler slices when another process takes a core."
            + (f" With one thread the chain's process medians stayed within ×{max(one_thread):.2f} on every run."
               if one_thread else ""), "",
        ]
    for document in cpu_one:
        sets = unchanged_sets(document)
        spreads = {name: process_median_spread(s) for name, s in sets.items()}
        if not spreads or None in spreads.values():
            continue
        drift = reference_drift_spread(document)
        chain = slowdown_sets(document)
        lines += [
            f"- **{run_label(document)}.** Process medians of the unchanged cases varied "
            + ", ".join(f"×{spread:.2f} ({name})" for name, spread in spreads.items())
            + f"; the runner's reference workload varied ×{drift:.2f} across cases and processes."
            if drift else "",
        ]
        gate, raw, alone = (_worst_false_alarms(document, rule) for rule in ("gate", "raw", "normalised"))
        lines[-1] += (
            f" Worst false-alarm rate at the 10% band: {percent(gate)} by the gate, {percent(raw)} without the "
            f"reference, {percent(alone)} by the reference alone."
        )
        if chain:
            biggest = max(chain)
            lines[-1] += (
                f" Detection of +{biggest * 100:.0f}%: {percent(_detection(document, biggest, 'gate'))} by the gate, "
                f"{percent(_detection(document, biggest, 'raw'))} without the reference."
            )
        interleaved = slowdown_sets(document, interleaved=True)
        if interleaved:
            size = min(interleaved)
            lines[-1] += (
                f" With the reference timed between the rounds, per-round normalised rounds gave at most "
                f"{percent(_worst_false_alarms(document, 'per_round', True))} false alarms and detected "
                f"+{size * 100:.0f}% in {percent(_detection(document, size, 'per_round', True))} of pairs."
            )
        repeats = (document["analysis"].get("repeats") or {}).get("3") or {}
        worst = max((fraction(s["gate"]) or 0.0 for name, s in repeats.items() if name in sets and s["pairs"]),
                    default=None)
        if worst is not None:
            plus15 = next((s for name, s in repeats.items() if name == f"{CHAIN_NAME}+3" and s["pairs"]), None)
            lines[-1] += (
                f" Pooling 3 processes per side: at most {percent(worst)} false alarms"
                + (f", +15% detected in {rate_text(plus15['gate'])}" if plus15 else "") + "."
            )
        lines.append("")
    lines += _band_paragraph(documents)
    lines += _memory_paragraph(documents)
    return lines + proposals(documents)


def proposals(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """Changes to the suite's defaults the runs argue for, each with its evidence; none is applied."""
    cpu_one = [d for d in documents if _is_quiet_one_thread_cpu(d) and unchanged_sets(d)]
    lines = ["## Proposed changes (not applied)", ""]
    for document in documents:
        plan = document.get("plan") or {}
        chain = document["analysis"]["sets"].get(CHAIN_NAME)
        if document["device"] == "cpu" and not plan.get("threads") and chain and process_median_spread(chain):
            lines += [
                "1. **Run CPU benchmarks with one thread per core that is free** (e.g. a `--perf-threads` option "
                "and `threads` in `[tool.perfsuite]`; 1 on a shared CI runner). Evidence: the 1 ms chain varied "
                f"×{process_median_spread(chain):.0f} between processes with torch's default threads "
                f"({run_label(document)}), against at most ×"
                f"{max(process_median_spread(d['analysis']['sets'][CHAIN_NAME]) for d in cpu_one):.2f} with one.",
                "",
            ] if cpu_one else []
            break
    memory = [
        (fraction(s["memory"]) or 0.0) for d in documents if d["device"] == "cpu"
        for s in unchanged_sets(d).values() if s["pairs"]
    ]
    if memory and max(memory) > FALSE_ALARM_TARGET:
        lines += [
            "2. **Show `cpu_peak_rss_bytes`, do not gate on it.** It is the process's high-water mark, shared by "
            f"every case run before; it flagged up to {percent(max(memory))} of unchanged pairs here.", "",
        ]
    repeat_rows = []
    for document in cpu_one:
        repeats = (document["analysis"].get("repeats") or {}).get("3") or {}
        plus15 = slowdown_sets(document).get(0.15)
        pooled = max((fraction(repeats[name]["gate"]) or 0.0 for name in unchanged_sets(document)
                      if name in repeats and repeats[name]["pairs"]), default=None)
        if pooled is None or not plus15 or not repeats.get(f"{CHAIN_NAME}+3", {}).get("pairs"):
            continue
        single = _worst_false_alarms(document, "gate")
        repeat_rows.append(
            f"{run_label(document)}: worst false alarms {percent(single)} -> {percent(pooled)}, +15% detected "
            f"{percent(fraction(plus15['gate']))} -> {percent(fraction(repeats[f'{CHAIN_NAME}+3']['gate']))}"
        )
    if repeat_rows:
        lines += [
            "3. **Offer process repeats for gating on a noisy machine** (run each case in 3 processes and pool "
            "their rounds on both sides; 3 times the measuring time). With 3 processes per side: "
            + "; ".join(repeat_rows) + ". It helps most where the noise is a process that ran slow, and least "
            "where every process meets other users' work.", "",
        ]
    drift_rows = []
    for document in cpu_one:
        largest = max(slowdown_sets(document), default=None)
        drift_rows.append(
            f"{run_label(document)}: worst false alarms {percent(_worst_false_alarms(document, 'gate'))} with "
            f"'both', {percent(_worst_false_alarms(document, 'normalised'))} normalised only, "
            f"{percent(_worst_false_alarms(document, 'raw'))} without the reference"
            + (f"; +{largest * 100:.0f}% detected {percent(_detection(document, largest, 'gate'))} with 'both', "
               f"{percent(_detection(document, largest, 'raw'))} without" if largest else "")
        )
    if drift_rows:
        lines += [
            "4. **Keep `drift_rule=\"both\"`.** " + "; ".join(drift_rows) + ". "
            "'both' removes most of the false alarms the raw rule raises under load. Its cost: the 20 reference "
            "rounds of about 3 ms before and after a case see other moments than the case's rounds; when they ran "
            "slow, the normalised ratio hides a real slowdown and 'both' calls it unchanged. A reference timed "
            "for about as long as the case (not 60 ms beside a 1 s case) might share more of its moments; that "
            "is untested here.", "",
        ]
    interleaved_rows = []
    for document in cpu_one:
        size = min(slowdown_sets(document, interleaved=True), default=None)
        if size is None:
            continue
        interleaved_rows.append(
            f"{run_label(document)}: worst false alarms "
            f"{percent(_worst_false_alarms(document, 'per_round', True))}, +{size * 100:.0f}% detected "
            f"{percent(_detection(document, size, 'per_round', True))}"
        )
    if interleaved_rows:
        lines += [
            "5. **Do not adopt a reference round between the rounds as the fix for a shared machine.** Per-round "
            "normalised rounds at the 10% band: " + "; ".join(interleaved_rows) + ". Where the machine was quiet "
            "it met both targets; under other processes' work it did not, likely because a 0.4 ms reference "
            "round fits between their time slices where a 3-11 ms step does not, so the quotient does not "
            "cancel time sharing.", "",
        ]
    bands = []
    for document in cpu_one:
        worst_30 = max(
            (fraction(s["by_band"]["0.30"]["gate"]) or 0.0 for name, s in unchanged_sets(document).items()
             if name != CHAIN_NAME and "0.30" in s["by_band"]), default=None,
        )
        chain = unchanged_sets(document).get(CHAIN_NAME)
        plus25 = slowdown_sets(document).get(0.25)
        if worst_30 is None or chain is None or plus25 is None:
            continue
        bands.append(
            f"{run_label(document)}: the 1 ms chain {percent(fraction(chain['gate']))} false alarms, +25% "
            f"detected {percent(fraction(plus25['gate']))} by the gate and "
            f"{percent(fraction(plus25['by_band'][DEFAULT_BAND_KEY]['raw']))} without the reference; the "
            f"ResNet18 cases' worst false alarms at a 30% band {percent(worst_30)}"
        )
    if bands:
        lines += [
            "6. **Keep the 10% band, and gate only where the machine allows it.** " + "; ".join(bands) + ". On a "
            "shared 2-core machine a 1 ms step is gated without false alarms at 10% (+25% is caught, +15% often "
            "not); steps of a few milliseconds or more are not gated reliably by any band up to 30% once other "
            "users are busy: gate on a dedicated runner (or the GPU), and treat a shared CPU machine's verdicts "
            "as advice.", "",
        ]
    return lines if len(lines) > 2 else []


def _band_paragraph(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    runs = [d for d in documents if unchanged_sets(d) and slowdown_sets(d)]
    if not runs:
        return []
    parts = []
    for document in runs:
        chosen = {title: band_choice(document, rule) for rule, title in BAND_RULES}
        if slowdown_sets(document, interleaved=True):
            chosen["per-round normalised, reference between the rounds"] = band_choice(document, "per_round", True)
        noise = max(
            (s["ratio_quantiles"]["p95"] for s in unchanged_sets(document).values() if s.get("ratio_quantiles")),
            default=None,
        )
        parts.append(
            f"{run_label(document)}: "
            + ", ".join(f"{title} {'none' if band is None else f'{band * 100:.0f}%'}" for title, band in chosen.items())
            + (f" (95th percentile of unchanged pairs' median ratios: x{noise:.2f})" if noise else "")
        )
    return [
        "- **The band.** Calling +15% regressed under a 10% band means an interval of the ratio that lies wholly "
        "above 1.10 when the true ratio is 1.15: the between-process noise must stay well under 5%, while the "
        "unchanged cases must almost never reach 1.10. The smallest band of the sweep at which every unchanged "
        "case stays at or under 1% false alarms and >= 95% of pairs detect the largest measured slowdown no "
        "bigger than 1.5x the band: " + "; ".join(parts) + ".",
        "",
    ]


def _memory_paragraph(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    worst = []
    for document in documents:
        rates = [(fraction(s["memory"]) or 0.0, name) for name, s in unchanged_sets(document).items() if s["pairs"]]
        if rates and max(rates)[0] > FALSE_ALARM_TARGET:
            worst.append(f"{percent(max(rates)[0])} ({max(rates)[1]}, {run_label(document)})")
    if not worst:
        return []
    return [
        "- **Memory.** The memory band (10%) flagged unchanged pairs too: " + "; ".join(worst) + ". The CPU "
        "figure, `cpu_peak_rss_bytes`, is the whole process's high-water mark, so it depends on what ran "
        "earlier in the same process; the selftest shuffles the order of cases in each process, which the "
        "suite (a fixed collection order) does not, so a real run sees less of this, but any change in which "
        "cases run before another moves it.",
        "",
    ]


def render_report(documents: Sequence[Mapping[str, Any]], discussion_lines: Sequence[str] | None = None) -> str:
    """The whole report: how it is measured, the targets, what the figures say (`discussion(documents)`
    unless other lines are given) and the changes they argue for, then one section per measure with every
    run side by side."""
    documents = sorted(documents, key=lambda d: (d["device"] != "cpu", run_label(d)))
    lines = [
        "# Measurement quality",
        "",
        "How accurate perfsuite's timings are, what the harness costs per round, and how often the regression",
        "gate raises a false alarm or misses a slowdown, measured by `perfsuite selftest` (perfsuite/selftest/)",
        "and rendered from results/selftest/*.json by `perfsuite selftest --report results/selftest/*.json`.",
        "Do not edit by hand: re-render.",
        "",
        *METHOD,
        *_render_targets(documents),
        *(discussion(documents) if discussion_lines is None else discussion_lines),
        *_render_runs(documents),
        *_render_accuracy(documents),
        *_render_overhead(documents),
        *_render_false_alarms(documents),
        *_render_detection(documents),
        *_render_bands(documents),
        *_render_repeats(documents),
        *_render_interleaved(documents),
    ]
    return "\n".join(lines).rstrip() + "\n"


METHOD = [
    "## How it is measured",
    "",
    "- **Accuracy**: the suite's median round of a case (pytest-benchmark's round loop around",
    "  `PreparedCase.timed_step`, the step then the device synchronize) against independent references for",
    "  the same prepared step, measured in three alternating turns (the figure is each method's median",
    "  turn): `torch.utils.benchmark.Timer` timing single calls (`timeit(number=1)`, the suite's statistic)",
    "  and, on the CPU, `Timer.blocked_autorange` (median over blocks of each block's mean per call); on",
    "  CUDA, CUDA events around each step instead, and torch.profiler over 20 steps after the turns: the",
    "  GPU time is the summed duration of every GPU activity per step, the span from a step's first GPU",
    "  activity to its last beside it.",
    "- **Overhead**: pytest-benchmark's runner timing `PreparedCase.timed_step` around a step that does",
    "  nothing (2000 rounds, one iteration each, as a real step's rounds run): what every round's figure",
    "  carries beyond the step itself. Its parts are timed alone too.",
    "- **False alarms**: K processes (`python -m perfsuite.selftest.measure worker`, one after another) each time",
    "  the same cases through `perfsuite.run.runner.run_case` (warm-up steps, the reference workload before",
    "  and after, pytest-benchmark's rounds), in an order shuffled per process. Every ordered pair",
    "  (i as baseline, j as current, i != j) is judged by `perfsuite.judge.verdicts.judge` against the entry",
    "  `perfsuite.store.baselines.entry_from_result` would store for i, with the default 10% band: K = 15 gives",
    "  210 pairs per case, K = 11 gives 110. The cases are unchanged, so every `regressed` is a false alarm.",
    "  Pairs share processes, so they are not independent: one odd process takes part in 2(K - 1) pairs.",
    "- **Detection**: the same processes also time a chain of 20 identical matmul blocks with 1, 2, 3, 5",
    "  or 10 extra blocks (+5, +10, +15, +25, +50% of the work; the unit tests count the matmuls with",
    "  FlopCounterMode). Each pair judges process j's slowed chain as the current run of process i's plain",
    "  chain. The time to a verdict is the median wall time of measuring the case (warm-up, reference,",
    "  rounds) plus the gate's decision.",
    "- **pytest-benchmark's rule**, the anchor: `--benchmark-compare-fail=median:10%` fails when",
    "  current median / baseline median * 100 - 100 > 10, on the same pairs.",
    "- **Band sweep and drift rule**: the same pairs judged at other bands, and with the raw or the",
    "  drift-normalised comparison alone, from the same bootstrap intervals (at 10% these reproduce the",
    "  gate's verdicts exactly; the files count any mismatch).",
    "- **Process repeats**: each side's rounds pooled from 2 or 3 disjoint processes (a sample of group",
    "  pairs), as if the runner ran every case in that many processes.",
    "- **Conditions**: this 2-core machine is shared with other developers, whose jobs come and go while",
    "  the selftest runs; that is the noise the gate has to live with. Each run's name carries its load",
    "  average when it started; `--contention N` adds N bursty busy processes (pure-Python work in bursts",
    "  of 0.2-3 s with pauses as long), a busy machine made on purpose; `--threads N` sets the thread count.",
    "",
]
