"""FLOPs that admit what they miss: a step with ops whose work torch's counter does not count reports its FLOPs as
unknown, naming the ops, instead of a tiny number."""

import pytest
import torch

from perfsuite import Workload, workloads
from perfsuite.records import Case, Run
from perfsuite.run.measure import measure
from perfsuite.run.plan import MeasureSettings, RoundSettings
from perfsuite.run.steps import FlopsUnknownWarning, flop_count, uncounted_ops, warn_if_unknown
from perfsuite.run.worker import standalone_benchmark


def encoder_layer() -> torch.nn.Module:
    return torch.nn.TransformerEncoderLayer(64, 4, 256, batch_first=True).eval()


def test_the_encoder_layers_fused_fast_path_makes_the_flops_unknown_and_is_named():
    layer, x = encoder_layer(), torch.randn(8, 16, 64)

    def step():
        with torch.inference_mode():
            return layer(x)

    count = flop_count(step)
    assert count.uncounted_ops == ("aten._transformer_encoder_layer_fwd",)
    assert count.flops_per_step is None


def test_a_step_of_counted_ops_keeps_its_count():
    layer, x = torch.nn.Linear(64, 32), torch.randn(8, 64)
    assert flop_count(lambda: layer(x)).flops_per_step == 2 * 8 * 64 * 32


def test_the_cpus_flash_attention_is_counted_as_four_multiply_adds_per_query_key_and_dimension():
    q = torch.randn(2, 4, 16, 8)
    count = flop_count(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert count.flops_per_step == 4 * 2 * 4 * 16 * 16 * 8


@pytest.mark.parametrize("name, uncounted", [
    ("aten._efficient_attention_for_something_new", True),
    ("aten._native_multi_head_attention", True),
    ("aten.mm", False),        # counted
    ("aten.relu", False),      # no matrix work
    ("aten.add", False),
])
def test_only_compute_ops_without_a_formula_are_uncounted(name, uncounted):
    assert (uncounted_ops([name], {"aten.mm"}) == (name,)) is uncounted


def test_a_measured_inference_case_with_uncounted_ops_records_their_names(monkeypatch):
    workload = Workload(
        name="encoder", build_module=lambda profile: encoder_layer(),
        make_inputs=lambda profile, batch_size: torch.randn(batch_size, 16, 64), batch_sizes={"smoke": (2,)},
    )
    monkeypatch.setattr(workloads, "_REGISTRY", {**workloads.registered_workloads(), "encoder": workload})
    case = Case("cpu", "fp32", "encoder", 2, "infer", "smoke")
    rounds = RoundSettings(min_rounds=2, max_time_s=0.01)
    with pytest.warns(FlopsUnknownWarning, match="aten._transformer_encoder_layer_fwd"):
        run = measure(case, MeasureSettings(warmup_steps=1), rounds, standalone_benchmark(case.benchmark_id, rounds))
    assert isinstance(run, Run)
    assert run.flops_per_step is None and run.tflops_per_s is None
    assert run.facts["flops_uncounted_ops"] == "aten._transformer_encoder_layer_fwd"


def test_counting_a_step_with_uncounted_ops_warns_naming_them():
    layer, x = encoder_layer(), torch.randn(8, 16, 64)

    def step():
        with torch.inference_mode():
            return layer(x)

    with pytest.warns(FlopsUnknownWarning, match="FLOPs unknown: the step runs aten._transformer_encoder_layer_fwd"):
        count = flop_count(step)
        warn_if_unknown(count)
    assert count.flops_per_step is None
