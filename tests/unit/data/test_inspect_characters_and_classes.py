"""`data inspect`: characters split across byte-level tokens shown whole, and examples picked per label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tunedeck.data.inspect import _token_views, inspect_examples
from tunedeck.data.tokenize import IGNORE_INDEX
from tunedeck.demo.tiny_corpus import builtin_corpus
from tunedeck.demo.tiny_models import build_tokenizer

BROKEN = "\ufffd"


@pytest.fixture(scope="module")
def tok() -> Any:
    """The factory's byte-level BPE tokenizer: "é" and "🙂" are each split over several tokens."""
    return build_tokenizer(builtin_corpus(), "llama")


def test_the_fixture_splits_both_characters(tok: Any) -> None:
    for character in ("é", "🙂"):
        ids = tok(character, add_special_tokens=False)["input_ids"]
        assert len(ids) > 1 and all(BROKEN in tok.decode([token]) for token in ids)


def test_split_characters_show_whole_with_their_marking(tok: Any) -> None:
    rows = [{"prompt": "Say café:", "completion": " café 🙂"}]
    report = inspect_examples(rows, "prompt_completion", tok, max_length=64, n=1)
    tokens = report.examples[0].tokens
    assert all(BROKEN not in token.text for token in tokens)
    assert "".join(token.text for token in tokens) == tok.bos_token + "Say café: café 🙂" + tok.eos_token
    assert [token for ids in (t.ids for t in tokens) for token in ids] == tok(
        "Say café:", add_special_tokens=True)["input_ids"][:1] + tok(
        "Say café:", add_special_tokens=False)["input_ids"] + tok(" café 🙂", add_special_tokens=False)[
        "input_ids"] + [tok.eos_token_id]
    emoji = next(token for token in tokens if "🙂" in token.text)
    assert len(emoji.ids) > 1 and emoji.trained and not emoji.mixed
    accents = [token for token in tokens if "é" in token.text]
    assert [token.trained for token in accents] == [False, True]  # prompt masked, completion trained
    # Counts stay in tokens, not in displayed groups.
    assert report.examples[0].trained_tokens == len(tok(" café 🙂", add_special_tokens=False)["input_ids"]) + 1
    assert json.loads(json.dumps(report.to_dict()))["examples"][0]["tokens"][-1]["ids"] == [tok.eos_token_id]


def test_a_group_marked_both_ways_takes_the_majority_and_is_flagged(tok: Any) -> None:
    ids = tok("🙂", add_special_tokens=False)["input_ids"]
    one_trained = [IGNORE_INDEX] * (len(ids) - 1) + ids[-1:]
    [view] = _token_views(tok, ids, one_trained)
    assert view.text == "🙂" and view.mixed and not view.trained
    accent = tok("é", add_special_tokens=False)["input_ids"]
    [tie] = _token_views(tok, accent, [IGNORE_INDEX, accent[1]])
    assert tie.text == "é" and tie.mixed and tie.trained  # a tie counts as trained: the loss sees it


def test_a_character_cut_by_truncation_stays_a_broken_single_token(tok: Any) -> None:
    ids = tok("🙂", add_special_tokens=False)["input_ids"][:1]
    [view] = _token_views(tok, ids, None)
    assert view.ids == tuple(ids) and BROKEN in view.text


CLASS_ROWS = [
    {"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}, {"text": "fine", "label": "pos"},
    {"text": "meh", "label": "neutral"}, {"text": "great", "label": "pos"}, {"text": "awful", "label": "neg"},
]


def test_per_class_picks_the_first_rows_of_each_label(tok: Any) -> None:
    report = inspect_examples(CLASS_ROWS, "classification", tok, max_length=16, n=1, per_class=2)
    assert [(e.index, e.label) for e in report.examples] == [(1, "neg"), (5, "neg"), (3, "neutral"),
                                                              (0, "pos"), (2, "pos")]
    assert report.short_classes == {"neutral": 1}
    assert report.to_dict()["per_class"] == 2
    # Statistics still cover every row.
    assert report.label_distribution == {"neg": 2, "neutral": 1, "pos": 3}


def test_per_class_refuses_bad_values(tok: Any) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        inspect_examples(CLASS_ROWS, "classification", tok, max_length=16, per_class=0)
    with pytest.raises(ValueError, match="by label"):
        inspect_examples([{"text": "a"}], "text", tok, max_length=16, per_class=1)


def _app() -> typer.Typer:
    from tunedeck.cli.data_inspect_command import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)  # a group with two commands keeps "inspect" as a name
    return app


def test_cli_per_class_and_whole_characters(tiny_llama_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    classes = tmp_path / "classes.jsonl"
    classes.write_text("".join(json.dumps(r) + "\n" for r in CLASS_ROWS), encoding="utf-8")
    result = runner.invoke(_app(), ["inspect", str(classes), "--model", str(tiny_llama_dir), "--max-length", "16",
                                    "--per-class", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [e["label"] for e in report["examples"]] == ["neg", "neutral", "pos"]
    shown = runner.invoke(_app(), ["inspect", str(classes), "--model", str(tiny_llama_dir), "--max-length", "16",
                                   "--per-class", "2"])
    assert shown.exit_code == 0, shown.output
    assert "up to 2 example(s) of each label; 'neutral' has only 1" in shown.output

    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps({"prompt": "Say café:", "completion": " café 🙂"}) + "\n", encoding="utf-8")
    shown = runner.invoke(_app(), ["inspect", str(text), "--model", str(tiny_llama_dir), "--max-length", "64"])
    assert shown.exit_code == 0, shown.output
    assert "café 🙂" in shown.output and BROKEN not in shown.output
    refused = runner.invoke(_app(), ["inspect", str(text), "--model", str(tiny_llama_dir), "--max-length", "64",
                                     "--per-class", "1"])
    assert refused.exit_code == 1 and "--per-class picks rows by label" in refused.output
    assert "Traceback" not in refused.output
    zero = runner.invoke(_app(), ["inspect", str(classes), "--model", str(tiny_llama_dir), "--max-length", "16",
                                  "--per-class", "0"])
    assert zero.exit_code == 2 and "Traceback" not in zero.output
