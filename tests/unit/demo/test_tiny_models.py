"""The tiny model factory: sizes, files, chat template and assistant masks."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoConfig, AutoTokenizer

from tunedeck.demo.tiny_models import CHAT_TEMPLATE, create_tiny_model

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What do bees make?"},
    {"role": "assistant", "content": "Honey."},
]


@pytest.mark.parametrize("fixture", ["tiny_llama_dir", "tiny_gpt2_dir", "tiny_bert_dir"])
def test_tiny_models_are_small_safetensors_folders(fixture: str, request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(fixture)
    assert (folder / "model.safetensors").is_file()
    assert not list(folder.glob("*.bin"))
    assert (folder / "tokenizer.json").is_file()
    size = (folder / "model.safetensors").stat().st_size // 4  # fp32 parameters
    assert 100_000 < size < 5_000_000
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.pad_token and tokenizer.eos_token and tokenizer.bos_token
    assert AutoConfig.from_pretrained(folder).max_position_embeddings == 512 or fixture == "tiny_gpt2_dir"


def test_chat_template_marks_exactly_the_assistant_answer(tiny_llama_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    text = tokenizer.apply_chat_template(CHAT, tokenize=False)
    assert text == (
        "<s><|system|>\nBe brief.<|end|>\n<|user|>\nWhat do bees make?<|end|>\n<|assistant|>\nHoney.<|end|>\n"
    )
    encoded = tokenizer.apply_chat_template(CHAT, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [token for token, mask in zip(encoded["input_ids"], encoded["assistant_masks"], strict=True) if mask]
    assert tokenizer.decode(marked) == "Honey.<|end|>"
    prompt = tokenizer.apply_chat_template(CHAT[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|assistant|>\n")


def test_template_renders_the_same_without_the_generation_tag(tiny_llama_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    plain = CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    assert tokenizer.apply_chat_template(CHAT, tokenize=False, chat_template=plain) == tokenizer.apply_chat_template(
        CHAT, tokenize=False
    )


def test_bert_has_no_chat_template(tiny_bert_dir: Path) -> None:
    assert AutoTokenizer.from_pretrained(tiny_bert_dir).chat_template is None


def test_causal_tiny_model_is_pretrained_and_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    info = create_tiny_model("gpt2", tmp_path / "gpt2", pretrain_steps=8, vocab_size=300)
    assert info.pretrain_steps == 8
    assert info.pretrain_loss_first is not None and info.pretrain_loss_last is not None
    assert info.pretrain_loss_last < info.pretrain_loss_first
    with pytest.raises(FileExistsError):
        create_tiny_model("gpt2", tmp_path / "gpt2")
    assert [p.name for p in tmp_path.iterdir()] == ["gpt2"]  # no staging folder left behind
