"""Micro-batch packing (`packing: "auto"`): which collator a run gets, and that it trains exactly as padding."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedeck.config.loading import validate_config  # noqa: E402
from tunedeck.engine.speedups.packed_attention_path import DENSE_MASK, PER_EXAMPLE  # noqa: E402
from tunedeck.engine.training.batch_collation import (  # noqa: E402
    DATASET_PACKING,
    MICRO_BATCH_PACKING,
    NO_PACKING,
    MicroBatchPackingCollator,
    choose_collator,
)
from tunedeck.engine.training.training_data import PaddingCollator  # noqa: E402


def _skewed_examples(vocab: int, count: int, seed: int = 0) -> list[dict[str, list[int]]]:
    """Prompt-masked examples of very different lengths (the case where padding wastes most)."""
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        length = rng.choice([4, 6, 9, 14, 30, 90])
        ids = [rng.randrange(4, vocab) for _ in range(length)]
        prompt = rng.randrange(1, length)
        examples.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    return examples


def _model(model_dir: Path, attention: str = "sdpa") -> Any:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attention)


def _loaded(model: Any) -> Any:
    return SimpleNamespace(model=model, tokenizer=SimpleNamespace(pad_token_id=0))


def _loss_and_grads(model: Any, batch: dict[str, Any], num_items: int | None) -> tuple[float, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    loss = model(**batch, **({"num_items_in_batch": num_items} if num_items else {})).loss
    loss.backward()
    return float(loss.detach()), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("num_items", [None, 137])
def test_a_packed_micro_batch_has_the_loss_and_gradients_of_the_padded_one(
    tiny_llama_dir: Path, attention: str, num_items: int | None
) -> None:
    model = _model(tiny_llama_dir, attention)
    examples = _skewed_examples(model.config.vocab_size, 8)
    choice = choose_collator(_loaded(model), False, validate_config({"max_length": 128}))
    assert choice.packing == MICRO_BATCH_PACKING and isinstance(choice.collator, MicroBatchPackingCollator)
    packed = choice.collator(examples)
    padded = PaddingCollator(0, "sft")(examples)
    assert packed["input_ids"].shape[0] < len(examples)  # fewer rows …
    assert packed["input_ids"].numel() < padded["input_ids"].numel()  # … and fewer token slots
    # The same label tokens are trained (the count transformers normalises by).
    assert int(packed["labels"][..., 1:].ne(-100).sum()) == int(padded["labels"][..., 1:].ne(-100).sum())
    loss_packed, grads_packed = _loss_and_grads(model, packed, num_items)
    loss_padded, grads_padded = _loss_and_grads(model, padded, num_items)
    assert loss_packed == pytest.approx(loss_padded, abs=1e-5)
    assert grads_packed.keys() == grads_padded.keys() and grads_packed
    for name, grad in grads_packed.items():
        assert torch.allclose(grad, grads_padded[name], atol=1e-5), name


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packing_a_micro_batch_keeps_every_example_whole(tiny_llama_dir: Path, attention: str) -> None:
    model = _model(tiny_llama_dir, attention)
    examples = _skewed_examples(model.config.vocab_size, 16, seed=3)
    choice = choose_collator(_loaded(model), False, validate_config({"max_length": 96}))
    batch = choice.collator(examples)
    starts = (batch["position_ids"] == 0) & (batch["input_ids"] != 0)
    assert int(starts.sum()) == len(examples)  # one sequence start per example, none split
    assert choice.attention is not None
    if attention == "sdpa":
        # Per-example attention on CPU: one flattened row, one boundary segment per example, no mask.
        assert choice.attention.path == PER_EXAMPLE and "attention_mask" not in batch
        boundaries = batch["cu_seq_lens_q"].tolist()
        segments = sorted(b - a for a, b in itertools.pairwise(boundaries))
        assert segments == sorted(len(e["input_ids"]) for e in examples)
    else:
        assert choice.attention.path == DENSE_MASK and batch["attention_mask"].dim() == 4
        assert batch["input_ids"].shape[1] <= 96
        kept = sorted(int(n) for n in batch["input_ids"].ne(0).sum(dim=1))
        assert sum(kept) == sum(len(e["input_ids"]) for e in examples)


def test_auto_packing_falls_back_to_padding_where_it_is_not_exact(tiny_llama_dir: Path) -> None:
    model = _model(tiny_llama_dir)
    sft = validate_config({"max_length": 128})
    assert choose_collator(_loaded(model), True, sft).packing == DATASET_PACKING
    off = choose_collator(_loaded(model), False, validate_config({"packing": False}))
    assert off.packing == NO_PACKING and isinstance(off.collator, PaddingCollator)
    classification = choose_collator(_loaded(model), False, validate_config({"task": "classification"}))
    assert classification.packing == NO_PACKING and "classification" in str(classification.reason)
    model.config.model_type = "bloom"  # positions from the attention mask: packing would shift them
    bloom = choose_collator(_loaded(model), False, sft)
    assert bloom.packing == NO_PACKING and "bloom" in str(bloom.reason)


def test_packing_true_is_refused_for_classification_and_auto_is_the_default() -> None:
    from tunedeck.core.errors import ConfigError

    assert validate_config({}).packing == "auto"
    assert validate_config({"task": "classification"}).packing == "auto"
    with pytest.raises(ConfigError, match="packing"):
        validate_config({"task": "classification", "packing": True})
