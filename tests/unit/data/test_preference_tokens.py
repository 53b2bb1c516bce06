"""Preference tokenization: TRL's own ids for the same rows, then our truncation rules."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tunedeck.core.errors import DataError
from tunedeck.data.preference_tokens import preference_token_spans, tokenize_preference_rows
from tunedeck.demo.tiny_corpus import builtin_corpus
from tunedeck.demo.tiny_models import CHAT_TEMPLATE, build_tokenizer

TOOLS_PREFIX = "{% if tools %}<|system|>\n{{ tools | tojson }}<|end|>\n{% endif %}"
WEATHER = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
SKY = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What color is the sky?"}]

PAIRS: list[dict[str, Any]] = [
    {"prompt": SKY, "chosen": [{"role": "assistant", "content": "It is blue."}],
     "rejected": [{"role": "assistant", "content": "It is green, of course, like the grass."}]},
    {"prompt": SKY[1:], "chosen": [{"role": "assistant", "content": "Blue."}],
     "rejected": [{"role": "assistant", "content": "Green."}], "tools": WEATHER},
]  # fmt: skip
STANDARD_PAIRS = [
    {"prompt": "The sky is", "chosen": " blue.", "rejected": " green like grass."},
    {"prompt": "Say yes:", "chosen": " yes", "rejected": " no"},
]
UNPAIRED = [
    {"prompt": SKY, "completion": [{"role": "assistant", "content": "Blue."}], "label": True},
    {"prompt": SKY[1:], "completion": [{"role": "assistant", "content": "Green."}], "label": False},
]
STANDARD_UNPAIRED = [{"prompt": "The sky is", "completion": " blue.", "label": True}]


@pytest.fixture(scope="module")
def chat_tok() -> Any:
    tok = build_tokenizer(builtin_corpus(), "llama")
    tok.chat_template = TOOLS_PREFIX + CHAT_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def plain_tok(chat_tok: Any) -> Any:
    tok = copy.deepcopy(chat_tok)
    tok.chat_template = None
    return tok


def trl_features(example: dict[str, Any], tok: Any, answers: tuple[str, ...]) -> dict[str, list[int]]:
    """What TRL's DPO/KTO `_prepare_dataset` makes of one row: its EOS step, then its tokenize_fn."""
    from trl.data_utils import _tokenize, common_prefix_length, is_conversational

    example = dict(example)
    conversational = is_conversational(example)
    if not conversational:
        for name in answers:
            if not example[name].endswith(tok.eos_token):
                example[name] = example[name] + tok.eos_token
    tools = example.get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools
    kwargs = {"tools": tools}
    if conversational:
        prompt_ids = _tokenize(tok, example["prompt"], add_generation_prompt=True, **kwargs)["input_ids"]
        whole = [_tokenize(tok, example["prompt"] + example[name], **kwargs)["input_ids"] for name in answers]
    else:
        prompt_ids = _tokenize(tok, example["prompt"])["input_ids"]
        whole = [_tokenize(tok, example["prompt"] + example[name])["input_ids"] for name in answers]
    end = min(common_prefix_length(prompt_ids, ids) for ids in whole)
    answer_ids = {f"{name}_ids": ids[end:] for name, ids in zip(answers, whole, strict=True)}
    return {"prompt_ids": prompt_ids[:end], **answer_ids}


@pytest.mark.parametrize(("rows", "kind", "answers"), [
    (PAIRS, "preference", ("chosen", "rejected")),
    (STANDARD_PAIRS, "preference", ("chosen", "rejected")),
    (UNPAIRED, "unpaired_preference", ("completion",)),
    (STANDARD_UNPAIRED, "unpaired_preference", ("completion",)),
])  # fmt: skip
def test_ids_equal_trl(chat_tok: Any, rows: list[dict[str, Any]], kind: str, answers: tuple[str, ...]) -> None:
    features, report = tokenize_preference_rows(rows, chat_tok, kind=kind, max_length=512, max_prompt_length=None,
                                                truncation="refuse")
    for row, got in zip(rows, features, strict=True):
        expected = trl_features(row, chat_tok, answers)
        assert {key: got[key] for key in expected} == expected
        if kind == "unpaired_preference":
            assert got["label"] is row["label"]
    assert report["total"] == report["rows_kept"] == len(rows) and report["truncated"] == 0
    # The tools are rendered: the row with them has a longer prompt than without.
    if "tools" in rows[-1]:
        bare = tokenize_preference_rows([{**rows[-1], "tools": None}], chat_tok, kind=kind, max_length=512,
                                        max_prompt_length=None, truncation="refuse")[0][0]
        assert len(features[-1]["prompt_ids"]) > len(bare["prompt_ids"])


def test_standard_rows_without_a_chat_template_equal_trl(plain_tok: Any) -> None:
    features, _ = tokenize_preference_rows(STANDARD_PAIRS, plain_tok, kind="preference", max_length=512,
                                           max_prompt_length=None, truncation="refuse")
    assert features == [trl_features(row, plain_tok, ("chosen", "rejected")) for row in STANDARD_PAIRS]
    assert features[0]["chosen_ids"][-1] == plain_tok.eos_token_id
    assert features[0]["prompt_ids"][0] == plain_tok.bos_token_id


def test_conversational_rows_need_a_chat_template(plain_tok: Any) -> None:
    with pytest.raises(DataError, match="cannot render chat rows"):
        tokenize_preference_rows(PAIRS, plain_tok, kind="preference", max_length=512, max_prompt_length=None,
                                 truncation="refuse")


def _lengths(chat_tok: Any) -> tuple[int, int, int]:
    full = trl_features(PAIRS[0], chat_tok, ("chosen", "rejected"))
    return len(full["prompt_ids"]), len(full["chosen_ids"]), len(full["rejected_ids"])


def test_max_prompt_length_keeps_the_prompt_end_and_bos(chat_tok: Any) -> None:
    prompt_len, _, rejected_len = _lengths(chat_tok)
    full = trl_features(PAIRS[0], chat_tok, ("chosen", "rejected"))
    features, report = tokenize_preference_rows(PAIRS[:1], chat_tok, kind="preference", max_length=512,
                                                max_prompt_length=5, truncation="refuse")
    prompt = features[0]["prompt_ids"]
    assert prompt == [chat_tok.bos_token_id, *full["prompt_ids"][-4:]]
    assert features[0]["chosen_ids"] == full["chosen_ids"]
    assert report["truncated_prompts"] == 1 and report["prompt_tokens_cut"] == prompt_len - 5
    assert report["lengths"]["prompt"]["max"] == prompt_len and report["lengths"]["rejected"]["max"] == rejected_len


def test_answers_are_cut_from_the_right_to_what_the_prompt_leaves(chat_tok: Any) -> None:
    prompt_len, chosen_len, rejected_len = _lengths(chat_tok)
    max_length = prompt_len + chosen_len  # rejected is longer: it loses its end
    full = trl_features(PAIRS[0], chat_tok, ("chosen", "rejected"))
    features, report = tokenize_preference_rows(PAIRS[:1], chat_tok, kind="preference", max_length=max_length,
                                                max_prompt_length=None, truncation="refuse")
    assert features[0]["chosen_ids"] == full["chosen_ids"]
    assert features[0]["rejected_ids"] == full["rejected_ids"][:chosen_len] and rejected_len > chosen_len
    assert report["truncated_answers"] == 1 and report["truncated"] == 1


def test_a_prompt_filling_max_length_is_refused_dropped_or_cut(chat_tok: Any) -> None:
    prompt_len, _, rejected_len = _lengths(chat_tok)
    rows = [STANDARD_PAIRS[1], PAIRS[0]]
    options = {"kind": "preference", "max_length": prompt_len, "max_prompt_length": None,
               "file": "pairs.jsonl", "row_numbers": [3, 7]}
    with pytest.raises(DataError) as refused:
        tokenize_preference_rows(rows, chat_tok, truncation="refuse", **options)
    (issue,) = refused.value.issues
    assert (issue.file, issue.line, issue.field) == ("pairs.jsonl", 7, "max_length")
    assert "pairs.jsonl:7" in issue.message and issue.expected and "max_length" in issue.expected

    kept, report = tokenize_preference_rows(rows, chat_tok, truncation="drop", **options)
    assert len(kept) == 1 and report["dropped_row_names"] == ["pairs.jsonl:7"] and report["rows_kept"] == 1
    assert any("pairs.jsonl:7" in warning for warning in report["warnings"])

    cut, report = tokenize_preference_rows(rows, chat_tok, truncation="truncate_prompt", **options)
    prompt = cut[1]["prompt_ids"]
    assert prompt[0] == chat_tok.bos_token_id and len(prompt) == max(2, prompt_len - rejected_len)
    assert len(prompt) + len(cut[1]["rejected_ids"]) <= prompt_len and cut[1]["chosen_ids"]
    assert report["truncated_prompts"] == 1


def test_spans_show_each_part_and_its_cut(chat_tok: Any) -> None:
    prompt_len, chosen_len, rejected_len = _lengths(chat_tok)
    spans = preference_token_spans(PAIRS[0], chat_tok, kind="preference", max_length=prompt_len + chosen_len,
                                   max_prompt_length=None)
    assert spans["chosen"]["cut"] == 0 and spans["rejected"]["cut"] == rejected_len - chosen_len
    assert spans["prompt"]["tokens"][0] == chat_tok.bos_token and not spans["empty"]
    assert chat_tok.convert_tokens_to_string(spans["chosen"]["tokens"]).startswith("It is blue.")
    unpaired = preference_token_spans(UNPAIRED[1], chat_tok, kind="unpaired_preference", max_length=64,
                                      max_prompt_length=4)
    assert unpaired["label"] is False and len(unpaired["prompt"]["ids"]) == 4 and unpaired["prompt"]["cut"] > 0


def test_a_prompt_rendered_differently_alone_is_reported_and_split_as_trl_does(chat_tok: Any) -> None:
    tok = copy.deepcopy(chat_tok)
    # Like templates that open an empty thought block only when prompting for an answer.
    tok.chat_template = CHAT_TEMPLATE.replace("{{ '<|assistant|>\n' }}{% endif %}",
                                              "{{ '<|assistant|>\n<|end|>' }}{% endif %}")
    assert tok.chat_template != CHAT_TEMPLATE
    features, report = tokenize_preference_rows(PAIRS[:1], tok, kind="preference", max_length=512,
                                                max_prompt_length=None, truncation="refuse")
    assert features[0] == trl_features(PAIRS[0], tok, ("chosen", "rejected"))
    assert report["prompt_boundary_moved"] == 1 and "renders it differently" in report["warnings"][0]
