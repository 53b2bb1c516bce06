"""Small datasets and configs for the engine tests, written into each test's folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.data import write_jsonl
from tunedeck.config.loading import validate_config
from tunedeck.config.training import TrainingConfig
from tunedeck.core.events import read_events

QUESTIONS = (
    ("What is two plus two?", "Four."),
    ("Name a colour of the sky.", "Blue."),
    ("What do bees make?", "Honey."),
    ("Where does the sun rise?", "In the east."),
)
OTHER_ANSWERS = ("Seven hundred.", "Purple and green.", "Small paper boats.", "Under the old bridge.")

# Three classes with their own vocabulary, so a real encoder separates them quickly.
TOPICS = {
    "sport": ("The striker scored a goal", "The team won the match", "The runner finished the race"),
    "food": ("The soup tasted of garlic", "She baked fresh bread", "The chef grilled the fish"),
    "weather": ("Heavy rain fell all night", "The wind blew from the north", "Snow covered the hills"),
}
ENDINGS = ("today.", "yesterday.", "this morning.", "last week.", "again.", "at last.", "once more.")


def chat_rows(count: int, answers: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """`count` chat examples cycling through four questions; `answers` replaces the usual answers."""
    rows = []
    for index in range(count):
        question, answer = QUESTIONS[index % len(QUESTIONS)]
        if answers is not None:
            answer = answers[index % len(answers)]
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": f"{question} ({index})"},
                    {"role": "assistant", "content": answer},
                ]
            }
        )
    return rows


def write_chat(folder: Path, count: int = 32, name: str = "chat.jsonl", **kwargs: Any) -> Path:
    """A chat JSONL file in `folder`."""
    return write_jsonl(folder / name, chat_rows(count, **kwargs))


def classification_rows(per_class: int, offset: int = 0) -> list[dict[str, Any]]:
    """`per_class` labelled sentences for each topic, varied by their ending."""
    rows = []
    for index in range(per_class):
        for label, starts in TOPICS.items():
            start = starts[(index + offset) % len(starts)]
            ending = ENDINGS[(index * 3 + offset) % len(ENDINGS)]
            rows.append({"text": f"{start} {ending}", "label": label})
    return rows


def fast_config(**overrides: Any) -> TrainingConfig:
    """A CPU-friendly config: fp32, no checkpointing or evaluation unless asked, log every step."""
    values: dict[str, Any] = {
        "epochs": 1,
        "batch_size": 8,
        "gradient_accumulation_steps": 1,
        "learning_rate": 3e-3,
        "warmup_ratio": 0.0,
        "mixed_precision": "fp32",
        "gradient_checkpointing": False,
        "save_strategy": "no",
        "eval_strategy": "no",
        "logging_steps": 1,
        "lora_r": 8,
        "lora_alpha": 16,
        "lora_dropout": 0.0,
        "max_length": 128,
    }
    values.update(overrides)
    return validate_config(values)


def metric_events(run_dir: Path) -> list[dict[str, Any]]:
    """The metric events of a run, in order."""
    return [event for event in read_events(run_dir / "events.jsonl") if event["type"] == "metric"]


def read_json(path: Path) -> Any:
    """Parse a JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))
