"""Generation from a mid-run committed checkpoint and from the final model, with the training chat template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunedeck.cli.main import app
from tunedeck.core.errors import ConfigError
from tunedeck.engine.export.source import locate_model_folder
from tunedeck.engine.generation.generation import Generator, SamplingOptions, generate

from .conftest import ANSWER, MID_RUN_STEP, QUESTION


@pytest.fixture(scope="module")
def final_generator(lora_run: Path) -> Generator:
    return Generator.load(locate_model_folder(lora_run), compare_base=True)


def test_final_model_answers_like_training_taught_it_and_greedy_repeats(final_generator: Generator) -> None:
    first = final_generator.run(QUESTION, compare_base=True)
    assert first.source == "final"
    assert first.fine_tuned.text == ANSWER and first.fine_tuned.stopped  # stopped at the template's end of turn
    assert first.base is not None and first.base.text != ANSWER  # the adapter switched off: the untrained model
    again = final_generator.run(QUESTION, compare_base=True)
    assert again.to_dict() == first.to_dict()
    as_chat = final_generator.run(messages=[{"role": "user", "content": QUESTION}])
    assert as_chat.fine_tuned == first.fine_tuned  # a plain prompt is the user turn of a chat-trained model


def test_sampling_is_seeded(final_generator: Generator) -> None:
    options = SamplingOptions(max_new_tokens=12, temperature=1.5, top_p=0.95, do_sample=True, seed=7)
    first = final_generator.run("Tell me something", options=options)
    assert final_generator.run("Tell me something", options=options).fine_tuned == first.fine_tuned
    with pytest.raises(ConfigError, match="top_p"):
        final_generator.run("x", options=SamplingOptions(top_p=0))


def test_mid_run_checkpoint_generates_deterministically(lora_run: Path) -> None:
    first = generate(lora_run, QUESTION, checkpoint=MID_RUN_STEP, max_new_tokens=16)
    second = generate(lora_run, QUESTION, checkpoint=MID_RUN_STEP, max_new_tokens=16)
    assert first.source == f"step-{MID_RUN_STEP}" and first.base is None
    assert first.fine_tuned == second.fine_tuned
    assert first.fine_tuned.new_tokens >= 1
    with pytest.raises(ConfigError, match="no checkpoint at this step"):
        generate(lora_run, QUESTION, checkpoint=3)


def test_cli_generate_prints_json(lora_run: Path) -> None:
    result = CliRunner().invoke(
        app, ["generate", "--run-dir", str(lora_run), "--prompt", QUESTION, "--compare-base", "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["fine_tuned"]["text"] == ANSWER and answer["base"] is not None
