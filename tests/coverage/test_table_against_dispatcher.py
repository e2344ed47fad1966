"""On a torch built with MPS the dispatcher knows the MPS registrations, so the yaml-based table can be
checked against it; elsewhere (CPU or CUDA builds) the dispatcher cannot answer MPS questions."""

import pytest
import torch

from perfsuite.coverage.support import Verdict, installed_mps_support_table


@pytest.mark.skipif(not torch.backends.mps.is_built(), reason="this torch is built without MPS: "
                    "the dispatcher has no MPS kernels to compare with")
def test_every_aten_op_registered_for_mps_is_native_an_always_fallback_or_a_python_kernel_in_the_table():
    table = installed_mps_support_table()
    registered = [
        name for name in table.kernels
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "MPS")
    ]
    python_kernels = {fact.op for fact in table.facts.python_mps_kernels}
    disagreeing = [
        name for name in registered
        if name not in python_kernels
        and table.lookup(f"aten::{name}").verdict not in (Verdict.NATIVE, Verdict.FALLBACK)
    ]
    assert not disagreeing, f"registered for MPS but not native in the table: {disagreeing}"


@pytest.mark.skipif(not torch.backends.mps.is_built(), reason="this torch is built without MPS")
def test_every_op_the_table_calls_native_is_registered_for_mps():
    table = installed_mps_support_table()
    missing = [
        name for name in table.kernels
        if table.lookup(f"aten::{name}").verdict is Verdict.NATIVE
        and not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "MPS")
    ]
    assert not missing, f"native in the table but without an MPS registration: {missing}"


def test_the_dispatcher_of_a_build_without_mps_cannot_answer_mps_questions():
    if torch.backends.mps.is_built():
        pytest.skip("this torch has MPS: its dispatcher does answer")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "MPS")
