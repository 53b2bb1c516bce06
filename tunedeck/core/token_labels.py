"""The label value a language-model loss skips (prompt tokens, padding, packing boundaries).

It is PyTorch cross-entropy's default `ignore_index`, which transformers' models use too:
tokenization writes it, collation pads with it, the losses and evaluation skip it.
"""

from __future__ import annotations

IGNORE_INDEX = -100
