"""The host's conditions, read the same whatever device a case runs on (a CPU case on a Mac is throttled too): on
macOS the power source, the energy mode, the thermal pressure and the CPU speed limit; on Linux the CPU frequency
scaling (governor, turbo, frequency). No root, no dependency: pmset's output, one notify(3) key through ctypes,
and /sys. docs/conditions.md cites every source by macOS release; the MPS double (tests/mps_double/macos.py)
models them.

The parsers are pure functions of the text a source printed; `host_conditions` runs the sources. A source that
applies here but gives nothing is named in `Conditions.unread` with why, never filled with a guess.

macOS sources (Apple's PowerManagement project, pmset/pmset.c and pmset.m, PowerManagement-1303.40.16 of macOS
12.0.1 to 1846.0.25.0.1 of macOS 26.0):
- `pmset -g batt` prints `Now drawing from '<source>'`, the source being IOPSGetProvidingPowerSourceType's
  'AC Power', 'Battery Power' or 'UPS Power', then a line per battery, ` -InternalBattery-0 (id=...)\\t84%; charging;
  ...` (a desktop Mac has none).
- `pmset -g` prints the settings in use under `Currently in use:`; the Low Power Mode setting shows as `powermode
  N` where High Power Mode is available on the power source in use (0 automatic, 1 Low Power, 2 High Power) and as
  `lowpowermode N` elsewhere (0 or 1); macOS 11 and earlier (PowerManagement-1132) print neither. Only a Mac whose
  power source supports the setting shows it.
- `pmset -g therm` prints `CPU_Speed_Limit \\t= N` (IOPMCopyCPUPowerStatus's kIOPMCPUPowerLimitProcessorSpeedKey,
  the figure Chromium's thermal_state_observer_mac.mm reads too) or, where the OS keeps none (Apple silicon),
  `Note: No CPU power status has been recorded`.
- The notify(3) key `com.apple.system.thermalpressurelevel` (kOSThermalNotificationPressureLevelName, macOS 10.10
  and later) holds the thermal pressure level, 0 nominal, 1 moderate, 2 heavy, 3 trapping, 4 sleeping on macOS
  (Libc's libkern/OSThermalNotification.h; powerd's pmconfigd/SystemLoad.c reads it so); read with
  notify_register_check and notify_get_state from libSystem, as `notifyutil -g` does, without root.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

from perfsuite.records import (
    CPU_FREQUENCY,
    CPU_SPEED_LIMIT,
    CPU_TURBO,
    ENERGY_MODE,
    POWER_SOURCE,
    THERMAL_PRESSURE,
    THERMAL_PRESSURES,
    Conditions,
    EnergyMode,
    PowerSource,
)
from perfsuite.run import devices

COMMAND_TIMEOUT_S = 10.0
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"
THERMAL_PRESSURE_KEY = b"com.apple.system.thermalpressurelevel"
NOTIFY_STATUS_OK = 0
# IOPSGetProvidingPowerSourceType's values (IOKit's IOPSKeys.h: kIOPMACPowerKey, kIOPMBatteryPowerKey,
# kIOPMUPSPowerKey), as `Now drawing from '...'` prints them.
POWER_SOURCE_NAMES: dict[str, PowerSource] = {"AC Power": "AC", "Battery Power": "battery", "UPS Power": "UPS"}
# pmset's tri-state `powermode` (0 off, 1 LPM, 2 HPM: pmset.c's own comment) and two-state `lowpowermode`.
POWER_MODES: dict[int, EnergyMode] = {0: "automatic", 1: "low power", 2: "high power"}
CPUFREQ_ROOT = Path("/sys/devices/system/cpu")


def host_conditions() -> Conditions:
    """This host's conditions now: macOS's on a Mac, Linux's CPU frequency scaling on Linux, else none (and why)."""
    system = devices.platform.system()
    if system == "Darwin":
        return macos_conditions()
    if system == "Linux":
        return linux_conditions(CPUFREQ_ROOT)
    return Conditions(unread={CPU_FREQUENCY: f"not exposed: perfsuite reads the host's conditions on macOS and Linux, "
                                             f"not {system}"})


# --- macOS ---------------------------------------------------------------------------------------------------

def macos_conditions() -> Conditions:
    """The Mac's power source, energy mode, thermal pressure and CPU speed limit, each from its source."""
    unread: dict[str, str] = {}
    batt = command_output(["pmset", "-g", "batt"])
    source, percent = (None, None) if batt is None else power_of(batt)
    if source is None:
        unread[POWER_SOURCE] = _unparsed("pmset -g batt", batt, "Now drawing from '...'")
    settings = command_output(["pmset", "-g"])
    mode = None if settings is None else energy_mode_of(settings)
    if mode is None:
        unread[ENERGY_MODE] = _unparsed(
            "pmset -g", settings, "powermode or lowpowermode under 'Currently in use:' (macOS 11 and earlier have no "
            "Low Power Mode, and a Mac shows the key only where its power source supports it)")
    therm = command_output(["pmset", "-g", "therm"])
    limit = None if therm is None else speed_limit_of(therm)
    if limit is None:
        unread[CPU_SPEED_LIMIT] = (
            "not exposed: pmset -g therm says 'No CPU power status has been recorded' (as on Apple silicon)"
            if therm is not None and "No CPU power status" in therm
            else _unparsed("pmset -g therm", therm, "CPU_Speed_Limit"))
    level = thermal_pressure_level()
    pressure = THERMAL_PRESSURES[level] if isinstance(level, int) and 0 <= level < len(THERMAL_PRESSURES) else None
    if pressure is None:
        unread[THERMAL_PRESSURE] = level if isinstance(level, str) else f"unknown thermal pressure level {level}"
    return Conditions(
        power_source=source, battery_percent=percent, energy_mode=None if mode is None else mode[0],
        high_power_offered=None if mode is None else mode[1], thermal_pressure=pressure,
        cpu_speed_limit_percent=limit, unread=unread,
    )


def _unparsed(command: str, output: str | None, looked_for: str) -> str:
    if output is None:
        return f"`{command}` could not be run"
    return f"not exposed: `{command}` printed no {looked_for}"


def power_of(batt: str) -> tuple[PowerSource | None, int | None]:
    """(the power source in use, the internal battery's charge in percent) from `pmset -g batt`'s text; None where
    it does not say (a desktop Mac has no battery)."""
    match = re.search(r"Now drawing from '([^']*)'", batt)
    source = POWER_SOURCE_NAMES.get(match.group(1)) if match else None
    charge = re.search(r"-InternalBattery-\d+\b[^\n]*?\t(\d+)%;", batt)
    return source, int(charge.group(1)) if charge else None


def energy_mode_of(settings: str) -> tuple[EnergyMode, bool] | None:
    """(the energy mode in use, whether High Power is offered on this power source) from `pmset -g`'s text: its
    `powermode` (0, 1, 2) or `lowpowermode` (0, 1) line under `Currently in use:`; None where it has neither."""
    in_use = settings.split("Currently in use:", 1)
    if len(in_use) < 2:
        return None
    match = re.search(r"^\s*(powermode|lowpowermode)\s+(\d+)\s*$", in_use[1], re.MULTILINE)
    if match is None:
        return None
    value = int(match.group(2))
    high_power_offered = match.group(1) == "powermode"
    if value not in POWER_MODES or (value == 2 and not high_power_offered):
        return None
    return POWER_MODES[value], high_power_offered


def speed_limit_of(therm: str) -> int | None:
    """The CPU speed limit in percent from `pmset -g therm`'s `CPU_Speed_Limit = N` line; None without one."""
    match = re.search(r"CPU_Speed_Limit\s*=\s*(\d+)", therm)
    return int(match.group(1)) if match else None


def command_output(command: list[str]) -> str | None:
    """What `command` printed, or None when it is missing, fails or hangs."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def load_libsystem() -> ctypes.CDLL:
    """libSystem, where macOS's notify(3) functions live."""
    return ctypes.CDLL(LIBSYSTEM)


def thermal_pressure_level() -> int | str:
    """The thermal pressure level the notify key holds (0 nominal to 4 sleeping), or why it could not be read."""
    try:
        library = load_libsystem()
    except OSError as error:
        return f"libSystem could not be loaded ({error})"
    token = ctypes.c_int(0)
    status = library.notify_register_check(THERMAL_PRESSURE_KEY, ctypes.byref(token))
    if status != NOTIFY_STATUS_OK:
        return f"notify_register_check({THERMAL_PRESSURE_KEY.decode()}) returned status {status}"
    state = ctypes.c_uint64(0)
    try:
        status = library.notify_get_state(token, ctypes.byref(state))
    finally:
        library.notify_cancel(token)
    if status != NOTIFY_STATUS_OK:
        return f"notify_get_state({THERMAL_PRESSURE_KEY.decode()}) returned status {status}"
    return int(state.value)


# --- Linux ---------------------------------------------------------------------------------------------------

def linux_conditions(root: Path) -> Conditions:
    """The CPU frequency scaling under `root` (/sys/devices/system/cpu): each CPU's cpufreq governor, the turbo
    switch (intel_pstate/no_turbo, else cpufreq/boost), the mean current and the highest maximum frequency; what
    /sys does not expose (a VM has no cpufreq) is named in `unread`."""
    folders = sorted(root.glob("cpu[0-9]*/cpufreq"))
    governors = sorted({text for folder in folders if (text := _read(folder / "scaling_governor"))})
    current_khz = [int(text) for folder in folders if (text := _read(folder / "scaling_cur_freq")).isdigit()]
    maximum_khz = [int(text) for folder in folders if (text := _read(folder / "cpuinfo_max_freq")).isdigit()]
    unread: dict[str, str] = {}
    if not governors:
        unread[CPU_FREQUENCY] = f"not exposed (no {root}/cpu0/cpufreq: a VM, or a kernel without cpufreq)"
    no_turbo, boost = _read(root / "intel_pstate" / "no_turbo"), _read(root / "cpufreq" / "boost")
    turbo = no_turbo == "0" if no_turbo in ("0", "1") else boost == "1" if boost in ("0", "1") else None
    if turbo is None:
        unread[CPU_TURBO] = "not exposed (no intel_pstate/no_turbo or cpufreq/boost)"
    return Conditions(
        cpu_governor="/".join(governors) or None, cpu_turbo=turbo,
        cpu_frequency_mhz=round(sum(current_khz) / len(current_khz) / 1000, 1) if current_khz else None,
        cpu_max_frequency_mhz=max(maximum_khz) / 1000 if maximum_khz else None, unread=unread,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
