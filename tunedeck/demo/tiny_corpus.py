"""The built-in corpus tiny models are pretrained on: small, generated, deterministic.

Sentences come from fixed word lists so the corpus is the same on every machine and
needs no download; chat-shaped lines teach the tokenizer and the model the role markers
the chat template uses.
"""

from __future__ import annotations

import random

_SUBJECTS = (
    "the cat",
    "a small dog",
    "the teacher",
    "my neighbour",
    "the robot",
    "a young fox",
    "the baker",
    "our team",
    "the pilot",
    "a curious child",
    "the old farmer",
    "the engineer",
    "a quiet student",
)
_VERBS = (
    "reads",
    "finds",
    "builds",
    "paints",
    "watches",
    "carries",
    "cleans",
    "opens",
    "fixes",
    "counts",
    "follows",
    "draws",
    "sells",
    "writes",
)
_OBJECTS = (
    "a red book",
    "the blue door",
    "three apples",
    "a long letter",
    "the green boat",
    "a warm coat",
    "the broken clock",
    "a map of the city",
    "two bright lamps",
    "the garden gate",
    "a paper kite",
)
_PLACES = (
    "in the morning",
    "near the river",
    "after lunch",
    "at the market",
    "before dinner",
    "in the park",
    "on the hill",
    "at school",
    "during the storm",
    "by the window",
)
_QUESTIONS = (
    ("What colour is the sky?", "The sky is blue."),
    ("How many legs does a cat have?", "A cat has four legs."),
    ("What do bees make?", "Bees make honey."),
    ("Where does the sun rise?", "The sun rises in the east."),
    ("What is two plus two?", "Two plus two is four."),
    ("Name a fruit.", "An apple is a fruit."),
    ("What do we use to write?", "We use a pen to write."),
    ("What season is the coldest?", "Winter is the coldest season."),
)


def builtin_corpus(sentences: int = 400, seed: int = 0) -> list[str]:
    """Generated plain sentences followed by question/answer exchanges in the chat markup."""
    rng = random.Random(seed)
    texts = []
    for _ in range(sentences):
        subject, verb, obj, place = (
            rng.choice(_SUBJECTS),
            rng.choice(_VERBS),
            rng.choice(_OBJECTS),
            rng.choice(_PLACES),
        )
        texts.append(f"{subject.capitalize()} {verb} {obj} {place}.")
    for question, answer in _QUESTIONS:
        texts.append(f"<|user|>\n{question}<|end|>\n<|assistant|>\n{answer}<|end|>\n")
    return texts
