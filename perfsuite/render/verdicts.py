"""The sentence each verdict says: what was decided and why, what the runs can detect, and what to do next.

Pure functions from a `Verdict` to text; the decision itself is perfsuite.judge's.
"""

from __future__ import annotations

import math

from perfsuite.errors import REBASELINE_COMMAND
from perfsuite.judge.stats import RECOMMENDED_PROCESSES, RunComparison, baseline_runs_needed, smallest_p_value
from perfsuite.judge.verdicts import Verdict
from perfsuite.render.conditions import HISTORY_CONDITIONS_NOT_RECORDED, judgement_text
from perfsuite.render.escape import terminal_text
from perfsuite.render.units import format_bytes, format_ratio, format_seconds

# The command a message tells the user to run to record a history the gate can judge: K processes at once, since
# one process per session never calibrates the test.
RECORD_COMMAND = f"pytest --benchmark-only --perf-processes {RECOMMENDED_PROCESSES} --perf-update-baseline"
# How a user measures a change side by side with the code it changes (the merge base of HEAD and the default branch).
AB_COMMAND = "pytest --benchmark-only --perf-ab merge-base"


def verdict_message(verdict: Verdict) -> str:
    """One line for people: the outcome and why, the floor, the memory change, and the next step where one is due.
    Terminal text: the case's name, the reasons and the baseline's path are escaped for it."""
    return terminal_text(_sentence(verdict))


def _sentence(verdict: Verdict) -> str:
    benchmark_id = verdict.benchmark_id
    if verdict.status == "no-baseline":
        return f"{benchmark_id}: no baseline in {verdict.baseline_source}; record one with `{RECORD_COMMAND}`"
    if verdict.status == "conditions-differ" and verdict.conditions is not None:
        return (
            f"{benchmark_id} ran under other conditions than its history, so it was not judged (fails the gate: a "
            f"verdict that cannot judge is not a pass): {judgement_text(verdict.conditions)}; or, to judge under "
            f"these conditions, start its history over under them with `{REBASELINE_COMMAND} --perf-record-degraded`. "
            f"Median {format_seconds(verdict.baseline_median_s)} -> {format_seconds(verdict.current_median_s)} "
            f"({format_ratio(verdict.ratio)}) shown only"
        )
    if verdict.status == "incompatible" or verdict.comparison is None:
        consequence = "fails the gate" if verdict.gate_failed else "a warning (--perf-on-change warn)"
        return (
            f"{benchmark_id} changed against its history, so it was not judged ({consequence}): "
            f"{'; '.join(verdict.reasons)}. Median {format_seconds(verdict.baseline_median_s)} -> "
            f"{format_seconds(verdict.current_median_s)} ({format_ratio(verdict.ratio)}) shown only. Either start its "
            f"history over with `{REBASELINE_COMMAND}` (the change is deliberate), or measure the change against its "
            f"base with `{AB_COMMAND}`"
        )
    message = time_message(verdict)
    judged = verdict.conditions
    if judged is not None and judged.session_recorded and not judged.history_recorded:
        message += f"; {HISTORY_CONDITIONS_NOT_RECORDED}"
    if verdict.memory_status in ("regressed", "improved"):
        direction = "above" if verdict.memory_status == "regressed" else "below"
        limit = 1 + verdict.memory_tolerance if verdict.memory_status == "regressed" else 1 - verdict.memory_tolerance
        message += (
            f"; memory {verdict.memory_status}: {verdict.memory_figure} {format_bytes(verdict.baseline_memory_bytes)} "
            f"-> {format_bytes(verdict.current_memory_bytes)} ({format_ratio(verdict.memory_ratio)}, {direction} the "
            f"band {limit:.3g})"
        )
    return message


def percent(fraction: float) -> str:
    """A fraction as a percentage at three significant figures: 0.1234 -> `12.3%`."""
    return f"{fraction * 100:.3g}%"


def floor_text(comparison: RunComparison, tolerance: float) -> str:
    """What the runs at hand can detect, e.g. `detects >= 12% here` and, when noise puts the floor above the
    band, what would bring it under."""
    text = f"detects >= {percent(comparison.detectable_slowdown)} here"
    if comparison.noise_slowdown is not None and comparison.noise_slowdown > tolerance:
        text += f"; the noise floor is above the {percent(tolerance)} band: " + _more_runs_text(comparison)
    return text


def _more_runs_text(comparison: RunComparison) -> str:
    spread = "" if comparison.log_sd is None else f"this machine's runs scatter by {percent(comparison.log_sd)} (sd); "
    return (
        f"{spread}no process count lowers it, since one session's runs share the machine's state: judge on a "
        "quieter runner, with --perf-threads 1 or longer runs (--benchmark-max-time 5), or give this case a wider "
        "band"
    )


def time_message(verdict: Verdict) -> str:
    """One line that says the time outcome of a compared verdict and why."""
    comparison, config, tolerance = verdict.comparison, verdict.config, verdict.tolerance
    if comparison is None:
        raise ValueError(f"{verdict.benchmark_id}: a {verdict.status} verdict compared no runs")
    runs = f"{comparison.current_runs} run(s) vs {comparison.baseline_runs} baseline run(s)"
    head = (
        f"{verdict.benchmark_id} {comparison.outcome}: median {format_seconds(verdict.baseline_median_s)} -> "
        f"{format_seconds(verdict.current_median_s)} ({format_ratio(comparison.ratio)}, {runs})"
    )
    if not comparison.calibrated:
        factor = config.uncalibrated_factor
        if comparison.outcome != "uncalibrated":
            past = "beyond the baseline's slowest run" if comparison.outcome == "regressed" else (
                "below the baseline's fastest run"
            )
            return f"{head}; x{factor:g} {past}, called although the runs are too few to calibrate the test"
        smallest = smallest_p_value(comparison.current_runs, comparison.baseline_runs)
        processes = max(comparison.current_runs, RECOMMENDED_PROCESSES)
        needed = baseline_runs_needed(processes, config.false_alarm_rate)
        recordings = math.ceil(needed / RECOMMENDED_PROCESSES)
        return (
            f"{head}; uncalibrated: with these runs no p below {smallest:.2g} is possible, not the "
            f"{config.false_alarm_rate:g} the gate needs, so only a change x{factor:g} beyond the baseline's slowest "
            "run (and beyond the noise) is called; judge with "
            f"--perf-processes {processes} against >= {needed} baseline runs "
            f"(`{RECORD_COMMAND}`, recorded {recordings} times)"
        )
    interval = f"CI [{comparison.ci_low:.3f}, {comparison.ci_high:.3f}]"
    floor = floor_text(comparison, tolerance)
    if comparison.outcome == "regressed":
        return (
            f"{head}; slower beyond the band {1 + tolerance:.3g} with p = {comparison.p_value_slower:.2g} "
            f"< {config.false_alarm_rate:g} ({interval}); {floor}"
        )
    if comparison.outcome == "improved":
        return (
            f"{head}; faster beyond the band {1 - tolerance:.3g} with p = {comparison.p_value_faster:.2g} "
            f"< {config.false_alarm_rate:g} ({interval}); {floor}"
        )
    return f"{head}; within the band +-{percent(tolerance)} or within the noise ({interval}); {floor}"
