"""The chunked loss's logits budget: kept or recomputed gives the same loss, and the budget follows the headroom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedeck.engine.host.hardware import HardwareProfile  # noqa: E402
from tunedeck.engine.host.memory_headroom import step_headroom  # noqa: E402
from tunedeck.engine.speedups.chunked_loss import (  # noqa: E402
    BYTES_PER_KEPT_LOGIT,
    DEFAULT_KEEP_LOGITS,
    FREE_MEMORY_SHARE,
    MEASURED_HEADROOM_SHARE,
    chunked_causal_lm_loss,
    kept_logits_limit,
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


def _loss_and_grads(model: Any, batch: dict[str, Any], keep: int, items: Any) -> tuple[float, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    loss = chunked_causal_lm_loss(model, batch, items, chunk_tokens=CHUNK, keep_logits=keep)
    loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _kept_widths(model: Any, batch: dict[str, Any], keep: int) -> int:
    """How many saved tensors are as wide as the vocabulary (kept logits) for one forward."""
    from torch.autograd.graph import saved_tensors_hooks

    vocab = model.config.vocab_size
    widths: list[int] = []

    def pack(tensor: Any) -> Any:
        widths.append(tensor.shape[-1] if tensor.dim() else 0)
        return tensor

    with saved_tensors_hooks(pack, lambda tensor: tensor):
        chunked_causal_lm_loss(model, batch, chunk_tokens=CHUNK, keep_logits=keep)
    return sum(1 for width in widths if width == vocab)


@pytest.mark.parametrize("items", [None, 1])  # the mean per labelled token, and the summed per-token losses
def test_kept_and_recomputed_chunks_give_identical_loss_and_gradients(tiny_llama_dir: Path, items: Any) -> None:
    model, batch = _model_and_batch(tiny_llama_dir)
    vocab = model.config.vocab_size
    # Every chunk recomputed, the first two kept and the rest recomputed, every chunk kept.
    budgets = [0, 2 * CHUNK * vocab, 2**40]
    results = [_loss_and_grads(model, batch, keep, items) for keep in budgets]
    reference_loss, reference_grads = results[0]
    for loss, grads in results[1:]:
        assert abs(loss - reference_loss) <= EXACT * max(1.0, abs(reference_loss))
        assert grads.keys() == reference_grads.keys() and grads
        for name, grad in grads.items():
            assert float((grad - reference_grads[name]).abs().max()) <= EXACT, name


def test_the_budget_decides_how_many_chunks_keep_their_logits(tiny_llama_dir: Path) -> None:
    model, batch = _model_and_batch(tiny_llama_dir)
    vocab = model.config.vocab_size
    none, two, every = (_kept_widths(model, batch, keep) for keep in (0, 2 * CHUNK * vocab, 2**40))
    assert none == 0
    assert 0 < two < every


def test_a_small_headroom_recomputes_and_a_large_one_keeps() -> None:
    vocab, positions = 32_000, 4096
    step_logits = vocab * positions  # one 4096-position chunk of a 32k vocabulary
    small = kept_logits_limit(64 * 2**20, "preflight")  # 64 MiB left over
    large = kept_logits_limit(8 * 2**30, "preflight")  # 8 GiB left over
    assert small.keep_logits < step_logits <= large.keep_logits
    assert large.keep_logits == int(8 * 2**30 * MEASURED_HEADROOM_SHARE) // BYTES_PER_KEPT_LOGIT
    assert kept_logits_limit(0, "host").keep_logits == 0
    # Free memory read before the first step gets a smaller share than the preflight's measured headroom.
    assert kept_logits_limit(2**30, "host").keep_logits == int(2**30 * FREE_MEMORY_SHARE) // BYTES_PER_KEPT_LOGIT
    unknown = kept_logits_limit(None, "unknown")
    assert unknown.keep_logits == DEFAULT_KEEP_LOGITS and unknown.headroom_bytes is None
    assert "8.00 GiB of preflight headroom" in large.describe(vocab)
    assert large.to_dict() == {"keep_logits": large.keep_logits, "headroom_bytes": 8 * 2**30,
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
