"""The tests of this subject that start processes or take long: tests/sessions/test_workloads_sessions.py."""

import torch

from perfsuite.matrix.cases import Case
from perfsuite.run.steps import flop_count, prepare_case
from perfsuite.workloads import registered_workloads
from perfsuite.workloads.bert import BertLogits
from perfsuite.workloads.random_weights import build_on_meta, materialize_random_weights

BUILTIN = ["resnet18", "bert-base", "sd15-unet", "sd15-text2img", "sd15-vae-decode", "sd15-text-encoder"]


def test_the_articles_three_models_are_registered_in_order():
    assert list(registered_workloads())[: len(BUILTIN)] == BUILTIN


def test_training_step_changes_the_weights():
    case = Case("cpu", "bf16", "bert-base", 2, "train", "smoke")
    workload = registered_workloads()["bert-base"]
    prepared = prepare_case(case, workload)
    first_loss = prepared.run_step()
    assert torch.isfinite(first_loss)
    assert prepared.run_step() != first_loss


def test_fp16_training_runs_with_a_grad_scaler_on_cpu():
    prepared = prepare_case(Case("cpu", "fp16", "resnet18", 2, "train", "smoke"), registered_workloads()["resnet18"])
    assert torch.isfinite(prepared.run_step())


def test_random_weight_build_keeps_buffers_real():
    module = materialize_random_weights(build_on_meta(lambda: BertLogits("smoke")), "cpu")
    position_ids = module.model.bert.embeddings.position_ids
    assert torch.equal(position_ids[0, :5], torch.arange(5))
    assert all(p.device.type == "cpu" and torch.isfinite(p).all() for p in module.parameters())


def test_meta_build_allocates_no_parameter_memory():
    module = build_on_meta(lambda: BertLogits("smoke"))
    assert {p.device.type for p in module.parameters()} == {"meta"}


def test_random_weight_build_gives_norm_scales_one_and_biases_zero():
    module = materialize_random_weights(
        build_on_meta(lambda: torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))), "cpu"
    )
    assert torch.equal(module[1].weight, torch.ones(3))
    assert torch.equal(module[0].bias, torch.zeros(3))
    assert 0 < module[0].weight.std() < 1


def test_flop_count_of_a_linear_layer_is_two_multiply_adds_per_weight_and_row():
    layer = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(8, 64)
    assert flop_count(lambda: layer(x)).flops_per_step == 2 * 8 * 64 * 32


def test_config_digest_differs_between_profiles():
    workload = registered_workloads()["resnet18"]
    smoke = prepare_case(Case("cpu", "fp32", "resnet18", 2, "infer", "smoke"), workload)
    other_batch = prepare_case(Case("cpu", "fp32", "resnet18", 3, "infer", "smoke"), workload)
    assert smoke.config_digest != other_batch.config_digest
