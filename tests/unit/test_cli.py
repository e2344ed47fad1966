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


def test_list_rejects_an_unknown_dtype_with_the_valid_ones(capsys):
    assert main(["list", "--dtype", "fp64"]) == 2
    assert "valid: fp32, bf16, fp16" in capsys.readouterr().err


def test_doctor_exits_non_zero_when_the_asked_device_is_unusable(capsys):
    import torch

    if torch.backends.mps.is_available():
        import pytest

        pytest.skip("MPS is usable here")
    assert main(["doctor", "--device", "mps"]) == 1
    assert "mps" in capsys.readouterr().out
