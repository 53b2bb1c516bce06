"""Per-example attention of packed rows: same outputs, losses and gradients as the dense mask and as unpacked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedeck.core.errors import HardwareError  # noqa: E402
from tunedeck.data.packing import pack_examples, packed_features  # noqa: E402
from tunedeck.data.tokenize import IGNORE_INDEX, TokenizedRows, TruncationReport  # noqa: E402
from tunedeck.engine.speedups import packed_attention  # noqa: E402
from tunedeck.engine.speedups.packed_attention import PackedCollator, block_causal_mask  # noqa: E402
from tunedeck.engine.speedups.packed_attention_path import (  # noqa: E402
    DENSE_MASK,
    PER_EXAMPLE,
    choose_packed_attention,
    set_attention,
)
from tunedeck.engine.speedups.per_example_attention import (  # noqa: E402
    PER_EXAMPLE_ATTENTION,
    PerExampleAttention,
    group_lengths,
    per_example_mask,
    segment_plan,
)

LENGTHS = [3, 1, 9, 4, 4, 17, 2, 6]


class _Module:
    num_key_value_groups = 2


def test_groups_bound_the_padding_and_cover_every_example() -> None:
    groups = group_lengths(LENGTHS, 1.5)
    assert sorted(i for group in groups for i in group) == list(range(len(LENGTHS)))
    for group in groups:
        longest = max(LENGTHS[i] for i in group)
        assert all(longest <= LENGTHS[i] * 1.5 for i in group)
    assert len(group_lengths(LENGTHS, 1.0)) == len(set(LENGTHS))


def test_plan_puts_every_token_back_in_place() -> None:
    boundaries = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    plan = segment_plan(boundaries)
    tokens = int(boundaries[-1])
    padded = torch.cat([group.token_index for group in plan.groups])
    # The slot each token's output is read from holds that very token.
    assert padded[plan.output_index].tolist() == list(range(tokens))
    assert sum(group.examples for group in plan.groups) == len(LENGTHS)


def test_outputs_and_gradients_equal_the_block_diagonal_mask() -> None:
    generator = torch.Generator().manual_seed(0)
    boundaries = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    positions = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    tokens = int(boundaries[-1])
    query = torch.randn(1, 4, tokens, 8, generator=generator, requires_grad=True)
    key = torch.randn(1, 2, tokens, 8, generator=generator, requires_grad=True)  # grouped-query heads
    value = torch.randn(1, 2, tokens, 8, generator=generator, requires_grad=True)
    output, _ = PerExampleAttention()(_Module(), query, key, value, None, scaling=0.3, cu_seq_lens_q=boundaries)
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1),
        attn_mask=block_causal_mask(positions), scale=0.3).transpose(1, 2)
    assert output.shape == expected.shape == (1, tokens, 4, 8)
    assert (output - expected).abs().max().item() < 1e-5
    weights = torch.randn(expected.shape, generator=generator)
    ours = torch.autograd.grad((output * weights).sum(), (query, key, value))
    theirs = torch.autograd.grad((expected * weights).sum(), (query, key, value))
    for mine, reference in zip(ours, theirs, strict=True):
        assert (mine - reference).abs().max().item() < 1e-5


def test_inputs_without_boundaries_get_sdpa_and_no_mask_is_built_for_packed_rows() -> None:
    query = torch.randn(1, 4, 5, 8)
    key = value = torch.randn(1, 2, 5, 8)
    plain, _ = PerExampleAttention()(_Module(), query, key, value, None)
    causal = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1), is_causal=True)
    assert (plain - causal.transpose(1, 2)).abs().max().item() < 1e-6
    assert per_example_mask(batch_size=1, q_length=5, kv_length=5, attention_mask=None) is None


def _tokenized(vocab: int) -> TokenizedRows:
    generator = torch.Generator().manual_seed(1)
    ids, labels = [], []
    for length in [5, 11, 3, 8, 14, 6, 2, 9]:
        row = torch.randint(4, vocab, (length,), generator=generator).tolist()
        ids.append(row)
        labels.append([IGNORE_INDEX] * (length // 3) + row[length // 3:])
    return TokenizedRows("text", ids, labels, TruncationReport(64))


def _model(model_dir: Path, implementation: str = "sdpa") -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=implementation)


def _per_token_losses_and_grads(model: Any, batch: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    labels = batch["labels"]
    logits = model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits
    shifted = labels[..., 1:].reshape(-1)
    losses = torch.nn.functional.cross_entropy(logits[..., :-1, :].reshape(-1, logits.shape[-1]), shifted,
                                               reduction="none", ignore_index=IGNORE_INDEX)[shifted != IGNORE_INDEX]
    losses.sum().backward()
    return losses.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_per_token_losses_and_gradients_match_the_mask_and_the_unpacked_run(
    request: pytest.FixtureRequest, family: str
) -> None:
    model_dir = request.getfixturevalue(f"tiny_{family}_dir")
    model = _model(model_dir)
    tokenized = _tokenized(int(model.config.vocab_size))
    packs = pack_examples(tokenized, 24)
    assert any(len(pack.indices) > 1 for pack in packs)
    features = packed_features(tokenized, packs)
    dense_losses, dense_grads = _per_token_losses_and_grads(model, PackedCollator("sdpa")(features))
    assert choose_packed_attention(model).path == PER_EXAMPLE
    per_example_batch = PackedCollator.for_model(model)(features)
    assert "attention_mask" not in per_example_batch and "cu_seq_lens_q" in per_example_batch
    losses, grads = _per_token_losses_and_grads(model, per_example_batch)
    # Unpacked: each example alone, in pack order (the order the packed rows score tokens in).
    alone = []
    alone_grads: dict[str, Any] = {}
    for pack in packs:
        for index in pack.indices:
            example = {"input_ids": torch.tensor([tokenized.input_ids[index]]),
                       "labels": torch.tensor([[IGNORE_INDEX, *tokenized.labels[index][1:]]])}
            example_losses, example_grads = _per_token_losses_and_grads(model, example)
            alone.append(example_losses)
            for name, grad in example_grads.items():
                alone_grads[name] = alone_grads.get(name, 0) + grad
    unpacked = torch.cat(alone)
    assert losses.shape == dense_losses.shape == unpacked.shape
    assert (losses - dense_losses).abs().max().item() < 1e-5
    assert (losses - unpacked).abs().max().item() < 1e-5
    assert grads.keys() == dense_grads.keys() and grads
    for name, grad in grads.items():
        assert torch.allclose(grad, dense_grads[name], atol=1e-5), name
        assert torch.allclose(grad, alone_grads[name], atol=1e-5), name


def test_the_path_is_chosen_only_where_exact_and_measured_faster(tiny_llama_dir: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    eager = _model(tiny_llama_dir, "eager")
    assert choose_packed_attention(eager).path == DENSE_MASK
    compiled = _model(tiny_llama_dir)
    assert choose_packed_attention(compiled, torch_compile=True).path == DENSE_MASK
    assert compiled.config._attn_implementation == "sdpa"
    model = _model(tiny_llama_dir)
    choice = choose_packed_attention(model)
    assert choice.path == PER_EXAMPLE and choice.checked_difference is not None
    assert choice.checked_difference < 1e-4 and model.config._attn_implementation == PER_EXAMPLE_ATTENTION

    def not_exact(model: Any, **_: Any) -> float:
        raise HardwareError("packing is not exact for this model: packed logits differ by 0.3")

    monkeypatch.setattr(packed_attention, "verify_packing", not_exact)
    fallback_model = _model(tiny_llama_dir)
    fallback = choose_packed_attention(fallback_model)
    assert fallback.path == DENSE_MASK and "not exact" in fallback.reason
    assert fallback_model.config._attn_implementation == "sdpa"
    assert "attention_mask" in PackedCollator.for_model(fallback_model)(
        [{"input_ids": [5, 6, 7], "labels": [5, 6, 7], "position_ids": [0, 1, 0]}])


def test_the_saved_config_keeps_no_trace_of_the_switch(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = _model(tiny_llama_dir)
    set_attention(model, "sdpa")
    choose_packed_attention(model)
    model.save_pretrained(tmp_path)
    assert PER_EXAMPLE_ATTENTION not in json.dumps(json.loads((tmp_path / "config.json").read_text()))


def test_a_packed_row_is_never_handed_to_plain_sdpa() -> None:
    boundaries = torch.tensor([0, 3, 12], dtype=torch.int32)
    query = torch.randn(1, 4, 12, 8)
    key = value = torch.randn(1, 2, 12, 8)
    with pytest.raises(ValueError, match="softcap"):
        PerExampleAttention()(_Module(), query, key, value, None, cu_seq_lens_q=boundaries, softcap=30.0)
    with pytest.raises(ValueError, match="sliding window"):
        PerExampleAttention()(_Module(), query, key, value, None, cu_seq_lens_q=boundaries, sliding_window=4)
    within, _ = PerExampleAttention()(_Module(), query, key, value, None, cu_seq_lens_q=boundaries, sliding_window=9)
    plain, _ = PerExampleAttention()(_Module(), query, key, value, None, cu_seq_lens_q=boundaries)
    assert torch.equal(within, plain)
