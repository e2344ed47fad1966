"""What a Mac's condition sources say, by macOS release, for the MPS double: the text `pmset -g batt`, `pmset -g` and
`pmset -g therm` print and the state of the notify key com.apple.system.thermalpressurelevel, so that perfsuite's
own reader (perfsuite.run.devices.host) runs against them unchanged. The double refuses a Mac that cannot exist
(Low Power Mode before macOS 12, High Power where it is not offered, a pressure level macOS does not have).

Each fact, then where it was read:
- `pmset -g batt` prints `Now drawing from '<source>'` (IOPSGetProvidingPowerSourceType: 'AC Power', 'Battery
  Power', 'UPS Power'), then per battery ` -InternalBattery-0 (id=N)\\t<charge>%; <state>; <time> remaining present:
  true`; a desktop Mac prints the first line only. Source: pmset/pmset.c and pmset.m, `show_power_sources`, in
  PowerManagement-733.200.93 (macOS 10.14) to 1846.0.25.0.1 (macOS 26.0) (apple-oss-distributions/PowerManagement;
  distribution-macOS names the release of each macOS); samples: imwally/battstat#2 (OS X 10.11: 'Battery Power',
  '89%; discharging; 4:47 remaining present: true'), spaceship-prompt/spaceship-prompt#640 (the `(id=5374051)`
  form), liquidprompt/liquidprompt#317 (an iMac: the first line only).
- `pmset -g` lists the settings in use under `Currently in use:`, each ` %-20s value`. From macOS 12
  (PowerManagement-1303.40.16, macOS 12.0.1) the Low Power Mode setting shows as `powermode` (0 automatic, 1 Low
  Power, 2 High Power) where High Power Mode is available on the power source in use, else as `lowpowermode` (0, 1);
  PowerManagement-1132.* (macOS 11) have neither key. Source: pmset.c/pmset.m `show_pm_settings_dict`, the
  comment "we either show a tri-state powermode [0,1,2] where 0 is OFF, 1 is LPM, 2 is HPM. OR if HPM isn't
  supported, we show lowpowermode [0,1]", unchanged from 1303.40.16 to 1846.0.25.0.1; samples:
  AppHouseKitchen/AlDente-Battery_Care_and_Monitoring#603 (macOS 12, arm64: `lowpowermode 0`),
  alfredapp/low-power-mode-workflow#4 (macOS 13.2, M2 Max: `powermode` 0/1/2), jordibruin/cooldown#4 (M3 Max:
  `powermode`), jacklandrin/OnlySwitch#168 (macOS 14.7.5: `powermode`).
- `pmset -g therm` prints two notes (no thermal warning level, no performance warning level recorded), then either
  a dated `CPU Power notify` line and `\\t<key> \\t= <value>` for CPU_Scheduler_Limit, CPU_Available_CPUs and
  CPU_Speed_Limit (IOPMCopyCPUPowerStatus), or `Note: No CPU power status has been recorded`. Source: pmset.m
  `show_thermal_cpu_power_level`; samples: yujitach/MenuMeters#158 (Intel, 2020: the three limits),
  exelban/stats#749 (M1 Pro, macOS 12.1: the three notes), prometheus/node_exporter#2906 (M3, macOS 14: no CPU power
  status).
- The notify key holds 0 nominal, 1 moderate, 2 heavy, 3 trapping, 4 sleeping on macOS (Libc's
  libkern/OSThermalNotification.h; other Apple OSes use 0 to 50); notify_register_check and notify_get_state
  answer NOTIFY_STATUS_OK (0), as `notifyutil -g com.apple.system.thermalpressurelevel` shows without root.

Unproven without a Mac (docs/conditions.md lists it): the exact spacing of each line (the reader takes any), the
order of the keys under `Currently in use:` (a dictionary's), whether `powermode` reads 2 on battery on every High
Power Mac, and whether a Mac that never posts a pressure level reads 0 (nominal) from the key (powerd's SystemLoad.c
treats levels as published only once posted; the double always posts).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Literal

from perfsuite.matrix.mps_support import Release, is_at_least

# Low Power Mode, and so pmset's lowpowermode/powermode keys, from macOS 12 (PowerManagement-1303).
FIRST_MACOS_WITH_LOW_POWER_MODE: Release = (12,)
PRESSURE_LEVELS = ("nominal", "moderate", "heavy", "trapping", "sleeping")
THERMAL_PRESSURE_KEY = b"com.apple.system.thermalpressurelevel"


class ImpossibleMac(ValueError):
    """Conditions no Mac of that release can be in."""


@dataclass(frozen=True)
class MacConditions:
    """The state of the pretend Mac: power source, battery charge (None: a desktop Mac, no battery), energy mode,
    whether High Power is offered on the power source in use (a 14-inch M3 Max or 16-inch Max MacBook Pro), the
    thermal pressure, and the CPU speed limit (None: an Apple-silicon Mac, which records none)."""

    power_source: Literal["AC Power", "Battery Power", "UPS Power"] = "AC Power"
    battery_percent: int | None = 100
    energy_mode: Literal["automatic", "low power", "high power"] = "automatic"
    high_power_offered: bool = False
    thermal_pressure: str = "nominal"
    cpu_speed_limit_percent: int | None = None

    def check(self, macos: Release) -> None:
        """Raise ImpossibleMac where no Mac of macOS `macos` could be in these conditions."""
        if self.energy_mode != "automatic" and not is_at_least(macos, FIRST_MACOS_WITH_LOW_POWER_MODE):
            raise ImpossibleMac(f"macOS {macos} has no energy modes (Low Power Mode came with macOS 12)")
        if self.energy_mode == "high power" and not self.high_power_offered:
            raise ImpossibleMac("High Power Mode on a Mac that does not offer it on this power source")
        if self.thermal_pressure not in PRESSURE_LEVELS:
            raise ImpossibleMac(f"macOS has no thermal pressure {self.thermal_pressure!r}; it has {PRESSURE_LEVELS}")
        if self.power_source == "Battery Power" and self.battery_percent is None:
            raise ImpossibleMac("on battery power without a battery")


def pmset_batt(conditions: MacConditions) -> str:
    """What `pmset -g batt` prints."""
    text = f"Now drawing from '{conditions.power_source}'\n"
    if conditions.battery_percent is None:
        return text
    state = ("discharging; 3:06 remaining" if conditions.power_source == "Battery Power"
             else "charged; 0:00 remaining" if conditions.battery_percent == 100 else "charging; 1:05 remaining")
    return text + f" -InternalBattery-0 (id=5374051)\t{conditions.battery_percent}%; {state} present: true\n"


def pmset_settings(conditions: MacConditions, macos: Release) -> str:
    """What `pmset -g` prints on macOS `macos` (its live settings, in AlDente#603's order)."""
    conditions.check(macos)
    settings = (("standby", 1), ("hibernatefile", "/var/vm/sleepimage"), ("powernap", 1), ("networkoversleep", 0),
                ("disksleep", 10), ("sleep", 1), ("hibernatemode", 3), ("ttyskeepawake", 1), ("displaysleep", 10),
                ("tcpkeepalive", 1))
    lines = ["System-wide power settings:", " SleepDisabled\t\t0", "Currently in use:",
             *(f" {key:<20} {value}" for key, value in settings)]
    if is_at_least(macos, FIRST_MACOS_WITH_LOW_POWER_MODE):
        value = {"automatic": 0, "low power": 1, "high power": 2}[conditions.energy_mode]
        key = "powermode" if conditions.high_power_offered else "lowpowermode"
        lines.append(f" {key:<20} {value}")
    lines.append(" womp                 1")
    return "\n".join(lines) + "\n"


def pmset_therm(conditions: MacConditions) -> str:
    """What `pmset -g therm` prints."""
    notes = "Note: No thermal warning level has been recorded\nNote: No performance warning level has been recorded\n"
    if conditions.cpu_speed_limit_percent is None:
        return notes + "Note: No CPU power status has been recorded\n"
    return notes + ("2020-06-26 12:30:37 +0200 CPU Power notify\n\tCPU_Scheduler_Limit \t= 100\n"
                    f"\tCPU_Available_CPUs \t= 8\n\tCPU_Speed_Limit \t= {conditions.cpu_speed_limit_percent}\n")


class FakeLibSystem:
    """libSystem's notify(3) functions as ctypes calls them: the token and the state come back through the pointers
    passed (`ctypes.byref`), NOTIFY_STATUS_OK is 0; the thermal pressure key holds `level()`."""

    def __init__(self, level: Any) -> None:
        self.level = level
        self.registered: set[int] = set()

    def notify_register_check(self, name: bytes, token: Any) -> int:
        token._obj.value = 7 if name == THERMAL_PRESSURE_KEY else 8
        self.registered.add(token._obj.value)
        return 0

    def notify_get_state(self, token: ctypes.c_int, state: Any) -> int:
        if token.value not in self.registered:
            return 2  # NOTIFY_STATUS_INVALID_TOKEN
        state._obj.value = self.level() if token.value == 7 else 0
        return 0

    def notify_cancel(self, token: ctypes.c_int) -> int:
        self.registered.discard(token.value)
        return 0


def command_answers(conditions: MacConditions, macos: Release) -> dict[tuple[str, ...], str]:
    """The pmset commands perfsuite's reader runs, and what each prints on this Mac."""
    return {("pmset", "-g", "batt"): pmset_batt(conditions), ("pmset", "-g"): pmset_settings(conditions, macos),
            ("pmset", "-g", "therm"): pmset_therm(conditions)}
