"""User text inside Markdown reports: shown as the literal text it is, never as markup or HTML.

A job name, a hypothesis, a class label or a failure message comes from a user. Put
raw into Markdown it could carry HTML (`<img onerror=…>`) that a viewer renders, or
markup that breaks out of its table cell, heading or code block. Every report writes
such text through these functions.
"""

from __future__ import annotations

import re
from typing import Any

# Characters that are markup wherever they stand (a backslash before ASCII punctuation is always
# literal). `_` only emphasizes at a word's edge, so snake_case names stay readable.
MARKUP = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# Markup only where a line starts (user text can open a list item): a heading, a quote, a list
# marker or a setext underline; each as CommonMark defines it, so "0.5" or "-3" stay as they are.
LEADING_MARK = re.compile(r"^(?=#{1,6}(?:\s|$)|[+\-](?:\s|$)|>|=+$)")
LEADING_ORDINAL = re.compile(r"^(\d{1,9})(?=[.)](?:\s|$))")
BACKTICK_RUN = re.compile(r"`+")


def md_text(value: Any) -> str:
    """`value` as one line of literal Markdown text: no HTML tag or entity, markup characters backslash-escaped."""
    one_line = " ".join(str(value).split())  # a newline could start a heading, a list or a table row
    # `&` and `<` are all HTML needs to start an entity or a tag; escaping them is enough.
    escaped = MARKUP.sub(r"\\\1", one_line.replace("&", "&amp;").replace("<", "&lt;"))
    escaped = LEADING_MARK.sub("\\\\", escaped)
    return LEADING_ORDINAL.sub(lambda found: found.group(1) + "\\", escaped)  # "1." would start a list


def md_code(value: Any) -> str:
    """`value` as an inline code span, whatever backticks it holds (code spans are never read as HTML)."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(run) for run in BACKTICK_RUN.findall(text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def md_fence(text: str, language: str = "") -> list[str]:
    """`text` as a fenced code block, with a fence longer than any backtick run inside it."""
    fence = "`" * max(3, max((len(run) for run in BACKTICK_RUN.findall(text)), default=0) + 1)
    return [f"{fence}{language}", text, fence]
