"""Tracing: every aten op a workload runs, per phase, with call counts."""

import torch
import torch.nn.functional as F

from perfsuite import Workload
from perfsuite.coverage.support import COMPOSITE_EXPLICIT
from perfsuite.coverage.trace import OpRecorder, mps_like_choices, trace_workload


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        q = self.proj(x).view(2, 4, 2, 4).transpose(1, 2)
        return self.drop(F.scaled_dot_product_attention(q, q, q)).sum(dim=(1, 2))


def tiny_workload(module_factory=Attention):
    return Workload(
        name="tiny", build_module=lambda profile: module_factory(), batch_sizes={"smoke": (2,)},
        make_inputs=lambda profile, batch_size: torch.randn(batch_size, 4, 8),
        make_target=lambda profile, batch_size: torch.randn(batch_size, 4),
        loss=lambda output, target: F.mse_loss(output, target),
    )


def ops_in(trace, phase):
    return {count.op for count in trace.counts if count.phase == phase}


def test_a_training_step_is_traced_in_three_phases():
    trace = trace_workload(tiny_workload(), modes=("train",))
    assert {c.phase for c in trace.counts} == {"train/forward", "train/backward", "train/optimizer"}


def test_the_backward_phase_holds_the_gradient_ops():
    trace = trace_workload(tiny_workload(), modes=("train",))
    assert "aten::mse_loss_backward" in ops_in(trace, "train/backward")


def test_the_optimizer_phase_holds_adamw_updates():
    trace = trace_workload(tiny_workload(), modes=("train",))
    assert "aten::addcdiv_" in ops_in(trace, "train/optimizer")


def test_the_optimizers_record_function_markers_are_left_out():
    trace = trace_workload(tiny_workload(), modes=("train",))
    assert not [c.op for c in trace.counts if c.op.startswith("profiler::")]


def test_calls_are_counted():
    recorder = OpRecorder()
    x = torch.randn(3)
    with recorder:
        torch.relu(x)
        torch.relu(x)
    assert [(c.op, c.calls) for c in recorder.counts()] == [("aten::relu", 2)]


def test_inference_runs_in_eval_mode_so_dropout_draws_no_mask():
    trace = trace_workload(tiny_workload(), modes=("infer",))
    assert not {"aten::bernoulli_.float", "aten::native_dropout"} & ops_in(trace, "infer/forward")


def test_the_calls_of_a_followed_composite_kernel_are_recorded_inside_it():
    recorder = OpRecorder(lambda op: COMPOSITE_EXPLICIT if op == "aten::embedding" else None)
    with recorder:
        F.embedding(torch.tensor([0, 2]), torch.randn(4, 3))
    inner = {(c.op, c.inside) for c in recorder.counts()}
    assert ("aten::index_select", "aten::embedding") in inner


def test_without_mps_like_choices_the_cpu_picks_its_own_attention_kernel():
    q = torch.randn(1, 2, 4, 8)
    recorder = OpRecorder()
    with recorder:
        F.scaled_dot_product_attention(q, q, q)
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in {c.op for c in recorder.counts()}


def test_with_mps_like_choices_attention_takes_the_math_path_mps_takes():
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    recorder = OpRecorder()
    with mps_like_choices(), recorder:
        F.scaled_dot_product_attention(q, q, q).sum().backward()
    ops = {c.op for c in recorder.counts()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in ops and "aten::bmm" in ops
