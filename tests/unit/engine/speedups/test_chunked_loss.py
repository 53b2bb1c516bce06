"""Chunked cross-entropy: the stock causal-LM loss and gradients, and where it turns itself on."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedeck.config.loading import validate_config  # noqa: E402
from tunedeck.core.errors import ConfigError  # noqa: E402
from tunedeck.engine.speedups.chunked_loss import (  # noqa: E402
    chunked_causal_lm_loss,
    decide_chunked_loss,
    model_problem,
)
from tunedeck.engine.speedups.packed_attention import PackedCollator  # noqa: E402
from tunedeck.engine.training.batch_collation import MicroBatchPackingCollator  # noqa: E402
from tunedeck.engine.training.training_data import PaddingCollator  # noqa: E402

TOLERANCE = 1e-5


def _examples(vocab: int, count: int, seed: int = 0) -> list[dict[str, list[int]]]:
    """Prompt-masked examples of very different lengths, so batches hold padding and packs hold boundaries."""
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        length = rng.choice([5, 8, 13, 21, 40])
        ids = [rng.randrange(4, vocab) for _ in range(length)]
        prompt = rng.randrange(1, length - 1)
        examples.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    return examples


def _model(model_dir: Path, *, lora: bool = False) -> Any:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
        # A fresh adapter's B is zero, so its A would get no gradient: move off that point.
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(0, 0.05)
    model.train()  # training mode, as the trainer calls it (dropout is 0 in the tiny models)
    return model


def _grads(model: Any) -> dict[str, Any]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _stock(model: Any, batch: dict[str, Any], num_items: Any) -> tuple[Any, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    loss = model(**batch, **({"num_items_in_batch": num_items} if num_items is not None else {})).loss
    loss.backward()
    return loss.detach(), _grads(model)


def _chunked(model: Any, batch: dict[str, Any], num_items: Any, **options: Any) -> tuple[Any, dict[str, Any]]:
    model.zero_grad(set_to_none=True)
    loss = chunked_causal_lm_loss(model, batch, num_items, **options)
    loss.backward()
    return loss.detach(), _grads(model)


def _assert_same(model: Any, batch: dict[str, Any], num_items: Any = None, **options: Any) -> None:
    stock_loss, stock_grads = _stock(model, batch, num_items)
    loss, grads = _chunked(model, batch, num_items, **options)
    assert loss.shape == ()
    assert float(loss) == pytest.approx(float(stock_loss), abs=TOLERANCE)
    assert grads.keys() == stock_grads.keys() and grads
    for name, grad in grads.items():
        difference = float((grad - stock_grads[name]).abs().max())
        assert difference <= TOLERANCE, (name, difference)


def _padded(model: Any, count: int = 6) -> dict[str, Any]:
    return PaddingCollator(0, "sft")(_examples(model.config.vocab_size, count))


# Several chunks of 7 labelled tokens; the defaults (one chunk); chunks of one position (a budget smaller
# than one row of logits); and every position through the head with the unlabelled ones ignored (the
# accelerators' way, no sync).
CHUNKING = [{}, {"chunk_tokens": 7}, {"chunk_logits": 1}, {"select_labelled": False, "chunk_tokens": 7}]


@pytest.mark.parametrize("options", CHUNKING)
@pytest.mark.parametrize("num_items", [None, 137, "tensor"])
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_padded_batches_get_the_stock_loss_and_gradients(
    request: pytest.FixtureRequest, arch: str, num_items: Any, options: dict[str, int]
) -> None:
    model = _model(request.getfixturevalue(f"tiny_{arch}_dir"))
    items = torch.tensor(137) if num_items == "tensor" else num_items
    _assert_same(model, _padded(model), items, **options)


@pytest.mark.parametrize("options", CHUNKING)
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_packed_micro_batches_get_the_stock_loss_and_gradients(
    request: pytest.FixtureRequest, arch: str, options: dict[str, int]
) -> None:
    model = _model(request.getfixturevalue(f"tiny_{arch}_dir"))
    collator = MicroBatchPackingCollator(PackedCollator.for_model(model, pad_token_id=0), max_length=48)
    batch = collator(_examples(model.config.vocab_size, 8, seed=1))
    assert batch["input_ids"].shape[0] > 1 and batch["attention_mask"].dim() == 4  # several packs, block masks
    _assert_same(model, batch, **options)
    _assert_same(model, batch, 91, **options)


@pytest.mark.parametrize("options", CHUNKING)
def test_a_lora_model_gets_the_stock_loss_and_adapter_gradients(tiny_llama_dir: Path, options: dict[str, int]) -> None:
    model = _model(tiny_llama_dir, lora=True)
    batch = _padded(model)
    _assert_same(model, batch, **options)
    _assert_same(model, batch, 60, **options)
    assert all("lora_" in name for name in _chunked(model, batch, None)[1])  # only the adapter trains


def test_no_logits_are_kept_for_the_backward(tiny_llama_dir: Path) -> None:
    # What computing each chunk's gradients in the forward buys: the graph keeps gradients as large as
    # the hidden states and the head, never a (rows × vocab) tensor of logits or probabilities.
    from torch.autograd.graph import saved_tensors_hooks

    model = _model(tiny_llama_dir)
    batch = _padded(model)
    vocab = model.config.vocab_size
    widths: list[int] = []

    def pack(tensor: Any) -> Any:
        widths.append(tensor.shape[-1] if tensor.dim() else 0)
        return tensor

    with saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = chunked_causal_lm_loss(model, batch, chunk_tokens=8)
    assert widths and vocab not in widths
    with saved_tensors_hooks(pack, lambda tensor: tensor):
        _ = model(**batch).loss  # the stock loss does keep them: the check can see them
    assert vocab in widths
    loss.backward()


def test_a_batch_without_labelled_tokens_still_backpropagates(tiny_llama_dir: Path) -> None:
    model = _model(tiny_llama_dir)
    batch = _padded(model, 2)
    batch["labels"] = torch.full_like(batch["labels"], -100)
    loss = chunked_causal_lm_loss(model, batch, 5)
    loss.backward()
    assert float(loss.detach()) == 0.0
    stock = model(**batch).loss
    assert torch.isnan(stock) and torch.isnan(chunked_causal_lm_loss(model, batch))  # the mean of nothing, alike


def _count_chunked_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the trainer's calls of the chunked loss (so a silent fallback to the stock loss shows)."""
    from tunedeck.engine.speedups import chunked_loss

    calls: list[int] = []
    original = chunked_loss.chunked_causal_lm_loss

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(chunked_loss, "chunked_causal_lm_loss", counted)
    return calls


def test_the_trainer_subclass_matches_the_stock_trainer_under_bf16_autocast(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mixed precision: the parts are called outside accelerate's autocast-wrapped forward, and must still autocast."""
    from transformers import Trainer, TrainingArguments

    calls = _count_chunked_calls(monkeypatch)
    examples = _examples(512, 16, seed=3)
    runs: dict[str, list[float]] = {}
    from tunedeck.engine.training.trainer import TunedeckTrainer

    def chunked(**kwargs: Any) -> Any:
        return TunedeckTrainer(count_tokens_on_host=False, chunked_loss=True, **kwargs)

    for name, trainer_class in (("stock", Trainer), ("chunked", chunked)):
        model = _model(tiny_llama_dir)
        args = TrainingArguments(
            output_dir=str(tmp_path / name), max_steps=4, per_device_train_batch_size=4,
            gradient_accumulation_steps=2, learning_rate=1e-3, bf16=True, use_cpu=True, report_to="none",
            logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0, remove_unused_columns=False,
        )
        trainer = trainer_class(model=model, args=args, train_dataset=examples, data_collator=PaddingCollator(0, "sft"))
        assert trainer.model_accepts_loss_kwargs  # so num_items_in_batch reaches the loss
        trainer.train()
        runs[name] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(runs["stock"]) == 4 and len(calls) == 8  # every micro-batch of the chunked run
    # bf16 matmuls in both: equal to about 1e-6; the chunked path without autocast is off by up to 3e-3 here.
    assert runs["chunked"] == pytest.approx(runs["stock"], abs=2e-4)


def test_evaluation_and_outputs_keep_the_stock_loss(tiny_llama_dir: Path, tmp_path: Path) -> None:
    from transformers import TrainingArguments

    from tunedeck.engine.training.trainer import TunedeckTrainer

    model = _model(tiny_llama_dir)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    trainer = TunedeckTrainer(model=model, args=args, count_tokens_on_host=False, chunked_loss=True)
    batch = _padded(model)
    loss, outputs = trainer.compute_loss(model, batch, return_outputs=True)
    assert outputs.logits.shape[-1] == model.config.vocab_size
    model.eval()
    with torch.no_grad():
        assert float(trainer.compute_loss(model, batch)) == pytest.approx(float(loss), abs=TOLERANCE)


# --- where it applies -----------------------------------------------------------------------------


def _tiny_gemma2() -> Any:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=8)
    return Gemma2ForCausalLM(config)


def test_auto_turns_it_on_for_sft_on_one_process(tiny_llama_dir: Path, tiny_gpt2_dir: Path) -> None:
    for folder in (tiny_llama_dir, tiny_gpt2_dir):
        choice = decide_chunked_loss(_model(folder), validate_config({}), processes=1)
        assert choice.enabled and choice.reason is None
    assert decide_chunked_loss(_model(tiny_llama_dir, lora=True), validate_config({}), processes=1).enabled


def test_auto_falls_back_and_says_why(tiny_llama_dir: Path) -> None:
    model = _model(tiny_llama_dir)
    cases = [
        (model, {"task": "classification"}, 1, "task classification"),
        (model, {"torch_compile": True}, 1, "torch_compile"),
        (model, {"chunked_cross_entropy": False}, 1, "chunked_cross_entropy: false"),
        (_tiny_gemma2(), {}, 1, "'gemma2'"),
        (SimpleNamespace(config=SimpleNamespace(model_type="made_up")), {}, 1, "'made_up'"),
    ]
    for candidate, values, processes, reason in cases:
        choice = decide_chunked_loss(candidate, validate_config(values), processes)
        assert not choice.enabled and reason in str(choice.reason), (values, choice)
    # Several processes: under ddp it applies (through the wrapper's forward), under fsdp it does not.
    assert decide_chunked_loss(model, validate_config({}), 2, "ddp").enabled
    sharded = decide_chunked_loss(model, validate_config({}), 2, "fsdp")
    assert not sharded.enabled and "fsdp" in str(sharded.reason)


def test_logit_softcapping_is_refused_even_on_a_listed_type(tiny_llama_dir: Path) -> None:
    model = _model(tiny_llama_dir)
    model.config.final_logit_softcapping = 30.0
    assert "final_logit_softcapping" in str(model_problem(model))


def test_true_where_it_does_not_apply_is_a_config_error_naming_the_field(tiny_llama_dir: Path) -> None:
    model = _model(tiny_llama_dir)
    config = validate_config({"chunked_cross_entropy": True})
    assert decide_chunked_loss(model, config, 1).enabled
    for candidate, processes, strategy in ((model, 2, "fsdp"), (_tiny_gemma2(), 1, "none")):
        with pytest.raises(ConfigError) as caught:
            decide_chunked_loss(candidate, config, processes, strategy)
        assert [issue.field for issue in caught.value.issues] == ["chunked_cross_entropy"]
    for values in ({"task": "classification"}, {"torch_compile": True}):
        with pytest.raises(ConfigError) as caught:
            validate_config({**values, "chunked_cross_entropy": True})
        assert [issue.field for issue in caught.value.issues] == ["chunked_cross_entropy"]
