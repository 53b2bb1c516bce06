"""The chunked loss's logits budget: any chunk size gives the same loss, and the budget follows the headroom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedeck.engine.host.hardware import HardwareProfile  # noqa: E402
from tunedeck.engine.host.memory_headroom import step_headroom  # noqa: E402
from tunedeck.engine.speedups.chunked_loss import (  # noqa: E402
    BYTES_PER_CHUNK_LOGIT,
    FREE_MEMORY_SHARE,
    MAX_CHUNK_LOGITS,
    MEASURED_HEADROOM_SHARE,
    chunk_logits_limit,
    chunked_causal_lm_loss,
)
from tunedeck.engine.training.training_data import PaddingCollator  # noqa: E402

EXACT = 1e-6
CHUNK = 8


def _model_and_batch(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model.train()
    generator = torch.Generator().manual_seed(1)
    examples = []
    for length in (9, 17, 30, 12):
        ids = torch.randint(4, model.config.vocab_size, (length,), generator=generator).tolist()
        examples.append({"input_ids": ids, "labels": [-100] * 3 + ids[3:]})
    return model, PaddingCollator(0, "sft")(examples)


def _loss_and_grads(model: Any, batch: dict[str, Any], budget: int, items: Any) -> tuple[float, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    loss = chunked_causal_lm_loss(model, batch, items, chunk_tokens=CHUNK, chunk_logits=budget)
    loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _chunk_rows(model: Any, batch: dict[str, Any], budget: int, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The positions of every chunk that went through the output head, for one forward."""
    from torch.nn import functional

    vocab, linear, rows = model.config.vocab_size, functional.linear, []

    def recording(piece: Any, weight: Any, *args: Any) -> Any:
        if weight.shape[0] == vocab:
            rows.append(int(piece.shape[0]))
        return linear(piece, weight, *args)

    monkeypatch.setattr(functional, "linear", recording)
    chunked_causal_lm_loss(model, batch, chunk_tokens=CHUNK, chunk_logits=budget)
    monkeypatch.setattr(functional, "linear", linear)
    return rows


@pytest.mark.parametrize("items", [None, 1])  # the mean per labelled token, and the summed per-token losses
def test_every_chunk_size_gives_identical_loss_and_gradients(tiny_llama_dir: Path, items: Any) -> None:
    model, batch = _model_and_batch(tiny_llama_dir)
    vocab = model.config.vocab_size
    # One position per chunk (a budget under one row of logits), two positions, CHUNK positions.
    budgets = [1, 2 * vocab, 2**40]
    results = [_loss_and_grads(model, batch, budget, items) for budget in budgets]
    reference_loss, reference_grads = results[0]
    for loss, grads in results[1:]:
        assert abs(loss - reference_loss) <= EXACT * max(1.0, abs(reference_loss))
        assert grads.keys() == reference_grads.keys() and grads
        for name, grad in grads.items():
            # Up to float summation order: the head's gradient sums one product per chunk.
            scale = max(1.0, float(reference_grads[name].abs().max()))
            assert float((grad - reference_grads[name]).abs().max()) <= EXACT * scale, name


def test_the_budget_bounds_the_positions_of_a_chunk(tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, batch = _model_and_batch(tiny_llama_dir)
    vocab = model.config.vocab_size
    labelled = int((batch["labels"][:, 1:] != -100).sum())
    one, two, whole = (_chunk_rows(model, batch, budget, monkeypatch) for budget in (1, 2 * vocab + 1, 2**40))
    assert one == [1] * labelled  # never less than one position
    assert max(two) == 2 and sum(two) == labelled
    assert max(whole) == CHUNK and sum(whole) == labelled  # chunk_tokens still bounds a chunk


def test_a_small_headroom_makes_small_chunks_and_a_large_one_stops_at_the_maximum() -> None:
    small = chunk_logits_limit(64 * 2**20, "preflight")  # 64 MiB left over
    large = chunk_logits_limit(8 * 2**30, "preflight")  # 8 GiB left over
    assert small.chunk_logits == int(64 * 2**20 * MEASURED_HEADROOM_SHARE) // BYTES_PER_CHUNK_LOGIT
    assert small.chunk_logits < MAX_CHUNK_LOGITS == large.chunk_logits  # bigger chunks buy no speed
    assert chunk_logits_limit(0, "host").chunk_logits == 0  # the loss still takes one position at a time
    # Free memory read before the first step gets a smaller share than the preflight's measured headroom.
    assert chunk_logits_limit(2**26, "host").chunk_logits == int(2**26 * FREE_MEMORY_SHARE) // BYTES_PER_CHUNK_LOGIT
    unknown = chunk_logits_limit(None, "unknown")
    assert unknown.chunk_logits == MAX_CHUNK_LOGITS and unknown.headroom_bytes is None
    assert "8.00 GiB of preflight headroom" in large.describe(32_000)
    assert large.to_dict() == {"chunk_logits": MAX_CHUNK_LOGITS, "headroom_bytes": 8 * 2**30,
                               "headroom_source": "preflight"}


def _cpu() -> HardwareProfile:
    return HardwareProfile(backend="cpu", device_name="cpu", torch_version=torch.__version__)


def test_the_headroom_is_the_preflights_when_its_fit_holds() -> None:
    fit = {"fits": True, "usable_bytes": 10 * 2**30, "projected_peak_bytes": 6.5 * 2**30}
    assert step_headroom(_cpu(), fit) == (int(3.5 * 2**30), "preflight")
    assert step_headroom(_cpu(), {**fit, "projected_peak_bytes": 11 * 2**30}) == (0, "preflight")


def test_without_a_preflight_the_host_headroom_respects_the_memory_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    class Memory:
        available = 50 * 2**30

    class Resident:
        rss = 3 * 2**30

    class Process:
        def memory_info(self) -> Resident:
            return Resident()

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory())
    monkeypatch.setattr(psutil, "Process", Process)
    assert step_headroom(_cpu(), None) == (50 * 2**30, "host")
    assert step_headroom(_cpu(), {"fits": False}, 8 * 2**30) == (5 * 2**30, "host")
    assert step_headroom(_cpu(), None, 2**30) == (0, "host")
