"""What the machine's conditions mean for a comparison: which of them move speed, which states are degraded, and what
differs between a case's history and this session, or within one A/B block. Pure functions of `Conditions` records.

The facts that move speed (`speed_state`): the power source, the energy mode, the thermal pressure, the CPU speed
limit (a Mac's), the CPU governor and turbo (Linux's), the GPU's enforced power limit and the clocks-event reasons
that slow a GPU for heat or a hardware fault (`GPU_SLOWDOWN_EVENTS`). Figures that wander from one reading to the
next (clocks, temperatures, power drawn, the battery's charge) are recorded and shown, never compared. A fact known
on one side only (another OS, nvidia-ml-py missing) is not compared either.

Degraded (`degradations`): on battery, in Low Power Mode, thermal pressure above nominal, a CPU speed limit below
100%, a GPU slowed for heat or a hardware fault. A recording session refuses these unless told otherwise, since a
history recorded so hides a real slowdown later. Not the SW power cap, which a busy datacenter GPU runs at every day
and its history shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from perfsuite.records import GPU_SLOWDOWN_EVENTS, Conditions

POWER_SOURCE = "power source"
ENERGY_MODE = "energy mode"
THERMAL_PRESSURE = "thermal pressure"
CPU_SPEED_LIMIT = "CPU speed limit"
CPU_GOVERNOR = "CPU governor"
CPU_TURBO = "CPU turbo"
GPU_POWER_LIMIT = "GPU power limit"
GPU_SLOWDOWN = "GPU slowdown"
# The facts that move speed, in the order they are named.
SPEED_FACTS = (POWER_SOURCE, ENERGY_MODE, THERMAL_PRESSURE, CPU_SPEED_LIMIT, CPU_GOVERNOR, CPU_TURBO, GPU_POWER_LIMIT,
               GPU_SLOWDOWN)
NO_SLOWDOWN = "none"


def speed_state(conditions: Conditions) -> dict[str, str]:
    """The facts of `conditions` that move speed, each as a short state ('battery', 'low power', 'heavy', '70%',
    'performance', 'on', '700 W', 'HW thermal slowdown' or 'none'); a fact not read is absent."""
    c = conditions
    slowdowns = None if c.gpu_clock_events is None else [e for e in c.gpu_clock_events if e in GPU_SLOWDOWN_EVENTS]
    state = {
        POWER_SOURCE: c.power_source,
        ENERGY_MODE: c.energy_mode,
        THERMAL_PRESSURE: c.thermal_pressure,
        CPU_SPEED_LIMIT: None if c.cpu_speed_limit_percent is None else f"{c.cpu_speed_limit_percent}%",
        CPU_GOVERNOR: c.cpu_governor,
        CPU_TURBO: None if c.cpu_turbo is None else "on" if c.cpu_turbo else "off",
        GPU_POWER_LIMIT: None if c.gpu_power_limit_w is None else f"{c.gpu_power_limit_w:.0f} W",
        GPU_SLOWDOWN: None if slowdowns is None else ", ".join(slowdowns) or NO_SLOWDOWN,
    }
    return {fact: value for fact, value in state.items() if value is not None}


def states(readings: Iterable[Conditions]) -> dict[str, tuple[str, ...]]:
    """Each speed fact's states over `readings`, in the order first seen."""
    seen: dict[str, dict[str, None]] = {}
    for reading in readings:
        for fact, value in speed_state(reading).items():
            seen.setdefault(fact, {})[value] = None
    return {fact: tuple(seen[fact]) for fact in SPEED_FACTS if fact in seen}


@dataclass(frozen=True)
class ConditionChange:
    """A speed fact whose states differ: those of the reference (a history, an A/B job's start) and those seen now."""

    fact: str
    before: tuple[str, ...]
    after: tuple[str, ...]


def changes_between(reference: Iterable[Conditions], current: Iterable[Conditions]) -> tuple[ConditionChange, ...]:
    """The speed facts known on both sides whose states differ, in SPEED_FACTS order."""
    before, after = states(reference), states(current)
    return tuple(ConditionChange(fact, before[fact], after[fact]) for fact in SPEED_FACTS
                 if fact in before and fact in after and set(before[fact]) != set(after[fact]))


@dataclass(frozen=True)
class Degradation:
    """A degraded state: the speed fact, its state (with the battery's charge where known) and what to do."""

    fact: str
    state: str
    remedy: str


def degradations(readings: Iterable[Conditions]) -> tuple[Degradation, ...]:
    """The degraded states among `readings`, each once, in SPEED_FACTS order."""
    found: dict[tuple[str, str], Degradation] = {}
    for c in readings:
        if c.power_source == "battery":
            charge = "" if c.battery_percent is None else f" ({c.battery_percent}%)"
            found.setdefault((POWER_SOURCE, "battery"), Degradation(
                POWER_SOURCE, f"battery{charge}", "plug the Mac into its power adapter"))
        if c.energy_mode == "low power":
            found.setdefault((ENERGY_MODE, "low power"), Degradation(
                ENERGY_MODE, "low power", "leave Low Power Mode (System Settings > Battery, or Energy Mode)"))
        if c.thermal_pressure not in (None, "nominal"):
            found.setdefault((THERMAL_PRESSURE, str(c.thermal_pressure)), Degradation(
                THERMAL_PRESSURE, str(c.thermal_pressure),
                "let the machine cool until the thermal pressure is nominal (and pick High Power where offered)"))
        if c.cpu_speed_limit_percent is not None and c.cpu_speed_limit_percent < 100:
            found.setdefault((CPU_SPEED_LIMIT, f"{c.cpu_speed_limit_percent}%"), Degradation(
                CPU_SPEED_LIMIT, f"{c.cpu_speed_limit_percent}%", "let the machine cool until the CPU speed limit is "
                "100% (pmset -g therm)"))
        for event in c.gpu_clock_events or ():
            if event in GPU_SLOWDOWN_EVENTS:
                found.setdefault((GPU_SLOWDOWN, event), Degradation(
                    GPU_SLOWDOWN, event, "let the GPU cool and check its cooling and power (nvidia-smi -q -d "
                    "PERFORMANCE names the reason)"))
    return tuple(sorted(found.values(), key=lambda d: SPEED_FACTS.index(d.fact)))


def suggestions(conditions: Conditions) -> tuple[str, ...]:
    """What would help a measurement though nothing is degraded: High Power where the power source offers it."""
    if conditions.high_power_offered and conditions.energy_mode == "automatic":
        return ("pick High Power (offered on this power source: System Settings > Battery > Energy Mode) for "
                "sustained work",)
    return ()


@dataclass(frozen=True)
class ConditionsJudgement:
    """A session's conditions against its history's: the speed facts that differ (`changes`), whether the history's
    conditions were recorded at all (`history_recorded`: no for a history recorded before perfsuite read them) and
    this session's (`session_recorded`), and this session's degraded states (`degraded`)."""

    changes: tuple[ConditionChange, ...] = ()
    history_recorded: bool = True
    degraded: tuple[Degradation, ...] = ()
    session_recorded: bool = True

    @property
    def comparable(self) -> bool:
        """Whether the session may be judged against its history: no speed fact differs, and a history whose
        conditions are unknown is never taken for equal to a degraded session."""
        return not self.changes and (self.history_recorded or not self.degraded)


def judge_conditions(history: Sequence[Conditions], current: Sequence[Conditions]) -> ConditionsJudgement:
    """The conditions of a session's runs (`current`, every reading) against those of its history's runs."""
    return ConditionsJudgement(changes_between(history, current), bool(history), degradations(current), bool(current))
