"""Turning on gradient checkpointing uses each library's current switch: no deprecation warning, and it is on."""

from __future__ import annotations

import warnings

import pytest

from perfsuite.workloads import bert, resnet, stable_diffusion

CHECKPOINTED = [w for module in (resnet, bert, stable_diffusion) for w in module.WORKLOADS if w.enable_checkpointing]


@pytest.mark.parametrize("workload", CHECKPOINTED, ids=lambda w: w.name)
def test_enabling_checkpointing_warns_of_no_deprecated_api(workload):
    module = workload.build_module("smoke")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        workload.enable_checkpointing(module)


def test_bert_checkpointing_turns_on_every_encoder_layer():
    module = bert.build("smoke")
    bert.enable_checkpointing(module)
    assert [layer.gradient_checkpointing for layer in module.model.bert.encoder.layer] == [True, True]
