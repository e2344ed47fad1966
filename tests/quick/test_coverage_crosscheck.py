"""The cross-check against torch's own lists of ops its MPS tests expect to fail (common_mps.py)."""

from types import SimpleNamespace

import torch

from perfsuite.coverage.crosscheck import (
    FORWARD_LIST,
    GRAD_LIST,
    ListEntry,
    claims_missing_op,
    common_mps_path,
    compare,
    read_xfail_lists,
)
from perfsuite.coverage.support import installed_mps_support_table

SOURCE = '''
if torch.backends.mps.is_available():
    def mps_ops_modifier(ops):
        UNIMPLEMENTED_XFAILLIST: dict = {
            # Failures due to lack of op implementation on MPS backend
            "take": None,
            # "kthvalue": None,
            "median": [torch.bool],
        }

    def mps_ops_grad_modifier(ops):
        XFAILLIST_GRAD = {
            # Unimplemented ops
            "igamma": None,
            "special.i1": [torch.float16],
            # Correctness issues
            "msort": [torch.float16, torch.float32],
        }
'''


def entry(key):
    return next(e for e in read_xfail_lists(SOURCE) if e.key == key)


def test_entries_are_read_from_the_text_without_importing_it():
    assert [(e.list_name, e.key) for e in read_xfail_lists(SOURCE)] == [
        (FORWARD_LIST, "take"), (FORWARD_LIST, "median"), (GRAD_LIST, "igamma"), (GRAD_LIST, "special.i1"),
        (GRAD_LIST, "msort")]


def test_dtypes_are_read_as_names():
    assert entry("median").dtypes == ("bool",)


def test_an_entry_belongs_to_the_comment_block_above_it_not_to_commented_out_entries():
    assert entry("median").section == "Failures due to lack of op implementation on MPS backend"


def test_an_entry_for_every_dtype_claims_a_missing_op():
    assert claims_missing_op(entry("take"))


def test_an_entry_for_some_dtypes_is_a_dtype_claim():
    assert not claims_missing_op(entry("median"))


def test_only_the_unimplemented_section_of_the_grad_list_claims_missing_ops():
    assert [claims_missing_op(entry(k)) for k in ("igamma", "special.i1", "msort")] == [True, False, False]


def test_the_installed_common_mps_lists_linalg_eig_as_missing():
    entries = read_xfail_lists(common_mps_path().read_text())
    assert any(e.key == "linalg.eig" and claims_missing_op(e) for e in entries)


class OpInfoStub:
    def __init__(self, function):
        self.function = function

    def supported_dtypes(self, device):
        return {torch.float32}

    def sample_inputs(self, device, dtype, requires_grad=False):
        yield SimpleNamespace(input=torch.arange(6.0).reshape(2, 3), args=(torch.tensor([0, 5]),), kwargs={})

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def test_a_claim_agrees_when_the_samples_reach_an_op_without_mps_kernel():
    table = installed_mps_support_table()
    result = compare(ListEntry(FORWARD_LIST, "f", "take", None, ""), {"take": OpInfoStub(torch.take)},
                     table.lookup, table.descend_key)
    assert (result.agrees, result.fallback_ops) == (True, ("aten::take",))


def test_a_claim_disagrees_when_every_op_reached_runs_on_mps():
    table = installed_mps_support_table()
    result = compare(ListEntry(FORWARD_LIST, "f", "index_select", None, ""),
                     {"index_select": OpInfoStub(lambda x, i: x.flatten().index_select(0, i))},
                     table.lookup, table.descend_key)
    assert (result.agrees, result.verdict) == (False, "native MPS kernel")
