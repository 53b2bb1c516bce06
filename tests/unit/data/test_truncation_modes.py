"""The `truncation` modes, templates that refuse system messages or rewrite earlier turns."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.errors import DataError
from tunedeck.data.cache import cache_key, cache_key_parts
from tunedeck.data.tokenize import IGNORE_INDEX, TokenizedRows, encode_rows, tokenize_rows

# Gemma's template refuses a system message outright.
NO_SYSTEM_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + '<|end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
# Like Qwen3's: the reasoning of assistant turns before the last user message is dropped.
DROPS_REASONING_TEMPLATE = (
    "{% set ns = namespace(last_user=-1) %}{% for m in messages %}{% if m['role'] == 'user' %}"
    "{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{{ '<|' + m['role'] + '|>\n' }}"
    "{% if m['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in m['content'] %}"
    "{{ m['content'].split('</think>')[-1].lstrip() }}{% else %}{{ m['content'] }}{% endif %}"
    "{{ '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
REASONING_CHAT = [
    {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "<think>hmm</think>A1"},
    {"role": "user", "content": "Q2"},
    {"role": "assistant", "content": "<think>ok</think>B2"},
]
LONG_CHAT = {
    "messages": [
        {"role": "system", "content": "Answer briefly. " * 3},
        {"role": "user", "content": "Say hello"},
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": "Name a colour " * 3},
        {"role": "assistant", "content": "Blue."},
    ]
}


@pytest.fixture(scope="module")
def tok(tiny_llama_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_dir)


def with_template(tok: Any, template: str) -> Any:
    out = copy.deepcopy(tok)
    out.chat_template = template
    return out


def ids_of(tok: Any, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def trained_ids(tokenized: TokenizedRows, row: int = 0) -> list[int]:
    return [t for t, label in zip(tokenized.input_ids[row], tokenized.labels[row], strict=True)
            if label != IGNORE_INDEX]


PROMPT, ANSWER = "one two three four five six", " nine ten"


def test_prompt_completion_modes_token_exact(tok: Any) -> None:
    bos, eos = tok.bos_token_id, tok.eos_token_id
    prompt, answer = ids_of(tok, PROMPT), ids_of(tok, ANSWER)
    rows = [{"prompt": "Fine?", "completion": " yes"}, {"prompt": PROMPT, "completion": ANSWER}]
    max_length = 1 + 3 + len(answer) + 1  # BOS, three prompt tokens, the answer, eos

    with pytest.raises(DataError, match=r"train\.jsonl:9"):
        tokenize_rows(rows, "prompt_completion", tok, max_length=max_length - 3 - len(answer),
                      row_numbers=[3, 9], source="train.jsonl")

    cut = tokenize_rows(rows, "prompt_completion", tok, max_length=max_length, truncation="truncate_prompt")
    assert cut.input_ids[1] == [bos, *prompt[-3:], *answer, eos]
    assert cut.labels[1] == [IGNORE_INDEX] * 4 + [*answer, eos]
    report = cut.report
    assert (report.truncated, report.prompt_cut, report.prompt_tokens_cut) == (1, 1, len(prompt) - 3)
    assert (report.lost_part_of_answer, report.lost_all_answer, report.refused_rows) == (0, 0, [])
    assert report.to_dict()["prompt_cut"] == 1
    assert report.trainable_tokens == len(trained_ids(cut, 0)) + len(answer) + 1
    # The row that fits is untouched.
    assert cut.input_ids[0] == tokenize_rows(rows[:1], "prompt_completion", tok, max_length=64).input_ids[0]

    # An answer longer than max_length alone keeps BOS and its first tokens.
    short = tokenize_rows(rows[1:], "prompt_completion", tok, max_length=4, truncation="truncate_prompt")
    assert short.input_ids[0] == [bos, *answer[:3]]
    assert short.labels[0] == [IGNORE_INDEX, *answer[:3]]
    assert short.report.lost_part_of_answer == 1 and short.report.prompt_tokens_cut == len(prompt)


def test_drop_leaves_out_the_rows_and_names_them(tok: Any) -> None:
    rows = [{"prompt": "Fine?", "completion": " yes"}, {"prompt": PROMPT, "completion": ANSWER},
            {"prompt": "Ok?", "completion": " no"}]
    everything = encode_rows(rows, "prompt_completion", tok, max_length=8)
    out = tokenize_rows(rows, "prompt_completion", tok, max_length=8, truncation="drop",
                        row_numbers=[3, 9, 12], source="train.jsonl")
    assert out.input_ids == [everything.input_ids[0], everything.input_ids[2]]
    assert out.labels == [everything.labels[0], everything.labels[2]]
    report = out.report.to_dict()
    assert report["dropped"] == 1 and report["dropped_rows"] == [1]
    assert report["dropped_row_names"] == ["train.jsonl:9"] and report["total"] == 3
    assert report["total_tokens"] == len(out.input_ids[0]) + len(out.input_ids[1])
    assert report["warnings"] == ["1 example(s) left out: no token would be trained after truncation at "
                                  "max_length 8 (train.jsonl:9)"]


def test_extraction_truncate_prompt_keeps_the_json_answer(tok: Any) -> None:
    rows = [{"input": "x " * 30, "output": {"a": 1}}]
    answer = ids_of(tok, '{"a": 1}')
    out = tokenize_rows(rows, "extraction", tok, max_length=len(answer) + 3, truncation="truncate_prompt")
    assert out.input_ids[0][0] == tok.bos_token_id and out.input_ids[0][-1] == tok.eos_token_id
    assert trained_ids(out) == [*answer, tok.eos_token_id]
    assert len(out.input_ids[0]) == len(answer) + 3


@pytest.mark.parametrize("marked", [True, False])
def test_chat_truncate_prompt_cuts_earlier_turns_and_keeps_the_last_answer(tok: Any, marked: bool) -> None:
    chat_tok = tok if marked else with_template(
        tok, tok.chat_template.replace("{% generation %}", "").replace("{% endgeneration %}", ""))
    full = encode_rows([LONG_CHAT], "chat", chat_tok, max_length=4096)
    ids, labels = full.input_ids[0], full.labels[0]
    last_answer = ids_of(chat_tok, "Blue.<|end|>")
    assert trained_ids(full)[-len(last_answer):] == last_answer
    max_length = len(ids) - 10
    out = tokenize_rows([LONG_CHAT], "chat", chat_tok, max_length=max_length, truncation="truncate_prompt")
    # The leading specials (BOS, then the system turn's role marker) are kept; the ten tokens after go.
    assert ids[0] == tok.bos_token_id and ids[1] in tok.all_special_ids and ids[2] not in tok.all_special_ids
    assert out.input_ids[0] == [*ids[:2], *ids[12:]]
    assert out.labels[0] == [IGNORE_INDEX, IGNORE_INDEX, *labels[12:]]
    assert trained_ids(out)[-len(last_answer):] == last_answer
    assert (out.report.prompt_cut, out.report.prompt_tokens_cut, out.report.truncated) == (1, 10, 1)
    # Without truncate_prompt the same length cuts the answer from the right.
    right = encode_rows([LONG_CHAT], "chat", chat_tok, max_length=max_length)
    assert right.input_ids[0] == ids[:max_length] and right.report.lost_part_of_answer == 1


def test_chat_drop(tok: Any) -> None:
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}, LONG_CHAT]
    out = tokenize_rows(rows, "chat", tok, max_length=40, truncation="drop")
    assert len(out) == 1 and out.report.dropped_rows == [1] and out.report.dropped_row_names == ["row 2"]


def test_cache_key_includes_the_truncation_mode() -> None:
    common: dict[str, Any] = {"dataset_hash": "d", "tokenizer_hash": "t", "kind": "chat", "task": "sft",
                              "max_length": 64, "packing": False, "train_on_inputs": False, "label2id": None}
    keys = {cache_key(cache_key_parts(**common, truncation=mode)) for mode in ("refuse", "drop", "truncate_prompt")}
    assert len(keys) == 3
    assert cache_key_parts(**common)["truncation"] == "refuse"


def test_unknown_mode_is_refused(tok: Any) -> None:
    with pytest.raises(ValueError, match="truncation 'left' is unknown"):
        encode_rows([{"text": "a"}], "text", tok, max_length=8, truncation="left")


def test_system_message_merged_into_first_user_turn_when_the_template_refuses_it(tok: Any) -> None:
    no_system = with_template(tok, NO_SYSTEM_TEMPLATE)
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"},
                         {"role": "assistant", "content": "Hi"}]}
    plain = {"messages": chat["messages"][1:]}
    out = tokenize_rows([chat, plain], "chat", no_system, max_length=256)
    assert out.input_ids[0] == ids_of(
        no_system, "<s><|user|>\nBe brief.\n\nSay hello<|end|>\n<|assistant|>\nHi<|end|>\n")
    assert out.input_ids[1] == ids_of(no_system, "<s><|user|>\nSay hello<|end|>\n<|assistant|>\nHi<|end|>\n")
    assert trained_ids(out, 0) == trained_ids(out, 1) == ids_of(no_system, "Hi<|end|>")
    report = out.report.to_dict()
    assert report["system_merged"] == 1
    assert any("refuses a system message" in warning for warning in report["warnings"])
    # A template that takes system messages renders them as they are.
    accepting = with_template(tok, NO_SYSTEM_TEMPLATE.replace("raise_exception('System role not supported')", "''"))
    assert tokenize_rows([chat], "chat", accepting, max_length=256).report.system_merged == 0


def test_template_that_drops_earlier_reasoning_is_refused_with_the_turn_and_the_fix(tok: Any) -> None:
    reasoning = with_template(tok, DROPS_REASONING_TEMPLATE)
    with pytest.raises(DataError) as caught:
        tokenize_rows([{"messages": REASONING_CHAT}], "chat", reasoning, max_length=256,
                      row_numbers=[4], source="chats.jsonl")
    message = str(caught.value)
    assert "chats.jsonl:4" in message and "messages[1] renders differently" in message
    assert "assistant turn 1 of 2" in message
    assert 'set "weight": 0 on the earlier assistant messages' in message and "{% generation %}" in message
    # The fix it names works: only the last answer is trained, its reasoning included.
    weighted = [dict(m) for m in REASONING_CHAT]
    weighted[1]["weight"] = 0
    out = tokenize_rows([{"messages": weighted}], "chat", reasoning, max_length=256)
    expected = "<|user|>\nQ1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nQ2<|end|>\n<|assistant|>\n"
    assert out.input_ids[0] == ids_of(reasoning, expected + "<think>ok</think>B2<|end|>\n")
    trained = trained_ids(out)
    assert trained == out.input_ids[0][len(ids_of(reasoning, expected)):][: len(trained)]
    assert reasoning.decode(trained).replace(" ", "").startswith("<think>ok</think>B2")


def test_training_data_passes_the_mode_and_reports_the_dropped_rows(tok: Any, tmp_path: Path) -> None:
    import json

    from tests.integration.engine.engine_data import fast_config
    from tunedeck.engine.training.training_data import prepare_data

    train = tmp_path / "train.jsonl"
    rows = [{"prompt": "Fine?", "completion": " yes"}, {"prompt": "word " * 40, "completion": " no"},
            {"prompt": "Ok?", "completion": " sure"}]
    train.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.jsonl:2"):
        prepare_data(fast_config(max_length=16), tok, train, None)
    prepared = prepare_data(fast_config(max_length=16, truncation="drop"), tok, train, None, tmp_path / "cache")
    assert len(prepared.train) == 2
    report = prepared.reports["train"]
    assert report["dropped"] == 1 and report["dropped_row_names"] == [f"{train}:2"]
    assert "1 example(s) left out" in report["warnings"][0]
    cut = prepare_data(fast_config(max_length=16, truncation="truncate_prompt"), tok, train, None, tmp_path / "cache")
    assert len(cut.train) == 3 and cut.reports["train"]["prompt_cut"] == 1
    assert cut.reports["train"]["cache_hit"] is False  # a different mode is a different cache entry


def test_evaluation_follows_the_mode_and_keeps_the_procedure_hash(tok: Any, tiny_llama_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from tunedeck.eval.runner import make_procedure, run_procedure

    rows = [{"text": "a short line"}, {"text": "word " * 40}]
    refuse = make_procedure(rows, "text", task="sft", max_length=16)
    drop = make_procedure(rows, "text", task="sft", max_length=16, truncation="drop")
    assert "truncation" not in refuse.to_dict() and drop.to_dict()["truncation"] == "drop"
    assert refuse.sha256 != drop.sha256
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    result = run_procedure(model, tok, rows, drop)  # text rows always keep a token: nothing is dropped
    assert [example["loss"] is not None for example in result.examples] == [True, True]
    prompts = [{"prompt": "Fine?", "completion": " yes"}, {"prompt": "word " * 40, "completion": " no"}]
    with pytest.raises(DataError):
        run_procedure(model, tok, prompts, make_procedure(prompts, "prompt_completion", task="sft", max_length=16))
    dropped = run_procedure(model, tok, prompts,
                            make_procedure(prompts, "prompt_completion", task="sft", max_length=16, truncation="drop"))
    assert dropped.examples[0]["loss"] is not None and dropped.examples[1]["loss"] is None


def test_the_run_log_says_which_rows_were_left_out(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from tests.integration.engine.engine_data import fast_config
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.training.run_spec import RunSpec
    from tunedeck.engine.training.training_run import TrainingRun, _Opened

    class Recorder:
        def __init__(self) -> None:
            self.events: list[dict[str, Any]] = []

        def emit(self, event_type: Any, **fields: Any) -> dict[str, Any]:
            self.events.append({"type": str(event_type), **fields})
            return self.events[-1]

    run = TrainingRun(RunSpec(fast_config(truncation="drop"), ModelRef("m"), tmp_path / "t.jsonl", tmp_path / "run"))
    warning = "1 example(s) left out: no token would be trained after truncation at max_length 8 (t.jsonl:2)"
    reports = {"train": {"warnings": [warning], "dropped_row_names": ["t.jsonl:2"]}, "validation": {"warnings": []}}
    data = SimpleNamespace(reports=reports, contamination=None)
    plan = SimpleNamespace(data=data, loaded=SimpleNamespace(start=None))
    run._plan = plan  # type: ignore[assignment]
    recorder = Recorder()
    run._opened = _Opened(run_dir=None, events=recorder)  # type: ignore[arg-type]
    run._announce()
    assert recorder.events == [{"type": "log", "level": "warning", "message": f"train data: {warning}",
                                "split": "train", "dropped_rows": ["t.jsonl:2"]}]
