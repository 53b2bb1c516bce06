"""Templates, loss masks and truncation for every row kind, on the tiny tokenizers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.errors import DataError
from tunedeck.data.tokenize import (
    IGNORE_INDEX,
    TokenizedRows,
    canonical_json,
    encode_classification,
    encode_rows,
    tokenize_rows,
)

CHAT = {
    "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Say hello"},
        {"role": "assistant", "content": "Hello there!"},
        {"role": "user", "content": "Name a colour"},
        {"role": "assistant", "content": "Blue."},
    ]
}


@pytest.fixture(scope="module")
def llama_tok(tiny_llama_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_dir)


@pytest.fixture(scope="module")
def gpt2_tok(tiny_gpt2_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_gpt2_dir)


@pytest.fixture
def unmarked_tok(llama_tok: Any) -> Any:
    """The same tokenizer with the {% generation %} markers removed from its chat template."""
    import copy

    tok = copy.deepcopy(llama_tok)
    tok.chat_template = llama_tok.chat_template.replace("{% generation %}", "").replace(
        "{% endgeneration %}", "")
    return tok


def trained_text(tok: Any, tokenized: TokenizedRows, row: int = 0) -> str:
    ids = [t for t, label in zip(tokenized.input_ids[row], tokenized.labels[row], strict=True)
           if label != IGNORE_INDEX]
    return tok.decode(ids)


def test_text_trains_on_every_token_but_the_first(llama_tok: Any, gpt2_tok: Any) -> None:
    for tok in (llama_tok, gpt2_tok):
        out = tokenize_rows([{"text": "The cat sat on the mat."}], "text", tok, max_length=64)
        ids, labels = out.input_ids[0], out.labels[0]
        assert ids[-1] == tok.eos_token_id
        assert labels[0] == IGNORE_INDEX and labels[1:] == ids[1:]
    assert tokenize_rows([{"text": "a b"}], "text", llama_tok, max_length=64).input_ids[0][0] == \
        llama_tok.bos_token_id
    assert tokenize_rows([{"text": "a b"}], "text", gpt2_tok, max_length=64).input_ids[0][0] != \
        gpt2_tok.bos_token_id


def test_prompt_completion_trains_on_completion_and_eos(llama_tok: Any) -> None:
    rows = [{"prompt": "Question: what is two plus two?\nAnswer:", "completion": " four"}]
    out = tokenize_rows(rows, "prompt_completion", llama_tok, max_length=64)
    assert trained_text(llama_tok, out) == " four</s>"
    assert llama_tok.decode(out.input_ids[0]) == "<s>Question: what is two plus two?\nAnswer: four</s>"
    everything = tokenize_rows(rows, "prompt_completion", llama_tok, max_length=64, train_on_inputs=True)
    assert everything.labels[0][1:] == everything.input_ids[0][1:]
    assert out.report.trainable_token_share < everything.report.trainable_token_share


def test_extraction_targets_canonical_json(gpt2_tok: Any) -> None:
    rows = [{"input": "Invoice from Acme, total 12 euros.", "output": {"total": 12, "vendor": "Acme"}}]
    out = tokenize_rows(rows, "extraction", gpt2_tok, max_length=128)
    expected = canonical_json({"vendor": "Acme", "total": 12})
    assert expected == '{"total": 12, "vendor": "Acme"}'
    assert trained_text(gpt2_tok, out) == expected + gpt2_tok.eos_token
    assert json.loads(trained_text(gpt2_tok, out).removesuffix(gpt2_tok.eos_token)) == rows[0]["output"]


def test_chat_masks_with_generation_markers(llama_tok: Any) -> None:
    out = tokenize_rows([CHAT], "chat", llama_tok, max_length=128)
    assert out.chat_mask_method == "generation_markers"
    assert trained_text(llama_tok, out) == "Hello there!<|end|>Blue.<|end|>"
    rendered = llama_tok.apply_chat_template(CHAT["messages"], tokenize=False)
    assert llama_tok.decode(out.input_ids[0]) == rendered


def test_chat_masks_by_incremental_rendering_match_markers(llama_tok: Any, unmarked_tok: Any) -> None:
    marked = tokenize_rows([CHAT, CHAT], "chat", llama_tok, max_length=128)
    unmarked = tokenize_rows([CHAT, CHAT], "chat", unmarked_tok, max_length=128)
    forced = encode_rows([CHAT], "chat", llama_tok, max_length=128, force_incremental_chat=True)
    assert unmarked.chat_mask_method == forced.chat_mask_method == "incremental_rendering"
    assert unmarked.input_ids == marked.input_ids
    assert unmarked.labels == marked.labels
    assert forced.labels[0] == marked.labels[0]


def test_chat_train_on_inputs_trains_user_turns(unmarked_tok: Any) -> None:
    out = tokenize_rows([CHAT], "chat", unmarked_tok, max_length=128, train_on_inputs=True)
    assert out.labels[0][1:] == out.input_ids[0][1:]
    assert "Say hello" in trained_text(unmarked_tok, out)


def test_chat_template_that_rewrites_earlier_turns_is_refused(unmarked_tok: Any) -> None:
    # Marks the last message differently, so a shorter conversation is not a text prefix of a longer one.
    unmarked_tok.chat_template = (
        "{% for m in messages %}{% if loop.last %}[final] {% endif %}"
        "{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    with pytest.raises(DataError, match="renders earlier turns differently"):
        tokenize_rows([CHAT], "chat", unmarked_tok, max_length=128)


def test_chat_without_template_is_refused(tiny_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    with pytest.raises(DataError, match="chat template"):
        tokenize_rows([CHAT], "chat", tok, max_length=64)


def test_truncation_report_counts_planted_long_answer(llama_tok: Any) -> None:
    rows = [
        {"prompt": "Short question?", "completion": " Short answer."},
        {"prompt": "Tell a long story:", "completion": " once upon a time" * 40},
        {"prompt": "Another one?", "completion": " Yes."},
    ]
    out = tokenize_rows(rows, "prompt_completion", llama_tok, max_length=32)
    report = out.report
    counts = (report.total, report.truncated, report.lost_part_of_answer, report.lost_all_answer)
    assert counts == (3, 1, 1, 0)
    assert report.truncated_rows == [1]
    assert len(out.input_ids[1]) == 32 and report.lengths[1] > 32
    assert report.to_dict()["truncated"] == 1 and 0 < report.trainable_token_share < 1


def test_row_left_without_trained_token_is_refused_with_its_line(llama_tok: Any) -> None:
    rows = [
        {"prompt": "Fine?", "completion": " yes"},
        {"prompt": "word " * 80, "completion": " the answer"},
    ]
    with pytest.raises(DataError) as caught:
        tokenize_rows(rows, "prompt_completion", llama_tok, max_length=32,
                      row_numbers=[3, 9], source="train.jsonl")
    message = str(caught.value)
    assert "train.jsonl:9" in message and "train.jsonl:3" not in message
    assert "max_length 32" in message
    kept = encode_rows(rows, "prompt_completion", llama_tok, max_length=32)
    assert kept.report.lost_all_answer == 1 and kept.report.refused_rows == [1]


def test_batched_encoding_matches_the_tokenizer(llama_tok: Any, gpt2_tok: Any) -> None:
    from tunedeck.data.tokenize import encode_texts

    texts = ["Hello there, world!", "<|user|> tags stay special", "  spaces\nand lines ", ""]
    for tok in (llama_tok, gpt2_tok):
        expected = [list(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
        assert encode_texts(tok, texts) == expected


def test_classification_encoding(tiny_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    rows = [{"text": "great film", "label": "pos"}, {"text": "dull " * 50, "label": "neg"},
            {"text": "fine", "label": "pos"}]
    out = encode_classification(rows, tok, max_length=16)
    assert out.label2id == {"neg": 0, "pos": 1}
    assert out.labels == [1, 0, 1]
    assert len(out.input_ids[1]) == 16 and out.input_ids[1][-1] == tok.eos_token_id
    assert out.report.truncated == 1
    assert out.attention_mask[0] == [1] * len(out.input_ids[0])
    with pytest.raises(DataError, match="unknown label"):
        encode_classification(rows, tok, max_length=16, label2id={"pos": 0})
