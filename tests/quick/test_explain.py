"""The diff of two op profiles (`perfsuite.judge.explain`), how its lines read, how profiles travel and merge."""

from __future__ import annotations

import time

import pytest

from perfsuite.judge.explain import OUTSIDE_OPS, explain, wants_explanation
from perfsuite.records import OpProfile, OpTime
from perfsuite.render.ab import TERMINAL_EXPLANATION_LINES, explanation_lines, terminal_explanation
from perfsuite.run.devices import backend
from perfsuite.run.profiling import OTHER_OPS, merge_profiles, profile_ops
from perfsuite.run.wire import op_profile_from_json, op_profile_to_json

# What an MPS profile holds beside its ops (the MPS backend's traits).
MPS = {"device": "mps", "watches_fallbacks": True, "limits": (backend("mps").op_profile_limit,)}
# MPSFallback.mm's warning, as torch 2.13 prints it.
FALLBACK = ("The operator 'aten::erfinv' is not currently supported on the MPS backend and will fall back to run on "
            "the CPU. This may have performance implications.")


def profile(ops: dict[str, tuple[int, float]], outside_s: float = 0.001, steps: int = 10, device: str = "cpu",
            **extra: object) -> OpProfile:
    """A profile of `steps` steps with these ops (name: calls, host self seconds, both totals)."""
    kept = tuple(OpTime(name, calls, host_s) for name, (calls, host_s) in ops.items())
    host_s = outside_s + sum(host_s for _, host_s in ops.values())
    return OpProfile(device=device, steps=steps, host_s=host_s, host_outside_ops_s=outside_s, ops=kept,
                     **extra)


BASE = {"aten::linear": (20, 0.010), "aten::native_layer_norm": (20, 0.004), "aten::relu": (20, 0.001)}


def test_an_op_called_twice_as_often_is_named_with_its_calls_and_the_share_it_accounts_for():
    head = {**BASE, "aten::native_layer_norm": (40, 0.008)}
    why = explain(profile(BASE), profile(head), measured_change_s=0.0005)
    assert why.top[0].name == "aten::native_layer_norm"
    assert (why.top[0].base_calls, why.top[0].head_calls) == (2, 4)  # per step
    assert why.top[0].change_s == pytest.approx(0.0004)
    assert why.profiled_change_s == pytest.approx(0.0004)
    assert why.explained_share == pytest.approx(0.8) and why.profiled_share == pytest.approx(1.0)
    assert [op.name for op in why.calls_changed] == ["aten::native_layer_norm"]
    assert why.new_ops == () and why.gone_ops == () and why.basis == "host"


def test_a_wait_outside_every_op_is_its_own_contributor():
    why = explain(profile(BASE, outside_s=0.001), profile(BASE, outside_s=0.011), measured_change_s=0.001)
    assert why.top[0].name == OUTSIDE_OPS and why.top[0].change_s == pytest.approx(0.001)
    assert why.host_outside_ops_s == pytest.approx((0.0001, 0.0011))
    assert why.calls_changed == () and why.explained_share == pytest.approx(1.0)
    assert "host time outside ops (Python, hooks, waits): 0.1 -> 1.1 ms a step, +1 ms" in [
        text for _, text in explanation_lines(why)]


def test_identical_profiles_change_no_op_and_name_no_contributor():
    why = explain(profile(BASE), profile(BASE), measured_change_s=0.0)
    assert why.top == () and why.calls_changed == () and why.profiled_change_s == 0
    assert why.explained_share is None and why.profiled_share is None
    assert "calls changed: none; new ops: none; gone: none" in [text for _, text in explanation_lines(why)]


def test_new_and_gone_ops_are_named_but_not_where_a_side_kept_only_its_largest_ops():
    head = {"aten::linear": (20, 0.010), "aten::gelu": (20, 0.002)}
    why = explain(profile(BASE), profile(head), measured_change_s=-0.0003)
    assert why.new_ops == ("aten::gelu",) and set(why.gone_ops) == {"aten::native_layer_norm", "aten::relu"}
    truncated = profile(BASE, other_ops=OpTime(OTHER_OPS, 100, 0.001))
    unsure = explain(truncated, profile(head), measured_change_s=-0.0003)
    assert unsure.new_ops == ()  # gelu may be among the base's smaller ops
    assert any("only each side's largest ops" in limit for limit in unsure.limits)


def test_a_busy_cuda_device_is_explained_by_device_time_against_the_measured_change():
    def cuda(norm_calls: int, norm_device_s: float) -> OpProfile:
        ops = (OpTime("aten::native_batch_norm", norm_calls, 0.001, norm_device_s),
               OpTime("aten::convolution", 20, 0.002, 0.050))
        kernels = (OpTime("bn_fw_kernel", norm_calls, 0.0, norm_device_s), OpTime("conv_kernel", 20, 0.0, 0.050))
        return OpProfile("cuda", 10, 0.004, 0.001, ops, kernels=kernels, device_wait_s=0.05)

    why = explain(cuda(20, 0.010), cuda(40, 0.020), measured_change_s=0.0011)
    assert why.basis == "device"
    assert why.top[0].name == "aten::native_batch_norm" and why.top[0].change_s == pytest.approx(0.001)
    assert why.explained_share == pytest.approx(1 / 1.1)
    # a host-bound CUDA case (kernels a small share of the step) is explained by host time
    idle = OpProfile("cuda", 10, 0.1, 0.05, (OpTime("aten::add", 10, 0.05, 0.001),),
                     kernels=(OpTime("add_kernel", 10, 0.0, 0.001),))
    assert explain(idle, idle, 0.0).basis == "host"


def test_unattributable_regions_and_mps_say_what_cannot_be_known():
    region = (OpTime("Torch-Compiled Region: 0/0", 10, 0.004),)
    why = explain(profile(BASE, regions=region), profile(BASE, regions=region), 0.0)
    assert any("cannot split their time per op" in limit for limit in why.limits)
    mps = explain(profile(BASE, **MPS), profile(BASE, **MPS), 0.0)
    assert any("ProfilerActivity.MPS" in limit and "#99037" in limit for limit in mps.limits)
    assert mps.copy_calls == (0, 0) and why.copy_calls is None


def test_an_op_falling_back_to_the_cpu_at_head_only_is_a_new_fallback():
    head = profile({**BASE, "aten::erfinv": (10, 0.002)}, fallback_warnings=((FALLBACK, 10),), **MPS)
    why = explain(profile(BASE, **MPS), head, measured_change_s=0.0002)
    assert why.new_fallbacks == ("aten::erfinv",) and why.fallbacks_changed == (("aten::erfinv", 0.0, 1.0),)
    assert why.gone_fallbacks == ()
    assert "MPS CPU fallbacks: aten::erfinv new, 0 -> 1 calls a step" in terminal_explanation(why)


def test_the_terminal_shows_at_most_five_lines_the_summary_every_one():
    region = (OpTime("CompiledFunction", 10, 0.001),)
    head = profile({**BASE, "aten::native_layer_norm": (40, 0.008), "aten::gelu": (20, 0.001)},
                   fallback_warnings=((FALLBACK, 10),), regions=region, **MPS)
    why = explain(profile(BASE, regions=region, **MPS), head, 0.0005)
    every = explanation_lines(why)
    shown = terminal_explanation(why)
    assert len(shown) == TERMINAL_EXPLANATION_LINES < len(every)
    assert shown[0].startswith("why, by the ops") and shown == [text for _, text in every if text in shown]


@pytest.mark.parametrize("mode,status,wanted", [
    ("changed", "regressed", True), ("changed", "improved", True), ("changed", "unchanged", False),
    ("changed", None, False), ("all", None, True), ("all", "unchanged", True), ("none", "regressed", False),
])
def test_which_cases_are_explained(mode, status, wanted):
    assert wants_explanation(mode, status) is wanted


def test_a_profile_travels_as_json_and_turns_merge_by_their_median():
    turn = profile(BASE, device="cuda", fallback_warnings=((FALLBACK, 2),), other_ops=OpTime(OTHER_OPS, 5, 0.001))
    assert op_profile_from_json(op_profile_to_json(turn)) == turn
    slow = profile({**BASE, "aten::linear": (20, 0.100)}, outside_s=0.050)
    merged = merge_profiles([turn, turn, slow])
    linear = next(op for op in merged.ops if op.name == "aten::linear")
    assert merged.steps == 30 and linear.calls == 60
    assert linear.host_self_s == pytest.approx(0.030)  # the median turn's 1 ms a step, over 30 steps: the burst is out
    assert merged.host_outside_ops_s == pytest.approx(0.003)
    assert merged.fallback_warnings == ((FALLBACK, 4),)


def test_an_op_below_a_turns_largest_keeps_its_exact_calls_and_its_time_from_the_turns_that_kept_it():
    every_call = tuple((name, calls) for name, (calls, _) in BASE.items())
    whole = profile(BASE, op_calls=every_call)
    without_relu = {name: value for name, value in BASE.items() if name != "aten::relu"}
    cut = profile(without_relu, other_ops=OpTime(OTHER_OPS, 20, 0.001), op_calls=every_call)
    merged = merge_profiles([whole, cut, cut, whole])
    relu = next(op for op in merged.ops if op.name == "aten::relu")
    assert relu.calls == 80 and dict(merged.op_calls)["aten::relu"] == 80  # 2 a step over 40 steps, not 1
    assert relu.host_self_s == pytest.approx(0.004)  # 0.1 ms a step, from the two turns that kept it, not 0


def test_an_op_below_the_largest_on_one_side_compares_its_calls_exactly():
    every_call = tuple((name, calls) for name, (calls, _) in BASE.items())
    without_relu = {name: value for name, value in BASE.items() if name != "aten::relu"}
    cut = profile(without_relu, other_ops=OpTime(OTHER_OPS, 20, 0.001), op_calls=every_call)
    why = explain(profile(BASE, op_calls=every_call), cut, measured_change_s=0.0)
    assert why.calls_changed == () and why.new_ops == () and why.gone_ops == ()
    assert any("keep their times" in limit for limit in why.limits)


def test_every_untouched_op_calls_equal_on_both_sides_when_one_layer_runs_twice():
    """The real profiler, in turns merged as an A/B job merges them (through their JSON), on a 3-layer net's training
    step whose head runs its middle Linear twice: each turn keeps only its largest ops' times, yet every op's calls
    a step are whole and the ops the change does not touch (the activations, the loss, the optimizer) read equal."""
    import torch

    def training_step(twice: bool):
        torch.manual_seed(0)
        first, middle, last = torch.nn.Linear(64, 256), torch.nn.Linear(256, 256), torch.nn.Linear(256, 10)
        optimizer = torch.optim.Adam([*first.parameters(), *middle.parameters(), *last.parameters()])
        inputs, targets = torch.randn(64, 64), torch.randint(0, 10, (64,))

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            hidden = middle(torch.relu(first(inputs)))
            hidden = torch.relu(middle(hidden) if twice else hidden)
            torch.nn.functional.cross_entropy(last(hidden), targets).backward()
            optimizer.step()

        step()
        return step

    sides = {"base": training_step(False), "head": training_step(True)}
    turns: dict[str, list[OpProfile]] = {"base": [], "head": []}
    for _ in range(4):
        for name, step in sides.items():
            turns[name].append(op_profile_from_json(op_profile_to_json(profile_ops(step, backend("cpu"), 2))))
    assert any(turn.other_ops is not None for turn in turns["base"])  # each turn kept only its largest ops
    why = explain(merge_profiles(turns["base"]), merge_profiles(turns["head"]), measured_change_s=None)
    changed = {change.name: (change.base_calls, change.head_calls) for change in why.calls_changed}
    assert changed["aten::addmm"] == (3, 4)
    assert all(float(calls).is_integer() for pair in changed.values() for calls in pair), changed
    untouched = [name for name in changed
                 if any(word in name.lower() for word in ("relu", "nll", "softmax", "item", "sqrt", "lerp", "foreach"))]
    assert untouched == [], changed
    assert why.new_ops == () or all("add" in name for name in why.new_ops), why.new_ops


def test_a_burst_of_other_work_in_one_profiled_step_stays_out_of_the_profile():
    """The real profiler over 7 steps of one small matmul, the fourth of which busy-waits 50 ms in Python (what a
    preemption or another process does to one step): the steps' time outside ops and their op times are each the
    fastest step's, so the burst adds nothing to them, while the calls are every step's."""
    import torch

    weight = torch.randn(64, 64)
    count = iter(range(100))

    def step() -> None:
        if next(count) == 3:
            end = time.perf_counter() + 0.050
            while time.perf_counter() < end:
                pass
        torch.mm(weight, weight)

    steps = 7
    found = profile_ops(step, backend("cpu"), steps)
    mm = next(op for op in found.ops if op.name == "aten::mm")
    assert mm.calls == steps
    assert found.host_outside_ops_s / steps < 0.002, found  # a sum would give 7 ms a step; each step's own gap is us
    assert found.host_s / steps < 0.002, found
