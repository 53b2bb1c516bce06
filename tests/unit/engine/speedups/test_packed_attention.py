"""Packed batches give exactly the logits and loss of the same examples run one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tunedeck.core.errors import HardwareError
from tunedeck.data.packing import pack_examples, packed_features
from tunedeck.data.tokenize import IGNORE_INDEX, tokenize_rows
from tunedeck.engine.speedups.packed_attention import (
    PackedCollator,
    block_causal_mask,
    packing_problem,
    require_packing_support,
    supports_packing,
    verify_packing,
)

ROWS = [
    {"prompt": "The cat sat on", "completion": " the mat by the door."},
    {"prompt": "Water boils at", "completion": " one hundred degrees."},
    {"prompt": "Name a colour:", "completion": " blue"},
    {"prompt": "The sun rises in the", "completion": " east every morning, and sets in the west."},
    {"prompt": "Two plus two is", "completion": " four."},
]


def _load(model_dir: Path, implementation: str) -> tuple[object, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=implementation,
                                                 dtype=torch.float32)
    return model.eval(), tokenizer


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model_dir(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"tiny_{request.param}_dir")


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_packed_logits_and_loss_equal_unpacked(model_dir: Path, implementation: str) -> None:
    model, tokenizer = _load(model_dir, implementation)
    tokenized = tokenize_rows(ROWS, "prompt_completion", tokenizer, max_length=64)
    longest = max(len(ids) for ids in tokenized.input_ids)
    packs = pack_examples(tokenized, longest + 6)
    assert any(len(p.indices) > 1 for p in packs), "the test needs at least one pack of several examples"
    assert len(packs) > 1, "the test needs padding between packs of different lengths"
    batch = PackedCollator.for_model(model)(packed_features(tokenized, packs))
    with torch.no_grad():
        packed = model(**batch)
        alone = [model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels]))
                 for ids, labels in zip(tokenized.input_ids, tokenized.labels, strict=True)]
    for row, pack in enumerate(packs):
        for index, (start, end) in zip(pack.indices, pack.boundaries, strict=True):
            difference = (packed.logits[row, start:end] - alone[index].logits[0]).abs().max().item()
            assert difference < 1e-5, f"example {index} in pack {row}: logits differ by {difference}"
    counts = [sum(1 for label in labels[1:] if label != IGNORE_INDEX) for labels in tokenized.labels]
    expected = sum(out.loss.item() * n for out, n in zip(alone, counts, strict=True)) / sum(counts)
    assert packed.loss.item() == pytest.approx(expected, abs=1e-5)


def test_plain_causal_mask_would_leak(tiny_llama_dir: Path) -> None:
    """The exactness test is sensitive: without the block mask the second example changes."""
    model, tokenizer = _load(tiny_llama_dir, "sdpa")
    tokenized = tokenize_rows(ROWS[:2], "prompt_completion", tokenizer, max_length=64)
    features = packed_features(tokenized, pack_examples(tokenized, 128))
    batch = PackedCollator.for_model(model)(features)
    first = len(tokenized.input_ids[0])
    with torch.no_grad():
        leaky = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
        alone = model(input_ids=torch.tensor([tokenized.input_ids[1]])).logits[0]
    assert (leaky[first:] - alone).abs().max().item() > 1e-3


def test_pack_boundaries_carry_no_label() -> None:
    from tunedeck.data.tokenize import TokenizedRows, TruncationReport

    tokenized = TokenizedRows("text", [[5, 6, 7], [8, 9]], [[-100, 6, 7], [8, 9]], TruncationReport(16))
    (feature,) = packed_features(tokenized, pack_examples(tokenized, 8))
    assert feature["position_ids"] == [0, 1, 2, 0, 1]
    assert feature["labels"] == [-100, 6, 7, -100, 9]


def test_block_causal_mask_shape_and_padding() -> None:
    mask = block_causal_mask(torch.tensor([[0, 1, 2, 0, 1, 0, 0]]))[0, 0]
    assert mask[4].tolist() == [False, False, False, True, True, False, False]
    assert mask[2].tolist() == [True, True, True, False, False, False, False]
    assert mask[6].tolist() == [False] * 6 + [True]  # padding sees only itself


def test_varlen_batch_gives_boundaries() -> None:
    collator = PackedCollator("flash_attention_2")
    batch = collator([{"input_ids": [1, 2, 3, 4], "labels": [-100, 2, -100, 4], "position_ids": [0, 1, 0, 1]},
                      {"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "position_ids": [0, 1, 2]}])
    assert "attention_mask" not in batch
    assert batch["input_ids"].shape == (1, 7)
    assert batch["cu_seq_lens_q"].tolist() == [0, 2, 4, 7]
    assert batch["max_length_q"] == 3


def test_unsupported_attention_is_refused(tiny_llama_dir: Path) -> None:
    model, _ = _load(tiny_llama_dir, "sdpa")
    assert supports_packing(model)
    assert verify_packing(model) < 1e-4
    model.config._attn_implementation = "flex_attention"
    assert not supports_packing(model)
    with pytest.raises(HardwareError, match="flex_attention"):
        require_packing_support(model)
    with pytest.raises(HardwareError):
        PackedCollator("flex_attention")


def test_sliding_window_longer_than_max_length_is_refused(tiny_llama_dir: Path) -> None:
    model, _ = _load(tiny_llama_dir, "sdpa")
    model.config.sliding_window = 32
    assert packing_problem(model, max_length=16) is None
    assert "sliding-window" in (packing_problem(model, max_length=64) or "")


def _flash_available() -> bool:
    import importlib.util

    return torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _flash_available(), reason="needs CUDA and the flash_attn package")
def test_flash_varlen_packing_equals_unpacked(tiny_llama_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, attn_implementation="flash_attention_2",
                                                 dtype=torch.bfloat16).cuda().eval()
    tokenized = tokenize_rows(ROWS, "prompt_completion", tokenizer, max_length=64)
    packs = pack_examples(tokenized, 128)
    batch = PackedCollator.for_model(model)(packed_features(tokenized, packs))
    batch = {k: v.cuda() if hasattr(v, "cuda") else v for k, v in batch.items()}
    with torch.no_grad():
        packed = model(**batch).logits[0].float()
        offset = 0
        for pack in packs:
            for index in pack.indices:
                ids = torch.tensor([tokenized.input_ids[index]], device="cuda")
                alone = model(input_ids=ids).logits[0].float()
                # bf16 kernels: a leak between examples moves logits by far more than this.
                assert (packed[offset : offset + len(alone)] - alone).abs().max().item() < 5e-2
                offset += len(alone)
