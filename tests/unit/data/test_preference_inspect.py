"""`data inspect` of preference rows: prompt, chosen and rejected (or completion and label) with their cuts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tunedeck.data.inspect import inspect_examples
from tunedeck.data.preference_tokens import preference_token_spans
from tunedeck.demo.tiny_corpus import builtin_corpus
from tunedeck.demo.tiny_models import build_tokenizer

PAIR = {"prompt": [{"role": "user", "content": "What color is the sky?"}],
        "chosen": [{"role": "assistant", "content": "It is blue."}],
        "rejected": [{"role": "assistant", "content": "It is green, like the grass in spring."}]}  # fmt: skip
KTO = {"prompt": "The sky is", "completion": " green.", "label": False}


@pytest.fixture(scope="module")
def tok() -> Any:
    return build_tokenizer(builtin_corpus(), "llama")


def test_examples_show_each_part_as_training_cuts_it(tok: Any) -> None:
    full = preference_token_spans(PAIR, tok, kind="preference", max_length=4096, max_prompt_length=None)
    max_length = len(full["prompt"]["ids"]) + len(full["chosen"]["ids"])  # rejected is longer: cut
    report = inspect_examples([PAIR, PAIR], "preference", tok, max_length=max_length, n=1)
    (example,) = report.examples
    assert [span.name for span in example.spans] == ["prompt", "chosen", "rejected"]
    prompt, chosen, rejected = example.spans
    assert [t.id for t in prompt.tokens] == full["prompt"]["ids"] and not any(t.trained for t in prompt.tokens)
    assert [t.id for t in chosen.tokens] == full["chosen"]["ids"] and all(t.trained for t in chosen.tokens)
    assert rejected.cut == len(full["rejected"]["ids"]) - len(full["chosen"]["ids"]) > 0
    assert [t.id for t in rejected.tokens] == full["rejected"]["ids"][: rejected.kept]
    assert example.truncated and example.trained_tokens == 2 * len(full["chosen"]["ids"])
    assert report.truncation.truncated == 2 and report.truncation.lost_part_of_answer == 2
    assert report.preference is not None and report.preference["truncated_answers"] == 2
    as_dict = report.to_dict()
    assert as_dict["examples"][0]["spans"][2]["cut"] == rejected.cut and as_dict["preference"]["total"] == 2


def test_unpaired_rows_show_their_label_and_prompt_cut(tok: Any) -> None:
    report = inspect_examples([KTO], "unpaired_preference", tok, max_length=64, n=1, max_prompt_length=2)
    (example,) = report.examples
    assert example.label == "undesirable" and [s.name for s in example.spans] == ["prompt", "completion"]
    assert example.spans[0].kept == 2 and example.spans[0].cut > 0
    assert example.spans[0].tokens[0].id == tok.bos_token_id
    assert example.spans[1].tokens[-1].id == tok.eos_token_id


def test_a_row_training_would_refuse_is_listed(tok: Any) -> None:
    report = inspect_examples([PAIR], "preference", tok, max_length=4, n=1)
    assert report.truncation.refused_rows == [0] and report.truncation.lost_all_answer == 1


def _app() -> typer.Typer:
    from tunedeck.cli.data_inspect_command import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)  # a group with two commands keeps "inspect" as a name
    return app


def test_cli_shows_prompt_chosen_rejected(tiny_llama_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "400"})  # the line naming the file is not wrapped, however long its path
    path = write_jsonl(tmp_path / "pairs.jsonl", [PAIR])
    shown = runner.invoke(_app(), ["inspect", str(path), "--model", str(tiny_llama_dir), "--max-length", "64"])
    assert shown.exit_code == 0, shown.output
    assert "rows of kind preference" in shown.output
    for part in ("prompt (", "chosen (", "rejected (", "It is blue.", "What color is the sky?"):
        assert part in shown.output
    cut = runner.invoke(_app(), ["inspect", str(path), "--model", str(tiny_llama_dir), "--max-length", "64",
                                 "--max-prompt-length", "3", "--json"])
    assert cut.exit_code == 0, cut.output
    spans = json.loads(cut.output)["examples"][0]["spans"]
    assert spans[0]["name"] == "prompt" and spans[0]["kept"] == 3 and spans[0]["cut"] > 0
