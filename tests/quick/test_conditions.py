"""The machine's conditions: read (macOS's sources through the MPS double's Mac, Linux's /sys, NVML's reasons),
recorded (runs, histories, archives), judged (a session under other conditions than its history is never judged as
if equal; a recording session refuses degraded conditions) and said (header, A/B blocks)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from mps_double import MacFacts, MpsDouble
from mps_double.macos import ImpossibleMac, MacConditions, pmset_batt, pmset_settings, pmset_therm

from perfsuite.errors import UsageError
from perfsuite.judge.ab import judge_ab
from perfsuite.judge.conditions import degradations, judge_conditions, speed_state
from perfsuite.judge.verdicts import judge
from perfsuite.records import (
    CPU_FREQUENCY,
    CPU_SPEED_LIMIT,
    ENERGY_MODE,
    AbMeasurement,
    AbPair,
    AbSide,
    BaselineEntry,
    Case,
    Conditions,
    Measurement,
    Run,
    StoredRun,
    conditions_from_json,
    conditions_to_json,
)
from perfsuite.render import ab as render_ab
from perfsuite.render.conditions import conditions_header
from perfsuite.render.verdicts import verdict_message
from perfsuite.run.devices import backend, host, nvml
from perfsuite.store.baselines import load_baseline, record_runs

MPS_CASE = Case(device="mps", dtype="fp32", model="resnet18", batch_size=4, mode="train", profile="smoke")
MACHINE = {"accelerator_name": "Apple M3 Max", "memory_gib": "64", "macos_release": "14.5"}
AC_HIGH_POWER = MacConditions(power_source="AC Power", battery_percent=100, energy_mode="high power",
                              high_power_offered=True)
BATTERY_LOW_POWER = MacConditions(power_source="Battery Power", battery_percent=42, energy_mode="low power",
                                  high_power_offered=True)


def mac(monkeypatch: pytest.MonkeyPatch, conditions: MacConditions, macos_version: str = "14.5") -> MpsDouble:
    double = MpsDouble(mac=MacFacts(macos_version=macos_version, chip="Apple M3 Max", conditions=conditions))
    double.install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False))
    return double


def read_on(double: MpsDouble, conditions: MacConditions) -> Conditions:
    """The MPS backend's reading of the pretend Mac in `conditions` (perfsuite's own reader against the double)."""
    double.mac = dataclasses.replace(double.mac, conditions=conditions)
    return backend("mps").conditions()


def mps_run(median_s: float, before: Conditions | None, after: Conditions | None) -> Run:
    return Run(case=MPS_CASE, round_times_s=(median_s * 0.99, median_s, median_s * 1.01), samples_per_step=4,
               flops_per_step=None, memory_figure="mps_driver_allocated_bytes", memory_bytes=None,
               config_digest="a1b2c3d4e5f6", torch_version="2.13.0", threads=8, conditions_before=before,
               conditions_after=after)


def history(median_s: float, readings: tuple[Conditions | None, Conditions | None], runs: int = 5) -> BaselineEntry:
    stored = tuple(StoredRun(median_s * (1 + 0.002 * i), 9, (median_s,), None, "2026-12-02T15:00:00Z", "abc1234",
                             *readings) for i in range(runs))
    return BaselineEntry(case=MPS_CASE, config_digest="a1b2c3d4e5f6", torch_version="2.13.0", threads=8,
                         machine=MACHINE, memory_figure="mps_driver_allocated_bytes", samples_per_step=4,
                         flops_per_step=None, gpu_busy_fraction=None, tolerance=0.1, memory_tolerance=0.1, runs=stored)


# --- reading macOS's sources ------------------------------------------------------------------------------------


def test_pmset_batt_samples_give_the_power_source_and_the_charge():
    assert host.power_of("Now drawing from 'Battery Power'\n -InternalBattery-0 \t89%; discharging; 4:47 remaining "
                         "present: true\n") == ("battery", 89)
    assert host.power_of("Now drawing from 'AC Power'\n -InternalBattery-0 (id=5374051)\t95%; charging; 3:06 "
                         "remaining present: true\n") == ("AC", 95)
    assert host.power_of("Now drawing from 'AC Power'\n") == ("AC", None)  # a desktop Mac: no battery


def test_pmset_settings_give_the_energy_mode_by_key():
    in_use = "System-wide power settings:\n SleepDisabled\t\t1\nCurrently in use:\n standby              1\n"
    assert host.energy_mode_of(in_use + " lowpowermode         0\n womp                 1\n") == ("automatic", False)
    assert host.energy_mode_of(in_use + " powermode            1\n") == ("low power", True)
    assert host.energy_mode_of(in_use + " powermode            2\n") == ("high power", True)
    assert host.energy_mode_of(in_use + " womp                 1\n") is None


def test_pmset_therm_gives_the_speed_limit_where_the_mac_keeps_one():
    intel = "2020-06-26 12:30:37 +0200 CPU Power notify\n\tCPU_Scheduler_Limit \t= 40\n\tCPU_Speed_Limit \t= 28\n"
    assert host.speed_limit_of(intel) == 28
    assert host.speed_limit_of("Note: No CPU power status has been recorded\n") is None


@pytest.mark.parametrize(("macos_version", "energy_mode", "offered"), [
    ("12.1", "automatic", False), ("14.5", "low power", False), ("26.0", "high power", True),
])
def test_the_reader_reads_each_macos_release_as_its_pmset_prints_it(monkeypatch, macos_version, energy_mode, offered):
    conditions = MacConditions(energy_mode=energy_mode, high_power_offered=offered, thermal_pressure="moderate")
    mac(monkeypatch, conditions, macos_version)
    reading = backend("mps").conditions()
    assert (reading.energy_mode, reading.high_power_offered) == (energy_mode, offered)
    assert (reading.power_source, reading.battery_percent, reading.thermal_pressure) == ("AC", 100, "moderate")
    assert "No CPU power status has been recorded" in reading.unread[CPU_SPEED_LIMIT]


def test_macos_11_has_no_energy_mode_and_the_reading_says_so(monkeypatch):
    mac(monkeypatch, MacConditions(), "11.7")
    reading = backend("cpu").conditions()
    assert reading.energy_mode is None and "macOS 11 and earlier" in reading.unread[ENERGY_MODE]


def test_the_double_refuses_a_mac_that_cannot_exist():
    with pytest.raises(ImpossibleMac):
        pmset_settings(MacConditions(energy_mode="low power"), (11, 7))
    with pytest.raises(ImpossibleMac):
        pmset_settings(MacConditions(energy_mode="high power", high_power_offered=False), (14, 5))


def test_an_intel_mac_reports_its_cpu_speed_limit(monkeypatch):
    mac(monkeypatch, MacConditions(cpu_speed_limit_percent=70, battery_percent=None))
    reading = backend("cpu").conditions()
    assert (reading.cpu_speed_limit_percent, reading.battery_percent) == (70, None)
    assert [d.state for d in degradations([reading])] == ["70%"]


def test_the_double_prints_what_the_cited_samples_print():
    assert pmset_batt(BATTERY_LOW_POWER).startswith("Now drawing from 'Battery Power'\n -InternalBattery-0 (id=")
    assert pmset_therm(MacConditions()).endswith("Note: No CPU power status has been recorded\n")
    assert " lowpowermode         0\n" in pmset_settings(MacConditions(), (12, 0))


# --- reading Linux's /sys and NVML ------------------------------------------------------------------------------


def cpu_tree(root: Path, governors: list[str], no_turbo: str | None = None, boost: str | None = None) -> Path:
    for index, governor in enumerate(governors):
        folder = root / f"cpu{index}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(f"{governor}\n")
        (folder / "scaling_cur_freq").write_text(f"{2_000_000 + index * 1_000_000}\n")
        (folder / "cpuinfo_max_freq").write_text("3500000\n")
    if no_turbo is not None:
        (root / "intel_pstate").mkdir()
        (root / "intel_pstate" / "no_turbo").write_text(no_turbo)
    if boost is not None:
        (root / "cpufreq").mkdir(exist_ok=True)
        (root / "cpufreq" / "boost").write_text(boost)
    return root


def test_linux_cpufreq_gives_governor_turbo_and_frequencies(tmp_path):
    reading = host.linux_conditions(cpu_tree(tmp_path, ["performance", "performance"], no_turbo="1\n"))
    assert (reading.cpu_governor, reading.cpu_turbo) == ("performance", False)
    assert (reading.cpu_frequency_mhz, reading.cpu_max_frequency_mhz, reading.unread) == (2500.0, 3500.0, {})


def test_governors_that_differ_are_all_named_and_boost_stands_for_turbo(tmp_path):
    reading = host.linux_conditions(cpu_tree(tmp_path, ["powersave", "performance"], boost="1"))
    assert (reading.cpu_governor, reading.cpu_turbo) == ("performance/powersave", True)


def test_a_machine_without_cpufreq_says_not_exposed_in_one_line(tmp_path):
    (tmp_path / "cpu0").mkdir()
    reading = host.linux_conditions(tmp_path)
    assert reading.cpu_governor is None and reading.unread[CPU_FREQUENCY].startswith("not exposed")
    assert len(conditions_header({"cpu": reading})) == 1


def test_this_machine_records_its_cpu_conditions_or_says_they_are_not_exposed():
    reading = backend("cpu").conditions()
    assert reading.cpu_governor is not None or reading.unread[CPU_FREQUENCY].startswith("not exposed")


def test_clock_event_reasons_are_named_as_nvidia_smi_names_them():
    assert nvml.clock_event_names(0x4 | 0x40) == ("SW power cap", "HW thermal slowdown")
    assert nvml.clock_event_names(0x1 | 0x800) == ("GPU idle", "reason bit 0x800")
    assert nvml.clock_event_names(0) == ()


def test_without_nvidia_ml_py_the_gpu_reading_says_so(monkeypatch):
    nvml._nvml.cache_clear()
    monkeypatch.setitem(sys.modules, "pynvml", None)
    try:
        assert nvml.read_gpu("GPU-0").error == nvml.NOT_INSTALLED
    finally:
        nvml._nvml.cache_clear()


# --- recorded -------------------------------------------------------------------------------------------------


def test_conditions_round_trip_through_json_and_a_bad_field_is_named():
    reading = Conditions(power_source="battery", battery_percent=42, energy_mode="low power",
                         gpu_clock_events=("SW power cap",), unread={"CPU speed limit": "not exposed"})
    assert conditions_from_json(json.loads(json.dumps(conditions_to_json(reading))), "run 0") == reading
    with pytest.raises(ValueError, match="run 0: conditions 'power_source' is 'mains'"):
        conditions_from_json({"power_source": "mains"}, "run 0")


def test_a_history_keeps_each_runs_conditions_and_a_schema_2_file_reads_as_not_recorded(tmp_path):
    reading = Conditions(power_source="AC", energy_mode="high power")
    path = tmp_path / "mps" / "apple-m3-max.json"
    record_runs(path, "mps", {MPS_CASE.benchmark_id: history(0.01, (reading, reading))})
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries[MPS_CASE.benchmark_id].runs[0].conditions == (reading, reading)
    document = json.loads(path.read_text())
    document["schema_version"] = 2
    for run in document["entries"][MPS_CASE.benchmark_id]["runs"]:
        del run["conditions_before"], run["conditions_after"]
    path.write_text(json.dumps(document))
    old = load_baseline(path)
    assert old is not None and old.entries[MPS_CASE.benchmark_id].runs[0].conditions == ()


# --- judged ---------------------------------------------------------------------------------------------------


def test_a_session_on_battery_in_low_power_is_not_judged_against_a_history_on_ac_in_high_power(monkeypatch):
    double = mac(monkeypatch, AC_HIGH_POWER)
    recorded = read_on(double, AC_HIGH_POWER)
    now = read_on(double, BATTERY_LOW_POWER)
    current = Measurement(MPS_CASE, tuple(mps_run(0.016, now, now) for _ in range(3)))
    verdict = judge(current, history(0.010, (recorded, recorded)), MACHINE)
    assert verdict.status == "conditions-differ" and verdict.gate_failed and verdict.comparison is None
    message = verdict_message(verdict)
    assert "its history on AC power, this session on battery" in message
    assert "its history in High Power Mode, this session in Low Power Mode" in message
    assert "plug the Mac into its power adapter" in message and "leave Low Power Mode" in message


def test_a_session_under_the_historys_conditions_is_judged():
    reading = Conditions(power_source="AC", energy_mode="automatic", thermal_pressure="nominal")
    current = Measurement(MPS_CASE, tuple(mps_run(0.010, reading, reading) for _ in range(3)))
    verdict = judge(current, history(0.010, (reading, reading)), MACHINE)
    assert verdict.comparison is not None and verdict.status == "uncalibrated" and verdict.notes == ()


def test_a_history_without_conditions_is_judged_against_a_nominal_session_and_says_so():
    reading = Conditions(power_source="AC", energy_mode="automatic", thermal_pressure="nominal")
    current = Measurement(MPS_CASE, tuple(mps_run(0.010, reading, reading) for _ in range(3)))
    verdict = judge(current, history(0.010, (None, None)), MACHINE)
    assert verdict.comparison is not None and verdict.status == "uncalibrated"
    assert "the history's conditions (power, energy mode, heat) were not recorded" in verdict_message(verdict)


def test_a_history_without_conditions_is_never_taken_for_equal_to_a_degraded_session():
    reading = Conditions(power_source="battery", battery_percent=30, thermal_pressure="heavy")
    current = Measurement(MPS_CASE, tuple(mps_run(0.010, reading, reading) for _ in range(3)))
    verdict = judge(current, history(0.010, (None, None)), MACHINE)
    assert verdict.status == "conditions-differ" and verdict.gate_failed
    assert "on battery (30%), thermal pressure heavy" in verdict_message(verdict)


def test_the_sw_power_cap_a_busy_gpu_runs_at_is_no_change_but_a_thermal_slowdown_is():
    capped = Conditions(gpu_power_limit_w=700.0, gpu_clock_events=("SW power cap",))
    hot = Conditions(gpu_power_limit_w=700.0, gpu_clock_events=("SW power cap", "HW thermal slowdown"))
    idle = Conditions(gpu_power_limit_w=700.0, gpu_clock_events=("GPU idle",))
    assert judge_conditions([idle, capped], [idle, capped]).comparable
    assert degradations([capped]) == ()
    assert not judge_conditions([idle, capped], [idle, hot]).comparable
    assert [d.state for d in degradations([hot])] == ["HW thermal slowdown"]


def test_a_capped_gpu_against_an_uncapped_history_differs_in_its_power_limit():
    """What the lent card cannot show (its settings may not be changed): a power limit set lower than the
    history's, as NVML would report it, is a change of conditions."""
    changes = judge_conditions([Conditions(gpu_power_limit_w=700.0)], [Conditions(gpu_power_limit_w=400.0)]).changes
    assert [(c.fact, c.before, c.after) for c in changes] == [("GPU power limit", ("700 W",), ("400 W",))]


def test_figures_that_wander_are_never_compared():
    one = Conditions(battery_percent=80, gpu_sm_clock_mhz=1980, gpu_temperature_c=40, cpu_frequency_mhz=2400.0)
    other = Conditions(battery_percent=70, gpu_sm_clock_mhz=1755, gpu_temperature_c=71, cpu_frequency_mhz=3100.0)
    assert speed_state(one) == speed_state(other) == {}


# --- recording refused -------------------------------------------------------------------------------------------


def settings_for(*flags: str):
    from perfsuite.options.settings import RawSettings, validate_settings

    raw = RawSettings(**{flag: True for flag in flags})
    return validate_settings(raw, {}, ["resnet18"], ["mps"])


def test_recording_under_heavy_thermal_pressure_is_refused_then_allowed_by_the_switch(monkeypatch):
    from perfsuite.session.pytest_session import check_recording_conditions

    double = mac(monkeypatch, MacConditions(thermal_pressure="heavy"))
    conditions = {"mps": read_on(double, MacConditions(thermal_pressure="heavy"))}
    with pytest.raises(UsageError, match=r"runs degraded \(thermal pressure heavy\).*--perf-record-degraded"):
        check_recording_conditions(settings_for("update_baseline"), conditions)
    check_recording_conditions(settings_for("update_baseline", "record_degraded"), conditions)
    check_recording_conditions(settings_for(), conditions)  # a session that only judges is not refused


def test_a_case_measured_degraded_is_not_recorded_and_fails_the_recording(tmp_path):
    from perfsuite.run.plan import MeasureSettings, RoundSettings, SessionPlan
    from perfsuite.session.gate import Gate

    hot = Conditions(thermal_pressure="heavy")
    plan = SessionPlan((MPS_CASE,), 1, MeasureSettings(1, None), RoundSettings(5, 1.0, 5e-6), "case", None, {}, ())
    gate = Gate(settings_for("update_baseline"), tmp_path, {"accelerator_name": "Apple M3 Max"}, "abc1234", plan)
    gate.check(Measurement(MPS_CASE, (mps_run(0.01, hot, hot),)))
    written, problems = gate.record()
    assert written == [] and not (tmp_path / "mps").exists()
    assert problems == [f"nothing recorded for {MPS_CASE.benchmark_id}: the machine ran degraded around its rounds "
                        "(thermal pressure heavy); let the machine cool until the thermal pressure is nominal (and "
                        "pick High Power where offered), then record it again, or pass --perf-record-degraded to "
                        "record it anyway"]


# --- A/B blocks ---------------------------------------------------------------------------------------------------


def block(ratio: float, readings: tuple[Conditions, Conditions], windows: int = 8) -> AbPair:
    times = tuple((0.010 * (1 + 0.001 * (i % 3)), 0.010 * ratio * (1 + 0.001 * ((i + 1) % 3))) for i in range(windows))
    base, head = (mps_run(0.010, *readings), mps_run(0.010 * ratio, *readings))
    return AbPair(times, base, head, 0.1, 0.1)


def test_an_ab_block_during_which_the_conditions_changed_is_named_in_ab_md_with_its_effect(monkeypatch):
    double = mac(monkeypatch, AC_HIGH_POWER)
    plugged = read_on(double, AC_HIGH_POWER)
    unplugged = read_on(double, BATTERY_LOW_POWER)
    blocks = (block(1.0, (plugged, plugged)), block(1.0, (plugged, plugged)), block(1.3, (plugged, unplugged)))
    verdict = judge_ab(AbMeasurement(MPS_CASE, blocks), (), 0.05, 0.1, 1, start_conditions=(plugged,))
    assert [b.block for b in verdict.changed_blocks] == [3]
    side = AbSide("main", "abc1234", "python3")
    markdown = render_ab.summary_markdown([verdict], {MPS_CASE.benchmark_id: AbMeasurement(MPS_CASE, blocks)}, side,
                                          side)
    assert ("the conditions changed during block 3 (power source: the job started on AC power, the block ran on AC "
            "power, then on battery") in markdown
    assert f"without it the case reads {verdict.status_without_changed_blocks}" in markdown
    document = render_ab.summary_document([verdict], {MPS_CASE.benchmark_id: AbMeasurement(MPS_CASE, blocks)},
                                          side, side, "2026-12-02T15:00:00Z", conditions={"mps": plugged})
    assert document["cases"][0]["changed_blocks"][0]["block"] == 3
    assert document["conditions"]["mps"]["power_source"] == "AC"


def test_ab_blocks_under_the_jobs_conditions_name_no_change():
    steady = Conditions(power_source="AC", thermal_pressure="nominal")
    blocks = (block(1.0, (steady, steady)), block(1.0, (steady, steady)))
    verdict = judge_ab(AbMeasurement(MPS_CASE, blocks), (), 0.05, 0.1, 1, start_conditions=(steady,))
    assert verdict.changed_blocks == () and render_ab.changed_blocks_text(verdict) == ""


# --- said up front ------------------------------------------------------------------------------------------------


def test_doctor_says_the_macs_conditions_and_what_to_change_before_measuring(monkeypatch):
    from perfsuite.commands.doctor import conditions_findings, gather_facts

    mac(monkeypatch, MacConditions(power_source="Battery Power", battery_percent=42, energy_mode="low power",
                                   thermal_pressure="moderate"))
    findings = conditions_findings(gather_facts())
    warnings = [(f.summary, f.fix) for f in findings if f.status == "warning"]
    assert [fix for _, fix in warnings] == [
        "plug the Mac into its power adapter", "leave Low Power Mode (System Settings > Battery, or Energy Mode)",
        "let the machine cool until the thermal pressure is nominal (and pick High Power where offered)"]
    assert "on battery (42%)" in warnings[0][0]


def test_doctor_suggests_high_power_where_the_mac_offers_it(monkeypatch):
    from perfsuite.commands.doctor import conditions_findings, gather_facts

    mac(monkeypatch, MacConditions(high_power_offered=True))
    fixes = [f.fix for f in conditions_findings(gather_facts()) if f.status == "warning"]
    assert len(fixes) == 1 and fixes[0].startswith("pick High Power")


def test_doctor_facts_recorded_without_conditions_say_so():
    from perfsuite.commands.doctor import conditions_findings

    (finding,) = conditions_findings({"facts_version": 1})
    assert finding.status == "warning" and "hold no conditions" in finding.summary


def test_the_session_header_states_the_conditions_and_what_to_change(monkeypatch):
    double = mac(monkeypatch, AC_HIGH_POWER)
    lines = conditions_header({"mps": read_on(double, BATTERY_LOW_POWER)})
    assert lines[0].startswith("perfsuite: conditions (mps): on battery (42%); in Low Power Mode (High Power offered)")
    assert lines[1:] == ["perfsuite: before measuring: on battery (42%): plug the Mac into its power adapter",
                         "perfsuite: before measuring: in Low Power Mode: leave Low Power Mode (System Settings > "
                         "Battery, or Energy Mode)"]


# --- the site ---------------------------------------------------------------------------------------------------


def test_the_site_marks_a_change_of_conditions_as_it_marks_a_torch_upgrade_and_shows_each_sessions():
    from perfsuite.site.history import CaseHistory, marks, sessions_of_entry
    from perfsuite.site.pages import sessions_table

    plugged = Conditions(power_source="AC", energy_mode="high power")
    unplugged = Conditions(power_source="battery", battery_percent=42, energy_mode="high power")
    runs = (StoredRun(0.010, 9, (0.010,), None, "2026-12-01T15:00:00Z", "abc1234", plugged, plugged),
            StoredRun(0.013, 9, (0.013,), None, "2026-12-02T15:00:00Z", "def5678", unplugged, unplugged),
            StoredRun(0.013, 9, (0.013,), None, "2026-12-03T15:00:00Z", "0123abc"))
    entry = dataclasses.replace(history(0.01, (None, None)), runs=runs)
    case_history = CaseHistory("mps", "apple-m3-max", MPS_CASE, entry.memory_figure, MACHINE,
                               tuple(sessions_of_entry(entry, "baselines/mps/apple-m3-max.json")))
    assert [(m.index, m.kind, m.label) for m in marks(case_history)] == [
        (1, "conditions", "power source AC -> battery")]
    page = sessions_table(case_history)
    assert "on battery (42%); in High Power Mode" in page and "not recorded" in page
