"""Which format a row is, and the family that reads it: detection, refusal and dispatch.

Fifteen source formats map onto seven canonical kinds (`KIND_OF_FORMAT`); each family module
reads its own (`text`, `instruction`, `chat`, `classification`, `preference`). A row's format
is the first whose identifying fields it has, in the order of `SIGNATURES` (most specific
first). A file's kind is set by its first valid row (see `RowChecker`).

Keys a format does not know (an `id`, some metadata) do not reach the canonical
row, so they do not change its hash; validation counts and lists them by name
so none is dropped unnoticed (see `ignored_fields` and `KNOWN_FIELDS`).

Multimodal rows are recognised only to be refused with their reason (see `refusal`):
training here is text-only, so their media would be lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from tunedeck.core.dataset_vocabulary import KNOWN_FIELDS, SIGNATURES
from tunedeck.core.errors import Issue
from tunedeck.data.formats.chat import normalise_chat, normalise_sharegpt
from tunedeck.data.formats.classification import DEFAULT_LABEL_COLUMN, normalise_classification
from tunedeck.data.formats.field_readers import Normaliser, Row
from tunedeck.data.formats.instruction import normalise_alpaca, normalise_extraction, normalise_prompt_completion
from tunedeck.data.formats.preference import PREFERENCE_NORMALISERS
from tunedeck.data.formats.text import normalise_text

SourceFormat = Literal[
    "text", "prompt_completion", "chat", "alpaca", "sharegpt", "classification", "extraction",
    "preference", "openai_preference", "sharegpt_preference", "alpaca_preference",
    "unpaired_preference", "sharegpt_kto", "alpaca_kto", "chat_kto",
]


Kind = Literal[
    "text", "prompt_completion", "chat", "classification", "extraction", "preference", "unpaired_preference"
]


KIND_OF_FORMAT: Final[dict[str, str]] = {
    "text": "text",
    "prompt_completion": "prompt_completion",
    "alpaca": "chat",
    "chat": "chat",
    "sharegpt": "chat",
    "classification": "classification",
    "extraction": "extraction",
    "preference": "preference",
    "openai_preference": "preference",
    "sharegpt_preference": "preference",
    "alpaca_preference": "preference",
    "unpaired_preference": "unpaired_preference",
    "sharegpt_kto": "unpaired_preference",
    "alpaca_kto": "unpaired_preference",
    "chat_kto": "unpaired_preference",
}


MULTIMODAL_FIELDS: Final[tuple[str, ...]] = ("images", "videos", "audios")
"""Media fields of multimodal rows (the names LLaMA-Factory and TRL use)."""


_MEDIA_PLACEHOLDERS: Final[tuple[str, ...]] = ("<image>", "<video>", "<audio>")


_MEDIA_PART_TYPES: Final[frozenset[str]] = frozenset(
    {"image", "image_url", "input_image", "video", "audio", "input_audio"}
)
"""Content-part types of OpenAI-style messages whose content is a list of parts."""


def detect_format(record: Mapping[str, Any], label_column: str = DEFAULT_LABEL_COLUMN) -> str | None:
    """The source format whose identifying fields `record` has, or None.

    `label_column` is the field holding a classification label when it is not `label`.
    """
    keys = record.keys()
    if label_column != DEFAULT_LABEL_COLUMN and {"text", label_column} <= keys:
        return "classification"
    for name, signature in SIGNATURES:
        if name in ("unpaired_preference", "chat_kto") and signature <= keys and not _is_flag(record["label"]):
            continue  # a class name or score beside a prompt/completion pair or a chat: not a desirability mark
        if signature <= keys:
            return name
    return None


def _is_flag(value: object) -> bool:
    """A KTO label: a boolean, or its text in a CSV cell."""
    return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))


def _has_placeholder(value: object) -> bool:
    """Whether a media placeholder such as `<image>` appears anywhere in `value`'s strings."""
    if isinstance(value, str):
        return any(tag in value for tag in _MEDIA_PLACEHOLDERS)
    if isinstance(value, list):
        return any(_has_placeholder(item) for item in value)
    if isinstance(value, dict):
        return any(_has_placeholder(item) for item in value.values())
    return False


def _has_media_part(messages: object) -> bool:
    """Whether a message's content is a list of parts holding an image, audio or video part."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in _MEDIA_PART_TYPES for part in content
        ):
            return True
    return False


def refusal(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """The shape name and the reason when `record` is a kind of data training here must refuse.

    Checked before `detect_format`: a multimodal row also has `messages` or
    `conversations`, so without this it would pass as a text row missing its media.
    """
    media = [key for key in MULTIMODAL_FIELDS if record.get(key) not in (None, "", [], {})]
    if not media and (record.get("image") not in (None, "")) and _has_placeholder(dict(record)):
        media = ["image"]
    if not media and _has_media_part(record.get("messages")):
        media = ["messages[].content"]
    if media:
        return (
            f"multimodal ({', '.join(media)})",
            f"this is a multimodal dataset (field {media[0]}): training here is text-only, so the "
            "media would be dropped and the text would refer to content the model never sees",
        )
    return None


def ignored_fields(
    record: Mapping[str, Any], source_format: str, label_column: str = DEFAULT_LABEL_COLUMN
) -> list[str]:
    """The top-level fields of `record` that `source_format` does not read."""
    known = KNOWN_FIELDS[source_format]
    if source_format == "classification":
        known = frozenset({"text", label_column})
    return [key for key in record if key not in known]


NORMALISERS: Final[dict[str, Normaliser]] = {
    "text": normalise_text,
    "prompt_completion": normalise_prompt_completion,
    "alpaca": normalise_alpaca,
    "chat": normalise_chat,
    "sharegpt": normalise_sharegpt,
    "classification": normalise_classification,
    "extraction": normalise_extraction,
    **PREFERENCE_NORMALISERS,
}
"""Each source format's check and conversion, by format name (classification with the default label column)."""


def normalise(
    record: Mapping[str, Any],
    source_format: str,
    *,
    tabular: bool = False,
    label_column: str = DEFAULT_LABEL_COLUMN,
) -> tuple[Row | None, list[Issue]]:
    """Check `record` as `source_format` and return its canonical row, or None and every issue found.

    `tabular` says the record came from a CSV file, where structured fields
    (messages, conversations, extraction output) are stored as JSON text.
    `label_column` names the classification label's field when it is not `label`.
    Issues carry the field and expectation; the caller adds file and line.
    """
    if source_format == "classification":
        return normalise_classification(record, tabular, label_column)
    return NORMALISERS[source_format](record, tabular)
