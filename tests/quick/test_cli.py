"""The tests of this subject that start processes or take long: tests/sessions/test_cli_sessions.py."""

import subprocess
import sys
from pathlib import Path

import pytest

import perfsuite
from perfsuite.cli import main


def test_version_prints_the_package_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert capsys.readouterr().out.strip() == f"perfsuite {perfsuite.__version__}"


def test_list_prints_the_case_matrix(capsys):
    assert main(["list", "--profile", "smoke", "--device", "cpu", "--model", "bert-base", "--dtype", "fp32"]) == 0
    expected = ["cpu-fp32-bert-base-bs2-train-smoke", "cpu-fp32-bert-base-bs2-infer-smoke"]
    assert capsys.readouterr().out.split() == expected


def test_list_takes_the_matrix_options_and_ddp_processes_with_their_declared_help():
    import argparse

    from perfsuite.commands import list as list_command
    from perfsuite.matrix.axes import COMPILE_MODES
    from perfsuite.options.settings import OPTIONS

    parser = argparse.ArgumentParser()
    list_command.add_arguments(parser)
    actions = {action.dest: action for action in parser._actions}
    matrix_options = [o for o in OPTIONS if o.fills_matrix]
    assert [o.key for o in matrix_options] == ["device", "dtype", "model", "batch-size", "mode", "profile", "compile"]
    for option in [*matrix_options, next(o for o in OPTIONS if o.key == "ddp-processes")]:
        assert actions[option.raw_name].help == option.help
    assert ",".join(COMPILE_MODES) in actions["compile"].help
    assert "warmup" not in actions


def test_list_rejects_an_unknown_dtype_with_the_valid_ones(capsys):
    assert main(["list", "--dtype", "fp64"]) == 2
    assert "valid: fp32, bf16, fp16" in capsys.readouterr().err


def test_list_names_its_own_option_in_an_unknown_value_error(capsys):
    assert main(["list", "--device", "tpu"]) == 2
    error = capsys.readouterr().err
    assert "--device: unknown value tpu; valid: cpu, cuda, mps" in error
    assert "--perf-device" not in error


def test_doctor_exits_non_zero_when_the_asked_device_is_unusable(capsys):
    import torch

    if torch.backends.mps.is_available():
        import pytest

        pytest.skip("MPS is usable here")
    assert main(["doctor", "--device", "mps"]) == 1
    assert "mps" in capsys.readouterr().out


def test_list_reads_tool_perfsuite_as_pytest_does(tmp_path, capsys):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.perfsuite]\nprofile = "smoke"\nmodel = "resnet18"\ndevice = "cpu"\ndtype = "fp32"\n')
    assert main(["list", "--pyproject", str(pyproject)]) == 0
    assert capsys.readouterr().out.split() == ["cpu-fp32-resnet18-bs4-train-smoke", "cpu-fp32-resnet18-bs4-infer-smoke"]


def test_the_command_line_wins_over_tool_perfsuite_in_list(tmp_path, capsys):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.perfsuite]\nprofile = "smoke"\nmodel = "resnet18"\ndevice = "cpu"\ndtype = "fp32"\n')
    assert main(["list", "--pyproject", str(pyproject), "--mode", "infer"]) == 0
    assert capsys.readouterr().out.split() == ["cpu-fp32-resnet18-bs4-infer-smoke"]


@pytest.mark.parametrize(
    "command",
    [
        "import perfsuite",
        "from perfsuite.cli import main; main(['--version'])",
        "from perfsuite.cli import main; assert main(['compare', '{fixtures}/compare/run-mps.json', "
        "'{fixtures}/compare/baseline-cuda.json', '--output-dir', '{out}']) == 0",
        "from perfsuite.cli import main; sys.exit(main(['gains', '{fixtures}/gains/run-mps-and-loader.json']))",
    ],
    ids=["import", "version", "compare", "gains"],
)
def test_the_light_commands_do_not_import_torch(command, tmp_path):
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    command = command.format(fixtures=fixtures, out=tmp_path)
    code = (
        f"import sys\ntry:\n    {command}\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False", result.stderr
