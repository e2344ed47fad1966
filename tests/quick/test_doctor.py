"""`perfsuite doctor`: the pure diagnosis on facts of other machines, and the thin gathering on this one."""

from __future__ import annotations

import copy
import json
import os
import platform
import stat
from pathlib import Path

import pytest
import torch
from mps_double import MacFacts, MpsDouble

from perfsuite.cli import main as cli_main
from perfsuite.commands import doctor
from perfsuite.doctor.diagnosis import (
    FACTS_VERSION,
    Finding,
    at_least,
    device_is_usable,
    diagnose,
    facts_shape_errors,
    mps_fallback_setting,
    release,
    render_text,
    report_data,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"
FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def finding(findings: list[Finding], check: str) -> Finding:
    (match,) = [f for f in findings if f.check == check]
    return match


def linux_cpu_facts() -> dict:
    return {
        "facts_version": 1,
        "python": {"version": "3.11.7", "implementation": "CPython", "executable": "/venv/bin/python"},
        "platform": {"system": "Linux", "machine": "x86_64", "release": "6.1.0"},
        "torch": {
            "version": "2.13.0+cpu",
            "import_error": None,
            "mps_built": False,
            "mps_available": False,
            "cuda_version": None,
            "hip_version": None,
            "cuda_available": False,
            "cuda_devices": [],
            "cpu_fp16_autocast": True,
        },
        "environment": {"PYTORCH_ENABLE_MPS_FALLBACK": None, "PYTORCH_MPS_METAL_VERSION": None,
                        "CUDA_VISIBLE_DEVICES": None},
    }


def linux_cuda_facts() -> dict:
    facts = linux_cpu_facts()
    facts["torch"].update(
        version="2.8.0+cu126",
        cuda_version="12.6",
        cuda_available=True,
        cudnn_version=91002,
        cuda_devices=[{"name": "NVIDIA GeForce RTX 4060", "capability": "8.9", "total_memory_bytes": 8 * 2**30}],
    )
    return facts


def healthy_mac_facts() -> dict:
    facts = recorded("m2_max_macos14")
    facts["torch"]["version"] = "2.8.0"
    return facts


# Version reading


def test_release_ignores_the_local_build_suffix():
    assert release("2.13.0+cpu") == (2, 13, 0)


def test_release_of_an_unreadable_version_is_none():
    assert release("unknown") is None


def test_macos_12_2_is_not_at_least_12_3():
    assert at_least("12.2", (12, 3)) is False


def test_a_pre_release_counts_as_its_release():
    assert at_least("2.6.0a0+git1234", (2, 6)) is True


# Recorded facts of other machines


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_recorded_facts_are_diagnosable(path):
    assert facts_shape_errors(json.loads(path.read_text())) == []


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_every_finding_that_is_not_ok_comes_with_a_fix(path):
    findings = diagnose(json.loads(path.read_text()))
    assert [f.check for f in findings if f.status != "ok" and not f.fix] == []


def test_m2_max_on_macos_14_can_use_mps():
    assert device_is_usable(diagnose(recorded("m2_max_macos14")), "mps")


def test_m2_max_with_torch_2_5_is_warned_that_bf16_autocast_needs_torch_2_6():
    bf16 = finding(diagnose(recorded("m2_max_macos14")), "mps-bf16")
    assert (bf16.status, bf16.fix) == ("warning", 'python -m pip install --upgrade "torch>=2.6"')


def test_m2_max_with_torch_2_5_is_warned_that_grad_scaler_needs_torch_2_8():
    scaler = finding(diagnose(recorded("m2_max_macos14")), "mps-grad-scaler")
    assert scaler.status == "warning" and '"torch>=2.8"' in scaler.fix


def test_m2_max_with_torch_2_8_has_every_mps_precision_check_ok():
    findings = diagnose(healthy_mac_facts())
    assert [finding(findings, c).status for c in ("mps-fp16-autocast", "mps-bf16", "mps-grad-scaler")] == ["ok"] * 3


def test_rosetta_python_makes_mps_unusable():
    rosetta = finding(diagnose(recorded("rosetta_python")), "rosetta")
    assert (rosetta.status, rosetta.devices) == ("problem", ("mps",))


def test_rosetta_fix_asks_for_an_arm64_python():
    assert "install an arm64 Python" in finding(diagnose(recorded("rosetta_python")), "rosetta").fix


def test_a_known_cause_is_not_repeated_as_a_generic_mps_problem():
    assert [f.check for f in diagnose(recorded("rosetta_python")) if f.check == "mps"] == []


def test_macos_12_2_makes_mps_unusable_with_a_macos_update_as_fix():
    macos = finding(diagnose(recorded("macos_12_2")), "macos")
    assert (macos.status, macos.devices) == ("problem", ("mps",)) and "update macOS to 12.3" in macos.fix


def test_macos_12_2_is_warned_that_bf16_on_mps_needs_macos_14():
    bf16 = finding(diagnose(recorded("macos_12_2")), "mps-bf16")
    assert bf16.summary == "bf16 on MPS needs macOS 14.0 or later; this is macOS 12.2"


def test_torch_built_without_mps_on_a_mac_is_fixed_by_reinstalling_from_pypi():
    mps = finding(diagnose(recorded("torch_without_mps")), "mps")
    assert mps.status == "problem" and "reinstall torch from PyPI" in mps.fix


def test_intel_mac_without_mps_makes_mps_unusable():
    facts = recorded("macos_12_2")
    facts["platform"].update(machine="x86_64", apple_silicon=False, macos_version="13.6")
    assert finding(diagnose(facts), "apple-silicon").status == "problem"


# One fact changed at a time


def test_mps_unavailable_for_no_visible_reason_gets_the_article_fixes():
    facts = healthy_mac_facts()
    facts["torch"]["mps_available"] = False
    mps = finding(diagnose(facts), "mps")
    assert "macOS is >= 13.0" in mps.fix and "xcode-select --install" in mps.fix


def test_missing_xcode_command_line_tools_is_a_warning_fixed_by_xcode_select_install():
    facts = healthy_mac_facts()
    facts["platform"]["xcode_command_line_tools"] = None
    clt = finding(diagnose(facts), "xcode-clt")
    assert (clt.status, clt.fix) == ("warning", "xcode-select --install")


def test_missing_xcode_command_line_tools_leaves_mps_usable():
    facts = healthy_mac_facts()
    facts["platform"]["xcode_command_line_tools"] = None
    assert device_is_usable(diagnose(facts), "mps")


def test_mps_fallback_enabled_warns_that_timings_include_cpu_work():
    facts = healthy_mac_facts()
    facts["environment"]["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"
    fallback = finding(diagnose(facts), "mps-fallback")
    assert fallback.status == "warning" and "timings include CPU work" in fallback.summary


def test_mps_recommended_max_memory_is_shown_in_gib():
    facts = healthy_mac_facts()
    facts["torch"]["mps_recommended_max_memory_bytes"] = 22 * 2**30
    assert "recommended max memory 22.0 GiB" in finding(diagnose(facts), "mps").summary


def test_cpu_fp16_autocast_that_stays_fp32_is_a_warning_for_the_cpu():
    facts = linux_cpu_facts()
    facts["torch"]["cpu_fp16_autocast"] = False
    fp16 = finding(diagnose(facts), "cpu-fp16-autocast")
    assert (fp16.status, fp16.devices) == ("warning", ("cpu",))


def test_torch_that_does_not_import_makes_every_device_unusable():
    facts = linux_cpu_facts()
    facts["torch"] = {"version": None, "import_error": "ImportError: libtorch_cpu.so: cannot open shared object"}
    findings = diagnose(facts)
    assert [device_is_usable(findings, d) for d in ("cpu", "mps", "cuda")] == [False, False, False]


def test_torch_older_than_2_0_is_a_problem():
    facts = linux_cpu_facts()
    facts["torch"]["version"] = "1.13.1"
    assert finding(diagnose(facts), "torch").status == "problem"


def test_python_older_than_3_10_is_a_problem():
    facts = linux_cpu_facts()
    facts["python"]["version"] = "3.9.18"
    assert finding(diagnose(facts), "python").status == "problem"


def test_linux_facts_explain_that_mps_is_absent_because_torch_has_no_mps():
    mps = finding(diagnose(linux_cpu_facts()), "mps")
    assert "MPS exists only on macOS" in mps.summary and "was built without MPS" in mps.summary


def test_linux_facts_have_no_mac_only_checks():
    checks = {f.check for f in diagnose(linux_cpu_facts())}
    assert checks.isdisjoint({"macos", "rosetta", "xcode-clt", "mps-fallback", "mps-bf16"})


def test_cuda_devices_are_listed_with_versions_capability_and_memory():
    cuda = finding(diagnose(linux_cuda_facts()), "cuda")
    assert cuda.summary == "CUDA 12.6, cuDNN 91002: 0: NVIDIA GeForce RTX 4060 (sm_89, 8.0 GiB)"


def test_cuda_build_that_sees_no_gpu_points_to_the_driver():
    facts = linux_cuda_facts()
    facts["torch"].update(cuda_available=False, cuda_devices=[])
    assert "nvidia-smi" in finding(diagnose(facts), "cuda").fix


def test_cuda_hidden_by_cuda_visible_devices_says_so():
    facts = linux_cuda_facts()
    facts["torch"].update(cuda_available=False, cuda_devices=[])
    facts["environment"]["CUDA_VISIBLE_DEVICES"] = ""
    assert "CUDA_VISIBLE_DEVICES=''" in finding(diagnose(facts), "cuda").fix


def test_cuda_on_a_mac_is_unusable_and_points_to_mps():
    cuda = finding(diagnose(recorded("m2_max_macos14")), "cuda")
    assert cuda.status == "problem" and "--perf-device mps" in cuda.fix


# Facts shape


def test_facts_of_another_version_are_not_diagnosable():
    facts = linux_cpu_facts()
    facts["facts_version"] = 2
    assert facts_shape_errors(facts) == ["facts_version is 2, this perfsuite reads 1"]


def test_facts_without_a_torch_section_are_not_diagnosable():
    facts = linux_cpu_facts()
    del facts["torch"]
    assert facts_shape_errors(facts) == ["section 'torch' is missing or not an object"]


def test_facts_with_a_number_for_a_version_are_not_diagnosable():
    facts = linux_cpu_facts()
    facts["torch"]["version"] = 2.5
    assert facts_shape_errors(facts) == ['torch.version is 2.5, expected a version string such as "2.5.1" or null']


# Reports


def test_text_report_prints_the_fix_under_its_problem():
    lines = render_text(recorded("rosetta_python"), diagnose(recorded("rosetta_python")), "mps").splitlines()
    problem_line = next(i for i, line in enumerate(lines) if "problem  rosetta" in line)
    assert lines[problem_line + 1].strip().startswith("fix: install an arm64 Python")


def test_text_report_ends_with_the_verdict_naming_the_blocking_check():
    report = render_text(recorded("macos_12_2"), diagnose(recorded("macos_12_2")), "mps")
    assert report.splitlines()[-1] == "--device mps: unusable, see macos above"


def test_json_report_says_whether_the_asked_device_is_usable():
    facts = recorded("torch_without_mps")
    assert report_data(facts, diagnose(facts), "mps")["device_usable"] is False


# The command on this machine and on recorded facts


def test_gathered_facts_are_plain_json_data():
    facts = doctor.gather_facts()
    assert json.loads(json.dumps(facts)) == facts


def test_gathered_facts_are_diagnosable():
    assert facts_shape_errors(doctor.gather_facts()) == []


@pytest.mark.skipif(platform.system() != "Linux", reason="states what a Linux machine has")
def test_on_linux_the_doctor_exits_1_for_mps(capsys):
    assert cli_main(["doctor", "--device", "mps"]) == 1
    assert "MPS is absent" in capsys.readouterr().out


def test_the_doctor_exits_0_for_the_cpu_here():
    assert cli_main(["doctor", "--device", "cpu"]) == 0


def test_recorded_rosetta_facts_exit_1_for_mps(capsys):
    assert cli_main(["doctor", "--facts", str(FIXTURES / "rosetta_python.json"), "--device", "mps"]) == 1


def test_recorded_m2_max_facts_exit_0_for_mps():
    assert cli_main(["doctor", "--facts", str(FIXTURES / "m2_max_macos14.json"), "--device", "mps"]) == 0


def test_saved_facts_are_read_back_unchanged(tmp_path, capsys):
    path = tmp_path / "here.json"
    cli_main(["doctor", "--save-facts", str(path), "--format", "json"])
    printed = json.loads(capsys.readouterr().out)["facts"]
    assert doctor.load_facts(path) == printed


def test_a_facts_file_that_is_not_json_exits_2_naming_the_file(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert cli_main(["doctor", "--facts", str(path)]) == 2
    assert str(path) in capsys.readouterr().err


def test_a_missing_facts_file_is_an_error_naming_the_file(tmp_path):
    with pytest.raises(doctor.FactsFileError, match=r"missing\.json: no such file\. Record facts with `perfsuite"):
        doctor.load_facts(tmp_path / "missing.json")


def test_facts_and_save_facts_together_are_refused():
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["doctor", "--facts", "a.json", "--save-facts", "b.json"])
    assert exit_info.value.code == 2


# Gathering on a Mac, with its commands answered from a table


def fake_mac(monkeypatch, answers: dict[tuple[str, ...], str], mac_ver: str, machine: str = "arm64") -> None:
    monkeypatch.setattr(doctor.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(doctor.platform, "machine", lambda: machine)
    monkeypatch.setattr(doctor.platform, "mac_ver", lambda: (mac_ver, ("", "", ""), ""))
    monkeypatch.setattr(doctor, "_command_output", lambda command, extra_env=None: answers.get(tuple(command)))


ROSETTA_ANSWERS = {
    ("sysctl", "-n", "sysctl.proc_translated"): "1",
    ("sysctl", "-n", "hw.optional.arm64"): "1",
}


def test_a_rosetta_process_is_recorded_as_translated_on_apple_silicon(monkeypatch):
    fake_mac(monkeypatch, ROSETTA_ANSWERS, "14.4", machine="x86_64")
    facts = doctor._platform_facts()
    assert (facts["rosetta_translated"], facts["apple_silicon"]) == (True, True)


def test_an_intel_mac_without_the_translation_key_is_recorded_as_native(monkeypatch):
    fake_mac(monkeypatch, {}, "13.6", machine="x86_64")
    facts = doctor._platform_facts()
    assert (facts["rosetta_translated"], facts["apple_silicon"]) == (False, False)


def test_macos_reported_as_10_16_is_asked_again_without_the_compat_shim(monkeypatch):
    fake_mac(monkeypatch, {("sw_vers", "-productVersion"): "14.5"}, "10.16")
    assert doctor._platform_facts()["macos_version"] == "14.5"


def test_missing_xcode_command_line_tools_are_recorded_as_none(monkeypatch):
    fake_mac(monkeypatch, {}, "14.5")
    assert doctor._platform_facts()["xcode_command_line_tools"] is None


def test_recorded_fixture_is_not_changed_by_diagnosis():
    facts = recorded("m2_max_macos14")
    before = copy.deepcopy(facts)
    diagnose(facts)
    assert facts == before


# The minimum macOS follows the torch release


def test_macos_13_with_torch_2_13_makes_mps_unusable_naming_macos_14():
    facts = healthy_mac_facts()
    facts["platform"]["macos_version"] = "13.6"
    facts["torch"]["version"] = "2.13.0"
    macos = finding(diagnose(facts), "macos")
    assert (macos.status, macos.summary) == (
        "problem",
        "macOS 13.6 is older than 14.0: the MPS backend of torch 2.13.0 needs 14.0 or later",
    )


def test_macos_13_with_torch_2_8_can_use_mps():
    facts = healthy_mac_facts()
    facts["platform"]["macos_version"] = "13.6"
    assert device_is_usable(diagnose(facts), "mps")


def test_macos_12_5_with_torch_2_6_makes_mps_unusable_naming_macos_13():
    facts = healthy_mac_facts()
    facts["platform"]["macos_version"] = "12.5"
    facts["torch"]["version"] = "2.6.0"
    assert "older than 13.0" in finding(diagnose(facts), "macos").summary


def test_macos_14_with_torch_2_15_makes_mps_unusable_naming_macos_15_and_the_last_torch_for_macos_14():
    facts = healthy_mac_facts()
    facts["torch"]["version"] = "2.15.0"
    macos = finding(diagnose(facts), "macos")
    assert (macos.status, macos.summary) == (
        "problem",
        "macOS 14.5 is older than 15.0: the MPS backend of torch 2.15.0 needs 15.0 or later",
    )
    assert 'python -m pip install "torch<2.15"' in macos.fix


def test_macos_15_with_torch_2_15_can_use_mps():
    facts = healthy_mac_facts()
    facts["torch"]["version"] = "2.15.0"
    facts["platform"]["macos_version"] = "15.1"
    assert device_is_usable(diagnose(facts), "mps")


# A torch newer than the newest release read is never taken for it silently


def test_torch_2_16_is_told_its_macos_requirement_is_carried_over_unchecked():
    facts = healthy_mac_facts()
    facts["torch"]["version"] = "2.16.0"
    facts["platform"]["macos_version"] = "15.1"
    assert finding(diagnose(facts), "macos").summary == (
        "macOS 15.1 (the MPS backend of torch 2.16.0 needs >= 15.0) (unchecked for torch 2.16.0: assumed as in torch "
        "2.15.0, the newest release whose macOS wheel was read)"
    )


def test_torch_2_16_gets_a_warning_naming_the_facts_assumed_from_2_15():
    facts = healthy_mac_facts()
    facts["torch"]["version"] = "2.16.0"
    assumed = finding(diagnose(facts), "mps-facts")
    assert assumed.status == "warning"
    assert assumed.summary.startswith("MPS facts unchecked for torch 2.16.0: the macOS MPS needs, the ops that fall "
                                      "back to the CPU and how MPS events are timed are assumed as in torch 2.15.0")
    assert "python -m perfsuite.coverage.wheelcheck --torch 2.16.0" in assumed.fix


@pytest.mark.parametrize("torch_version", ["2.13.0", "2.14.1", "2.15.0"])
def test_a_release_read_has_its_mps_facts_ok(torch_version):
    facts = healthy_mac_facts()
    facts["torch"]["version"] = torch_version
    assert finding(diagnose(facts), "mps-facts").status == "ok"


# PYTORCH_ENABLE_MPS_FALLBACK as torch reads it (std::stoi up to 2.7, c10::utils::get_env from 2.8)


@pytest.mark.parametrize(("value", "enabled"), [(None, False), ("0", False), ("1", True), ("2", True), (" 1", True),
                                                ("+1", True), ("00", False), ("yes", None)])
def test_mps_fallback_setting_is_read_as_torch_2_7_reads_it(value, enabled):
    assert mps_fallback_setting(value, (2, 7, 1)) is enabled


@pytest.mark.parametrize(("value", "enabled"), [(None, False), ("0", False), ("1", True), ("00", True),
                                                ("yes", True), ("", True)])
def test_mps_fallback_setting_is_read_as_torch_2_15_reads_it(value, enabled):
    assert mps_fallback_setting(value, (2, 15, 0)) is enabled


def test_mps_fallback_set_to_2_warns_that_timings_include_cpu_work():
    facts = healthy_mac_facts()
    facts["environment"]["PYTORCH_ENABLE_MPS_FALLBACK"] = "2"
    fallback = finding(diagnose(facts), "mps-fallback")
    assert fallback.status == "warning" and "timings include CPU work" in fallback.summary


def test_mps_fallback_set_to_a_word_under_torch_2_7_is_a_warning_to_unset_it():
    facts = healthy_mac_facts()
    facts["torch"]["version"] = "2.7.1"
    facts["environment"]["PYTORCH_ENABLE_MPS_FALLBACK"] = "true"
    fallback = finding(diagnose(facts), "mps-fallback")
    assert fallback.status == "warning" and "not an integer" in fallback.summary


def test_mps_fallback_set_to_a_word_under_torch_2_8_turns_the_fallback_on():
    facts = healthy_mac_facts()
    facts["environment"]["PYTORCH_ENABLE_MPS_FALLBACK"] = "false"
    fallback = finding(diagnose(facts), "mps-fallback")
    assert fallback.status == "warning" and "timings include CPU work" in fallback.summary


# PYTORCH_MPS_METAL_VERSION, read from torch 2.15


def metal_facts(value: str, torch_version: str = "2.15.0", macos: str = "15.1") -> dict:
    facts = healthy_mac_facts()
    facts["torch"]["version"], facts["platform"]["macos_version"] = torch_version, macos
    facts["environment"]["PYTORCH_MPS_METAL_VERSION"] = value
    return facts


def test_a_metal_version_torch_ignores_is_a_warning_naming_the_default_it_compiles_for():
    metal = finding(diagnose(metal_facts("3")), "mps-metal-version")
    assert metal.status == "warning" and "Ignoring PYTORCH_MPS_METAL_VERSION" in metal.summary
    assert "compiles for Metal 3.2, this macOS's default" in metal.summary


def test_a_metal_version_newer_than_the_macos_default_is_a_warning_that_torch_fails():
    metal = finding(diagnose(metal_facts("4.0")), "mps-metal-version")
    assert metal.status == "warning" and "fails rather than falls back" in metal.summary


def test_metal_4_0_on_macos_26_is_ok():
    assert finding(diagnose(metal_facts("4.0", macos="26.1")), "mps-metal-version").status == "ok"


def test_the_metal_version_has_no_effect_before_torch_2_15():
    metal = finding(diagnose(metal_facts("abc", torch_version="2.14.1")), "mps-metal-version")
    assert metal.status == "ok" and "has no effect" in metal.summary


def test_no_metal_version_finding_when_the_variable_is_unset():
    assert [f for f in diagnose(healthy_mac_facts()) if f.check == "mps-metal-version"] == []


# The recorded facts agree with what gather_facts records on those machines (a test double of torch's MPS
# bindings stands in for each Mac: this checks the facts' plumbing, not Metal)

# The CPU fp16 autocast probe's answer per torch release, as issue 16 records it (a matmul under CPU fp16
# autocast stays float32 on 2.1, is float16 from 2.2).
CPU_FP16_AUTOCAST_BY_TORCH = {"2.1.2": False, "2.2.2": True, "2.4.0a0+gitd990dad": True, "2.5.1": True}


def gathered_on(monkeypatch, facts: dict) -> dict:
    """What gather_facts records on the Mac that `facts` describe, with torch's MPS bindings doubled."""
    platform_facts, torch_facts = facts["platform"], facts["torch"]
    mac = MacFacts(
        macos_version=platform_facts["macos_version"], darwin_release=platform_facts["release"],
        machine=platform_facts["machine"], chip=platform_facts["chip"], apple_silicon=platform_facts["apple_silicon"],
        rosetta_translated=platform_facts["rosetta_translated"],
        xcode_command_line_tools=platform_facts["xcode_command_line_tools"],
    )
    double = MpsDouble(built=torch_facts["mps_built"], available=torch_facts["mps_available"], mac=mac)
    double.install(lambda target, name, value: monkeypatch.setattr(target, name, value, raising=False))
    torch_release = release(torch_facts["version"])
    if torch_release < (2, 4):  # torch.mps.device_count() is absent from 2.1.2 and 2.2.2
        monkeypatch.delattr(torch.mps, "device_count", raising=False)
    if torch_release < (2, 5):  # torch.mps.recommended_max_memory() arrived in 2.5
        monkeypatch.delattr(torch.mps, "recommended_max_memory", raising=False)
    return doctor.gather_facts()


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_recorded_platform_facts_are_what_gather_facts_records_there(path, monkeypatch):
    facts = json.loads(path.read_text())
    assert gathered_on(monkeypatch, facts)["platform"] == facts["platform"]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_recorded_mps_facts_are_what_gather_facts_records_there(path, monkeypatch):
    facts = json.loads(path.read_text())
    keys = ("mps_built", "mps_available", "mps_device_count", "mps_recommended_max_memory_bytes")
    gathered = gathered_on(monkeypatch, facts)["torch"]
    assert {k: facts["torch"][k] for k in keys} == {k: gathered[k] for k in keys}


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_recorded_cpu_fp16_autocast_is_what_the_probe_answers_on_that_torch(path):
    facts = json.loads(path.read_text())
    assert facts["torch"]["cpu_fp16_autocast"] is CPU_FP16_AUTOCAST_BY_TORCH[facts["torch"]["version"]]


def test_a_rosetta_process_records_the_virtual_chip_sysctl_reports(monkeypatch):
    facts = recorded("rosetta_python")
    assert gathered_on(monkeypatch, facts)["platform"]["chip"] == "VirtualApple @ 2.50GHz"


def test_save_facts_refuses_a_fifo_naming_it_and_leaves_it_a_fifo(tmp_path, capsys):
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    assert cli_main(["doctor", "--save-facts", str(fifo)]) == 2
    assert f"{fifo}: is a FIFO (named pipe), not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["facts.json"]


def test_save_facts_refuses_a_symlink_to_a_device_and_keeps_the_link(tmp_path, capsys):
    link = tmp_path / "facts.json"
    link.symlink_to(os.devnull)
    assert cli_main(["doctor", "--save-facts", str(link)]) == 2
    assert "is a character device (/dev/null), not a regular file" in capsys.readouterr().err
    assert os.readlink(link) == os.devnull


def test_save_facts_refuses_a_folder_and_leaves_no_partial_file(tmp_path, capsys):
    folder = tmp_path / "facts.json"
    folder.mkdir()
    assert cli_main(["doctor", "--save-facts", str(folder)]) == 2
    assert f"{folder}: is a folder, not a regular file" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["facts.json"]


def test_save_facts_makes_a_missing_folder(tmp_path):
    path = tmp_path / "new" / "facts.json"
    cli_main(["doctor", "--save-facts", str(path)])
    assert doctor.load_facts(path)["facts_version"] == FACTS_VERSION


def test_save_facts_under_a_file_exits_2_naming_the_path(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("keep")
    assert cli_main(["doctor", "--save-facts", str(blocker / "facts.json")]) == 2
    assert f"cannot write {blocker / 'facts.json'}" in capsys.readouterr().err
    assert blocker.read_text() == "keep"
