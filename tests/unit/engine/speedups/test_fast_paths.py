"""Fast paths give the same training: host-side token counts, packed per-token losses equal to unpacked ones."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")


def _examples(vocab: int, count: int = 24, seed: int = 0) -> list[dict[str, list[int]]]:
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        ids = [rng.randrange(4, vocab) for _ in range(rng.choice([3, 5, 9, 17, 40]))]
        examples.append({"input_ids": ids, "labels": [-100, *ids[1:]]})
    return examples


def _train(model_dir: Path, out: Path, examples: list[Any], collator: Any, trainer_class: Any) -> Any:
    from transformers import AutoModelForCausalLM, TrainingArguments

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    args = TrainingArguments(output_dir=str(out), num_train_epochs=1, per_device_train_batch_size=4, learning_rate=1e-3,
                             logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True,
                             remove_unused_columns=False, include_num_input_tokens_seen="non_padding", seed=0,
                             data_seed=0, dataloader_num_workers=0)
    trainer = trainer_class(model=model, args=args, train_dataset=examples, data_collator=collator)
    trainer.train()
    return trainer


def _host_counting(**kwargs: Any) -> Any:
    from tunedeck.engine.training.trainer import TunedeckTrainer

    return TunedeckTrainer(count_tokens_on_host=True, chunked_loss=False, **kwargs)


def test_host_token_count_trains_identically_and_counts_without_reading_the_device(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoConfig, Trainer

    from tunedeck.engine.speedups.token_counting import TokenCountingCollator
    from tunedeck.engine.training.training_data import PaddingCollator

    examples = _examples(AutoConfig.from_pretrained(tiny_llama_dir).vocab_size)
    plain = _train(tiny_llama_dir, tmp_path / "plain", examples, PaddingCollator(0, "sft"), Trainer)
    fast = _train(tiny_llama_dir, tmp_path / "fast", examples, TokenCountingCollator(PaddingCollator(0, "sft")),
                  _host_counting)
    losses = [[e["loss"] for e in t.state.log_history if "loss" in e] for t in (plain, fast)]
    assert losses[0] == losses[1] and len(losses[0]) == 6
    assert fast.state.num_input_tokens_seen == plain.state.num_input_tokens_seen
    assert fast.state.num_input_tokens_seen == sum(len(e["input_ids"]) for e in examples)  # one epoch


def test_host_token_count_is_right_for_packed_batches(tiny_llama_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoConfig

    from tunedeck.data.packing import pack_examples, packed_features
    from tunedeck.engine.speedups.packed_attention import PackedCollator
    from tunedeck.engine.speedups.token_counting import TokenCountingCollator

    examples = _examples(AutoConfig.from_pretrained(tiny_llama_dir).vocab_size, count=64)
    rows = SimpleNamespace(input_ids=[e["input_ids"] for e in examples], labels=[e["labels"] for e in examples])
    packed = packed_features(rows, pack_examples(rows.input_ids, 64))  # type: ignore[arg-type]
    trainer = _train(tiny_llama_dir, tmp_path / "packed", packed, TokenCountingCollator(PackedCollator("sdpa")),
                     _host_counting)
    # The trainer's own count sums the (batch, 1, T, T) mask: query/key pairs, not tokens.
    assert trainer.state.num_input_tokens_seen == sum(len(row["input_ids"]) for row in packed)


def test_host_token_count_wraps_only_when_enabled() -> None:
    from tunedeck.engine.speedups.token_counting import TOKEN_COUNT_KEY, TokenCountingCollator, token_counting

    collator = object()
    assert token_counting(collator, enabled=False) is collator
    assert isinstance(token_counting(collator, enabled=True), TokenCountingCollator)
    batch = TokenCountingCollator(lambda features: {"input_ids": None})([{"input_ids": [1, 2]}, {"input_ids": [3]}])
    assert batch[TOKEN_COUNT_KEY] == 3


@pytest.mark.parametrize("path", ["dense_mask", "per_example"])
def test_packed_per_token_losses_equal_unpacked_ones_in_fp32(tiny_llama_dir: Path, path: str) -> None:
    from transformers import AutoModelForCausalLM

    from benchmarks.packing_exactness import compare_packed_losses
    from tunedeck.data.packing import pack_examples
    from tunedeck.engine.speedups.packed_attention_path import choose_packed_attention

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, attn_implementation="sdpa")
    if path == "per_example":
        assert choose_packed_attention(model).path == path  # the collator then flattens rows with boundaries
    examples = _examples(model.config.vocab_size, count=40, seed=1)
    rows = SimpleNamespace(input_ids=[e["input_ids"] for e in examples], labels=[e["labels"] for e in examples])
    packs = pack_examples(rows.input_ids, 96)
    comparison = compare_packed_losses(model, rows, packs, max_packs=3)  # type: ignore[arg-type]
    assert comparison.examples_compared > comparison.packs_compared  # real packs, several examples each
    assert comparison.tokens_compared > 0
    assert comparison.max_abs_difference <= 1e-5
