"""BERT-base sequence classification at sequence length 128, as in the source article's NLP benchmark."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from perfsuite.workloads import Workload
from perfsuite.workloads.random_weights import build_on_meta

if TYPE_CHECKING:
    from transformers import BertConfig

NUM_LABELS = 2


def _config(profile: str) -> BertConfig:
    from transformers import BertConfig

    if profile == "smoke":
        config = BertConfig(
            vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
            max_position_embeddings=128,
        )
    else:
        # BertConfig's defaults are BERT-base: 12 layers, hidden 768, 12 heads, vocabulary 30522.
        config = BertConfig()
    # A property, set after construction: transformers 5's typed constructors have no num_labels argument.
    config.num_labels = NUM_LABELS
    return config


def sequence_length(profile: str) -> int:
    """Tokens per sequence: 128 as in the article's fine-tuning scale, 32 at smoke size."""
    return 32 if profile == "smoke" else 128


class BertLogits(torch.nn.Module):
    """transformers' BertForSequenceClassification returning the logits tensor only."""

    def __init__(self, profile: str):
        super().__init__()
        from transformers import BertForSequenceClassification

        self.model = BertForSequenceClassification(_config(profile))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def build(profile: str) -> torch.nn.Module:
    """BERT-base (or its smoke-size twin) with random weights."""
    return build_on_meta(lambda: BertLogits(profile))


def make_tokens(profile: str, batch_size: int) -> dict[str, torch.Tensor]:
    """Random token ids with a full attention mask."""
    vocab = _config(profile).vocab_size
    shape = (batch_size, sequence_length(profile))
    input_ids = torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(1))
    return {"input_ids": input_ids, "attention_mask": torch.ones(shape, dtype=torch.long)}


def make_labels(profile: str, batch_size: int) -> torch.Tensor:
    """Random binary labels."""
    return torch.randint(0, NUM_LABELS, (batch_size,), generator=torch.Generator().manual_seed(2))


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Classification loss, computed in float32 whatever the autocast dtype."""
    return F.cross_entropy(logits.float(), labels)


def enable_checkpointing(module: torch.nn.Module) -> None:
    """Non-reentrant gradient checkpointing of every encoder layer (transformers' switch), on a `build` module."""
    if not isinstance(module, BertLogits):
        raise TypeError(f"bert-base checkpointing needs the module `build` returns, got {type(module).__name__}")
    model = module.model
    # transformers 5 renamed the switch (the old name warns that it goes in v6); 4.x has only the old name.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


WORKLOADS = (
    Workload(
        name="bert-base",
        build_module=build,
        make_inputs=make_tokens,
        make_target=make_labels,
        loss=cross_entropy,
        batch_sizes={"smoke": (2,), "standard": (8, 16, 32), "full": (64, 128)},
        description="BERT-base sequence classification, 128 tokens (transformers BertForSequenceClassification)",
        enable_checkpointing=enable_checkpointing,
    ),
)
