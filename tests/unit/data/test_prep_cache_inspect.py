"""Tokenized cache reuse, and the inspection report (library and CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import tunedeck.data.cache as cache_module
from tunedeck.data.cache import prepare_dataset
from tunedeck.data.inspect import inspect_examples, length_stats, percentile
from tunedeck.data.ragged import RaggedRows
from tunedeck.data.tokenizer_fingerprint import tokenizer_fingerprint

ROWS = [{"prompt": f"Question {i}: what comes after {i}?", "completion": f" {i + 1}."} for i in range(30)]


@pytest.fixture(scope="module")
def tok(tiny_llama_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_dir)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts calls of the tokenization the cache wraps."""
    calls: list[int] = []
    real = cache_module.tokenize_rows

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_module, "tokenize_rows", counting)
    return calls


def test_second_preparation_reuses_cache_without_tokenizing(tok: Any, tmp_path: Path,
                                                            counted: list[int]) -> None:
    first = prepare_dataset(ROWS, "prompt_completion", tok, max_length=32, packing=True, cache_dir=tmp_path)
    second = prepare_dataset(ROWS, "prompt_completion", tok, max_length=32, packing=True, cache_dir=tmp_path)
    assert len(counted) == 1
    assert not first.cache_hit and second.cache_hit and first.key == second.key
    assert first.tokenized is not None and second.tokenized is not None
    assert list(second.tokenized.input_ids) == first.tokenized.input_ids
    assert list(second.tokenized.labels) == first.tokenized.labels
    assert second.packs == first.packs
    assert second.report.to_dict(include_lengths=True) == first.report.to_dict(include_lengths=True)
    assert [p.name for p in tmp_path.iterdir()] == [first.key]  # no temporary folder left behind


@pytest.mark.parametrize("change", [{"max_length": 40}, {"train_on_inputs": True}, {"packing": True},
                                    {"rows": ROWS[:-1]}])
def test_key_changes_with_what_changes_the_result(tok: Any, tmp_path: Path, counted: list[int],
                                                  change: dict[str, Any]) -> None:
    base: dict[str, Any] = {"rows": ROWS, "max_length": 32, "train_on_inputs": False, "packing": False}
    first = prepare_dataset(base["rows"], "prompt_completion", tok, max_length=base["max_length"],
                            train_on_inputs=base["train_on_inputs"], packing=base["packing"],
                            cache_dir=tmp_path)
    varied = {**base, **change}
    second = prepare_dataset(varied["rows"], "prompt_completion", tok, max_length=varied["max_length"],
                             train_on_inputs=varied["train_on_inputs"], packing=varied["packing"],
                             cache_dir=tmp_path)
    assert first.key != second.key and not second.cache_hit and len(counted) == 2


def test_tokenizer_fingerprint_follows_the_chat_template(tok: Any) -> None:
    import copy

    other = copy.deepcopy(tok)
    assert tokenizer_fingerprint(other) == tokenizer_fingerprint(tok)
    other.chat_template = other.chat_template.replace("<|assistant|>", "<|user|>")
    assert tokenizer_fingerprint(other) != tokenizer_fingerprint(tok)


def test_classification_is_cached_too(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    bert = AutoTokenizer.from_pretrained(tiny_bert_dir)
    rows = [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}]
    first = prepare_dataset(rows, "classification", bert, max_length=16, task="classification",
                            cache_dir=tmp_path)
    second = prepare_dataset(rows, "classification", bert, max_length=16, task="classification",
                             cache_dir=tmp_path)
    assert second.cache_hit and second.classification is not None and first.classification is not None
    assert second.classification.labels == first.classification.labels == [1, 0]
    assert list(second.classification.input_ids) == first.classification.input_ids
    assert list(second.classification.attention_mask) == first.classification.attention_mask


def test_damaged_entry_is_rebuilt(tok: Any, tmp_path: Path, counted: list[int]) -> None:
    first = prepare_dataset(ROWS, "prompt_completion", tok, max_length=32, cache_dir=tmp_path)
    (tmp_path / first.key / "input_ids.npy").write_bytes(b"not numpy")
    again = prepare_dataset(ROWS, "prompt_completion", tok, max_length=32, cache_dir=tmp_path)
    assert not again.cache_hit and len(counted) == 2


def test_ragged_rows_round_trip() -> None:
    rows = [[1, 2, 3], [], [4], [5, 6]]
    ragged = RaggedRows.from_rows(rows)
    assert len(ragged) == 4 and list(ragged) == rows and ragged.to_lists() == rows
    assert ragged[-1] == [5, 6] and ragged[1:3] == [[], [4]] and ragged.lengths() == [3, 0, 1, 2]
    with pytest.raises(IndexError):
        ragged[4]


def test_percentiles_and_histogram() -> None:
    values = list(range(1, 101))
    assert [percentile(values, q) for q in (50, 90, 99, 100)] == [50, 90, 99, 100]
    stats = length_stats([3, 3, 10, 30])
    assert stats.max == 30 and sum(b["count"] for b in stats.histogram) == 4
    assert stats.histogram[0]["start"] == 0 and stats.histogram[-1]["end"] > 30


def test_inspect_report_shape(tok: Any) -> None:
    rows = [*ROWS[:3], {"prompt": "Tell a story:", "completion": " and then" * 40}]
    report = inspect_examples(rows, "prompt_completion", tok, max_length=40, n=4)
    data = json.loads(json.dumps(report.to_dict()))
    assert set(data) >= {"examples", "lengths", "share_truncated", "trainable_token_share", "truncation",
                         "label_distribution", "chat_mask_method", "template_version"}
    assert set(data["lengths"]) >= {"p50", "p90", "p99", "max", "histogram"}
    assert len(data["examples"]) == 4 and data["share_truncated"] == 0.25
    first = data["examples"][0]
    assert first["tokens"][0] == {"id": tok.bos_token_id, "text": "<s>", "trained": False, "special": True,
                                  "ids": [tok.bos_token_id], "mixed": False}
    assert first["tokens"][-1]["text"] == "</s>" and first["tokens"][-1]["trained"]
    assert "".join(t["text"] for t in first["tokens"] if t["trained"]) == " 1.</s>"
    last = data["examples"][3]
    assert last["truncated"] and last["kept"] == 40 and last["cut_tokens"] == last["length"] - 40


def test_inspect_classification_distribution(tiny_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    bert = AutoTokenizer.from_pretrained(tiny_bert_dir)
    rows = [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"},
            {"text": "fine", "label": "pos"}]
    report = inspect_examples(rows, "classification", bert, max_length=16, n=2)
    assert report.label_distribution == {"neg": 1, "pos": 2}
    assert report.trainable_token_share is None and report.examples[1].label == "neg"


def test_cli_inspect_json_and_coloured_output(tiny_llama_dir: Path, tmp_path: Path) -> None:
    from tunedeck.cli.data_inspect_command import register

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:6]), encoding="utf-8")
    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)  # a group with two commands keeps "inspect" as a name
    runner = CliRunner()
    result = runner.invoke(app, ["inspect", str(data), "--model", str(tiny_llama_dir), "--max-length", "32",
                                 "-n", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kind"] == "prompt_completion" and len(report["examples"]) == 2
    assert report["examples"][1]["row_number"] == 2
    shown = runner.invoke(app, ["inspect", str(data), "--model", str(tiny_llama_dir), "--max-length", "32"])
    assert shown.exit_code == 0, shown.output
    assert "p50 / p90 / p99 / max" in shown.output and "trained" in shown.output
    missing = runner.invoke(app, ["inspect", str(tmp_path / "nope.jsonl"), "--model", str(tiny_llama_dir),
                                  "--max-length", "32"])
    assert missing.exit_code == 1
