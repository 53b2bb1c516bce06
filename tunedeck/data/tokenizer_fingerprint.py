"""A stable hash of everything about a tokenizer that changes the token ids it produces.

Two tokenizers with the same fingerprint turn the same rows into the same ids and masks, so
tokenized data cached under one can be reused by the other. The fingerprint covers the
serialized tokenizer (vocabulary, merges, normalizer, pre-tokenizer, post-processor, added
tokens), the special tokens, and the chat template; not the path it was loaded from.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 (hex) of the tokenizer's serialized form, special tokens and chat template."""
    digest = hashlib.sha256()
    digest.update(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest.update(backend.to_str().encode("utf-8"))
    else:
        # A slow tokenizer has no single serialized form: its vocabulary is the best stand-in.
        vocab = tokenizer.get_vocab()
        digest.update(json.dumps(sorted(vocab.items()), ensure_ascii=False).encode("utf-8"))
    extras = {
        "special_tokens": _plain(getattr(tokenizer, "special_tokens_map", {})),
        "added": sorted(str(token) for token in tokenizer.get_added_vocab()),
        "chat_template": _plain(getattr(tokenizer, "chat_template", None)),
        "bos": getattr(tokenizer, "bos_token_id", None),
        "eos": getattr(tokenizer, "eos_token_id", None),
    }
    digest.update(json.dumps(extras, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    """JSON-friendly copy (special tokens may be AddedToken objects)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)
