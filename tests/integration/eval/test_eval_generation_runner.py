"""Generation evaluation on the tiny Llama: left padding, deterministic, same procedure or refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.eval.eval_data import chat_rows
from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError
from tunedeck.eval.baseline import BaselineEvaluator, ProcedureMismatchError
from tunedeck.eval.decoding import build_prompts
from tunedeck.eval.procedure import DEFAULT_MAX_NEW_TOKENS, GenerationSettings
from tunedeck.eval.runner import evaluate_model, make_procedure


@pytest.fixture(scope="module")
def llama(tiny_llama_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_llama_dir), AutoTokenizer.from_pretrained(tiny_llama_dir)


def _outputs(model: Any, tokenizer: Any, rows: list[dict[str, Any]], batch_size: int) -> list[str]:
    result = evaluate_model(model, tokenizer, rows, "chat", task="generation", max_length=96,
                            batch_size=batch_size, generation=GenerationSettings(max_new_tokens=12))  # fmt: skip
    return [example["prediction"] for example in result.examples]


def test_generation_is_deterministic_and_independent_of_batch_size(llama: tuple[Any, Any]) -> None:
    model, tokenizer = llama
    rows = chat_rows(6)
    first = _outputs(model, tokenizer, rows, 4)
    assert first == _outputs(model, tokenizer, rows, 4)
    assert first == _outputs(model, tokenizer, rows, 1)
    assert any(first)  # the model said something, so equality is not trivially between empty strings


def test_batches_are_left_padded_and_prompts_end_with_the_generation_prompt(
    llama: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = llama
    rows = chat_rows(4)
    seen: list[Any] = []
    original = model.generate

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(model, "generate", spy)
    result = evaluate_model(model, tokenizer, rows, "chat", task="generation", max_length=96, batch_size=4,
                            generation=GenerationSettings(max_new_tokens=5))  # fmt: skip
    (call,) = seen
    mask, ids = call["attention_mask"], call["input_ids"]
    lengths = mask.sum(dim=1).tolist()
    assert len(set(lengths)) > 1  # prompts of different lengths, so padding happened
    assert mask[:, -1].tolist() == [1, 1, 1, 1]  # every prompt ends at the last column: left padding
    for row, length in zip(ids.tolist(), lengths, strict=True):
        assert row[: len(row) - length] == [tokenizer.pad_token_id] * (len(row) - length)
    assert call["generation_config"].do_sample is False and call["generation_config"].num_beams == 1
    assert call["generation_config"].max_new_tokens == 5
    # The prompt is the conversation minus its answer, rendered by the chat template with the generation prompt.
    prompt = build_prompts(rows[:1], "chat", tokenizer, max_length=96)[0]
    expected = tokenizer.apply_chat_template(rows[0]["messages"][:1], tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(prompt.ids) == expected
    assert result.examples[0]["reference"] == rows[0]["messages"][-1]["content"]
    assert result.to_dict()["procedure"]["generation"] == {
        "max_new_tokens": 5, "do_sample": False, "num_beams": 1, "padding_side": "left"
    }  # fmt: skip


def test_eval_loss_counts_only_the_answer_tokens(llama: tuple[Any, Any]) -> None:
    from tunedeck.core.token_labels import IGNORE_INDEX
    from tunedeck.data.tokenize import tokenize_rows

    model, tokenizer = llama
    rows = chat_rows(3)
    result = evaluate_model(model, tokenizer, rows, "chat", task="sft", max_length=96, batch_size=2)
    masks = tokenize_rows(rows, "chat", tokenizer, max_length=96)
    trained = [sum(label != IGNORE_INDEX for label in row[1:]) for row in masks.labels]
    assert [example["loss_tokens"] for example in result.examples] == trained
    assert set(result.metrics) == {"eval_loss", "eval_perplexity"}


def test_final_evaluation_with_another_procedure_is_refused(llama: tuple[Any, Any], tmp_path: Path) -> None:
    model, tokenizer = llama
    rows = chat_rows(3)
    baseline = BaselineEvaluator(rows, make_procedure(rows, "chat", task="generation", max_length=96, batch_size=2,
                                                      generation=GenerationSettings(max_new_tokens=4)))  # fmt: skip
    written = baseline.run_baseline(model, tokenizer, tmp_path)
    assert (tmp_path / "baseline_eval.json").is_file()
    # Resuming keeps the baseline already written rather than evaluating again.
    assert baseline.run_baseline(model, tokenizer, tmp_path) == written
    longer = BaselineEvaluator(rows, make_procedure(rows, "chat", task="generation", max_length=96, batch_size=2,
                                                    generation=GenerationSettings(max_new_tokens=8)))  # fmt: skip
    with pytest.raises(ProcedureMismatchError, match="generation"):
        longer.run_final(model, tokenizer, tmp_path)
    assert not (tmp_path / "final_eval.json").exists()
    with pytest.raises(Exception, match="evaluation data changed"):
        baseline.rows = chat_rows(4)[1:]
        baseline.evaluate(model, tokenizer)


def test_extraction_outputs_are_scored_per_example_and_per_field(llama: tuple[Any, Any]) -> None:
    model, tokenizer = llama
    rows = [
        {"input": f"Name: Ann {i}. Age: {20 + i}.", "output": {"name": f"Ann {i}", "age": 20 + i}} for i in range(3)
    ]
    result = evaluate_model(model, tokenizer, rows, "extraction", task="extraction", max_length=64, batch_size=2,
                            generation=GenerationSettings(max_new_tokens=6))  # fmt: skip
    # Unless named, the required fields are those every reference has, in the references' order.
    assert result.procedure.required_fields == ("name", "age")
    assert set(result.metrics["fields"]) == {"name", "age"}
    assert 0.0 <= result.metrics["json_valid_rate"] <= 1.0
    for example, row in zip(result.examples, rows, strict=True):
        assert example["reference"] == row["output"]
        assert isinstance(example["prediction"], str) and "json_valid" in example and "missing_fields" in example


def test_the_run_config_caps_each_answer_and_defaults_to_the_procedure_default(
    llama: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = llama
    rows = chat_rows(3)
    default = BaselineEvaluator.for_run(validate_config({}), rows, "chat")
    assert default.procedure.generation.max_new_tokens == DEFAULT_MAX_NEW_TOKENS == 128
    capped = BaselineEvaluator.for_run(validate_config({"eval_max_new_tokens": 3}), rows, "chat")
    assert capped.procedure.generation.max_new_tokens == 3
    assert capped.procedure.sha256 != default.procedure.sha256  # a different cap is a different procedure
    seen: list[int] = []
    original = model.generate

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs["generation_config"].max_new_tokens)
        return original(**kwargs)

    monkeypatch.setattr(model, "generate", spy)
    result = capped.evaluate(model, tokenizer)
    assert seen and set(seen) == {3}
    cut = [example["cut_at_max_new_tokens"] for example in result.examples]
    assert any(cut)
    monkeypatch.setattr(model, "generate", original)
    uncapped = default.evaluate(model, tokenizer)
    for was_cut, short, full in zip(cut, result.examples, uncapped.examples, strict=True):
        # Greedy decoding: the capped answer is where the uncapped one starts; a cut one is shorter.
        assert full["prediction"].startswith(short["prediction"].strip())
        if was_cut:
            assert len(full["prediction"]) > len(short["prediction"])


def test_eval_max_new_tokens_out_of_range_names_the_field() -> None:
    with pytest.raises(ConfigError) as raised:
        validate_config({"eval_max_new_tokens": 0})
    assert any(issue.field == "eval_max_new_tokens" for issue in raised.value.issues)
