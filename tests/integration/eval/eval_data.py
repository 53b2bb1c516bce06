"""Generated evaluation datasets for the eval tests: three topics with their own vocabulary."""

from __future__ import annotations

import random
from typing import Any

TOPICS = {
    "food": ("soup", "bread", "garlic", "chef", "recipe", "oven", "dessert", "kitchen"),
    "sport": ("goal", "match", "striker", "referee", "stadium", "team", "coach", "tournament"),
    "weather": ("rain", "wind", "snow", "storm", "cloud", "forecast", "sunshine", "thunder"),
}
WHEN = ("today", "again", "this week", "yesterday")


def topic_rows(per_class: int, seed: int) -> list[dict[str, Any]]:
    """`per_class` sentences for each topic, two topic words each, drawn with `seed`."""
    draw = random.Random(seed)
    rows = []
    for _ in range(per_class):
        for label, words in TOPICS.items():
            first, second = draw.sample(words, 2)
            rows.append({"text": f"The {first} and the {second} were in the news {draw.choice(WHEN)}.", "label": label})
    return rows


def chat_rows(count: int) -> list[dict[str, Any]]:
    """Short question/answer conversations of different lengths (so batches need padding)."""
    questions = (
        "What is two plus two?",
        "Name a colour of the sky, please, in one word.",
        "Bees?",
        "Where does it rise?",
    )
    answers = ("Four.", "Blue.", "Honey.", "In the east.")
    return [
        {
            "messages": [
                {"role": "user", "content": f"{questions[i % 4]} ({i})" + " more words" * (i % 3)},
                {"role": "assistant", "content": answers[i % 4]},
            ]
        }
        for i in range(count)
    ]
