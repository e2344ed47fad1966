"""The machine's conditions in words: a reading on one line, a change of conditions, and what to change before
measuring (as pyperf's `system show` says it). Pure functions from `Conditions` and the judge's findings to text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from perfsuite.judge.conditions import (
    ENERGY_MODE,
    POWER_SOURCE,
    ConditionChange,
    ConditionsJudgement,
    Degradation,
    degradations,
    suggestions,
)
from perfsuite.records import Conditions
from perfsuite.render.escape import terminal_text

# What a verdict judged against a history recorded before perfsuite read conditions says of them.
HISTORY_CONDITIONS_NOT_RECORDED = (
    "the history's conditions (power, energy mode, heat) were not recorded (recorded before perfsuite read them): "
    "judged as if they were this session's; record the history again to compare them"
)
# How each speed fact's state reads in a sentence.
_STATE_WORDS = {
    POWER_SOURCE: {"AC": "on AC power", "battery": "on battery", "UPS": "on UPS power"},
    ENERGY_MODE: {"automatic": "in Automatic energy mode", "low power": "in Low Power Mode",
                  "high power": "in High Power Mode"},
}


def state_words(fact: str, state: str) -> str:
    """A fact's state in words: 'on battery', 'in Low Power Mode', 'thermal pressure heavy', 'GPU slowdown none'."""
    return _STATE_WORDS.get(fact, {}).get(state) or f"{fact} {state}"


def states_words(fact: str, states: Sequence[str]) -> str:
    """Several states of one fact, as 'on AC power' or 'on AC power, then on battery'."""
    return ", then ".join(state_words(fact, state) for state in states)


def change_text(change: ConditionChange, before: str = "its history", after: str = "this session") -> str:
    """One change of conditions: 'power source: its history on AC power, this session on battery'."""
    return (f"{change.fact}: {before} {states_words(change.fact, change.before)}, {after} "
            f"{states_words(change.fact, change.after)}")


def conditions_text(conditions: Conditions) -> str:
    """One reading on one line: what each source that applies here said, or why it said nothing."""
    c, unread, parts = conditions, conditions.unread, []
    if c.power_source is not None:
        charge = "" if c.battery_percent is None else f" ({c.battery_percent}%)"
        parts.append(state_words(POWER_SOURCE, c.power_source) + charge)
    if c.energy_mode is not None:
        offered = " (High Power offered)" if c.high_power_offered and c.energy_mode != "high power" else ""
        parts.append(state_words(ENERGY_MODE, c.energy_mode) + offered)
    if c.thermal_pressure is not None:
        parts.append(f"thermal pressure {c.thermal_pressure}")
    if c.cpu_speed_limit_percent is not None:
        parts.append(f"CPU speed limit {c.cpu_speed_limit_percent}%")
    if c.cpu_governor is not None:
        parts.append(f"CPU governor {c.cpu_governor}")
    if c.cpu_turbo is not None:
        parts.append(f"turbo {'on' if c.cpu_turbo else 'off'}")
    if c.cpu_frequency_mhz is not None:
        top = "" if c.cpu_max_frequency_mhz is None else f" of {c.cpu_max_frequency_mhz:.0f}"
        parts.append(f"CPU {c.cpu_frequency_mhz:.0f}{top} MHz")
    if c.gpu_sm_clock_mhz is not None:
        top = "" if c.gpu_max_sm_clock_mhz is None else f"/{c.gpu_max_sm_clock_mhz}"
        parts.append(f"GPU SM clock {c.gpu_sm_clock_mhz}{top} MHz")
    if c.gpu_temperature_c is not None:
        parts.append(f"GPU {c.gpu_temperature_c} C")
    if c.gpu_power_w is not None:
        limit = "" if c.gpu_power_limit_w is None else f"/{c.gpu_power_limit_w:.0f}"
        parts.append(f"GPU power {c.gpu_power_w:.0f}{limit} W")
    if c.gpu_clock_events is not None:
        parts.append(f"clocks events: {', '.join(c.gpu_clock_events) or 'none'}")
    parts += [f"{source}: {why}" for source, why in unread.items()]
    return "; ".join(parts) or "nothing read"


def advice_lines(readings: Sequence[Conditions]) -> list[str]:
    """What to change before measuring: a line per degraded state with its remedy, then what would help besides
    (High Power where offered); none where nothing needs changing."""
    lines = [f"before measuring: {_degraded_words(found)}: {found.remedy}" for found in degradations(readings)]
    seen = dict.fromkeys(hint for reading in readings for hint in suggestions(reading))
    return lines + [f"for steadier times: {hint}" for hint in seen]


def _degraded_words(found: Degradation) -> str:
    if found.fact == POWER_SOURCE:
        return f"on {found.state}"
    return state_words(found.fact, found.state)


def degraded_text(found: Sequence[Degradation]) -> str:
    """Degraded states in words: 'on battery (42%), in Low Power Mode, thermal pressure heavy'."""
    return ", ".join(_degraded_words(d) for d in found)


def remedies_text(found: Sequence[Degradation]) -> str:
    """The remedies of degraded states, each once, joined: 'plug the Mac into its power adapter; leave ...'."""
    return "; ".join(dict.fromkeys(d.remedy for d in found))


def judgement_text(judgement: ConditionsJudgement) -> str:
    """Why conditions keep a session from being judged against its history, and what to do: the changes (both
    states) or, for a history whose conditions were not recorded, this session's degraded states."""
    if judgement.changes:
        what = "; ".join(change_text(change) for change in judgement.changes)
    else:
        what = (f"this session ran {degraded_text(judgement.degraded)} and its history's conditions were not recorded "
                "(recorded before perfsuite read them), so they cannot be taken for the same")
    if judgement.degraded:
        remedy = f"{remedies_text(judgement.degraded)}, then run again"
    else:
        remedy = ("bring the machine back to its history's conditions (" + "; ".join(
            f"{change.fact} {', '.join(change.before)}" for change in judgement.changes) + ") and run again")
    return f"{what}. To judge it: {remedy}"



def conditions_header(conditions: Mapping[str, Conditions]) -> list[str]:
    """The lines a measuring session starts with: each device's conditions, then what to change before measuring
    (none where nothing needs changing)."""
    lines = [f"perfsuite: conditions ({device}): {conditions_text(reading)}" for device, reading in conditions.items()]
    return [terminal_text(line) for line in lines + [f"perfsuite: {line}" for line in advice_lines(
        list(conditions.values()))]]


def recording_refused_message(found: Sequence[Degradation]) -> str:
    """Why a recording session refuses to record, and what to do."""
    return (f"perfsuite will not record baselines while the machine runs degraded ({degraded_text(found)}): a "
            f"history recorded so would hide a real slowdown later. {remedies_text(found)[0].upper()}"
            f"{remedies_text(found)[1:]}, then record again; or pass --perf-record-degraded to record under these "
            "conditions anyway (later sessions are then judged against them)")


def case_refused_message(benchmark_id: str, found: Sequence[Degradation]) -> str:
    """Why one case measured by a recording session was not recorded, and what to do."""
    return (f"nothing recorded for {benchmark_id}: the machine ran degraded around its rounds ({degraded_text(found)});"
            f" {remedies_text(found)}, then record it again, or pass --perf-record-degraded to record it anyway")
