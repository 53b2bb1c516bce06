"""A small synthetic preference set whose chosen answers follow one learnable rule.

Each prompt asks for an animal or for a colour; the chosen answer names one of the kind
asked for and the rejected answer one of the other kind. An untrained model prefers one
kind of word whatever the prompt, so it ranks about half the pairs right; a model that
learnt the rule ranks them all right. Used by the demo, the README's worked example and the
tests (nothing is downloaded).
"""

from __future__ import annotations

import random
from typing import Any

ANIMALS = ("cat", "dog", "horse", "mouse", "sheep", "goat", "fox", "bird")
COLOURS = ("red", "blue", "green", "yellow", "purple", "orange", "white", "black")


def preference_pairs(count: int, *, seed: int = 0, conversational: bool = False) -> list[dict[str, Any]]:
    """`count` rows `{"prompt", "chosen", "rejected"}` (strings, or lists of messages when `conversational`)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for index in range(count):
        asks_animal = index % 2 == 0
        animal, colour = rng.choice(ANIMALS), rng.choice(COLOURS)
        prompt = f"Name {'an animal' if asks_animal else 'a colour'}, please ({index})."
        good, bad = (animal, colour) if asks_animal else (colour, animal)
        chosen, rejected = f"{good.capitalize()}.", f"{bad.capitalize()}."
        if conversational:
            rows.append(
                {
                    "prompt": [{"role": "user", "content": prompt}],
                    "chosen": [{"role": "assistant", "content": chosen}],
                    "rejected": [{"role": "assistant", "content": rejected}],
                }
            )
        else:
            rows.append({"prompt": prompt, "chosen": " " + chosen, "rejected": " " + rejected})
    return rows


def unpaired_rows(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same data as kto rows: each pair's chosen answer desirable, its rejected one not."""
    rows = []
    for pair in pairs:
        rows.append({"prompt": pair["prompt"], "completion": pair["chosen"], "label": True})
        rows.append({"prompt": pair["prompt"], "completion": pair["rejected"], "label": False})
    return rows
