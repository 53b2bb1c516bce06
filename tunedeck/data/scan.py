"""Find secrets and personal data in text, masked so that a report never repeats them.

Secrets come from detect-secrets' plugins (cloud keys, API tokens, private
keys, keyword assignments, quoted high-entropy strings) plus our own check for
unquoted high-entropy tokens, which detect-secrets only looks for inside quotes.
Personal data comes from `personal_data`. `scan_text` works on any text, so
exported artifacts (model card, configs, logs) are scanned the same way as rows.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from tunedeck.data.personal_data import find_personal_data

Category = Literal["secret", "personal"]
PERSONAL_TYPES = frozenset({"email", "phone", "iban", "card_number", "ip_address"})
EXCERPT_CONTEXT = 20
# detect-secrets names, mapped to our ids; "Public IP" is left to our own IP check.
_SECRET_TYPE_IDS = {
    "Base64 High Entropy String": "high_entropy_string",
    "Hex High Entropy String": "high_entropy_string",
}
_SKIPPED_SECRET_TYPES = frozenset({"Public IP (ipv4)"})
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/]")
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_CANDIDATE_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{24,}")
# Same limits as detect-secrets' own high-entropy plugins (bits per character).
_BASE64_ENTROPY_LIMIT = 4.5
_HEX_ENTROPY_LIMIT = 3.0
_HEX = re.compile(r"^[0-9a-fA-F]+$")


@dataclass(frozen=True)
class Finding:
    """One secret or piece of personal data: its type, where it is, and a masked excerpt.

    `start`/`end` index the scanned text; `row` and `field` are set when the text
    came from a dataset row (`row` is the source line) or an artifact's line.
    """

    type: str
    category: Category
    start: int
    end: int
    masked: str
    excerpt: str
    row: int | None = None
    field: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: never holds the found value itself."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


def mask(value: str) -> str:
    """The value with all but a short prefix hidden: enough to recognise it, not to use it."""
    keep = 4 if len(value) >= 16 else 2 if len(value) >= 8 else 0
    return value[:keep] + "*" * min(len(value) - keep, 12)


def shannon_entropy(text: str) -> float:
    """Bits of entropy per character of `text`."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


@contextmanager
def secret_plugins() -> Iterator[None]:
    """detect-secrets with all its plugins enabled, for the duration of a scan.

    detect-secrets keeps its settings in process-wide state: enter this once per
    scan, not per line, and do not scan from several threads at once.
    """
    from detect_secrets.settings import default_settings

    with default_settings():
        yield


def _detect_secret_spans(text: str) -> Iterator[tuple[str, int, int]]:
    # The public `scan_line` forces the plugins' "eager" mode, which reports every
    # word as a high-entropy string; the line loop below is the one scan_file uses,
    # with its false-positive filters.
    from detect_secrets.core.scan import _process_line_based_plugins

    offsets, lines, position = [], [], 0
    for number, line in enumerate(text.split("\n"), start=1):
        offsets.append(position)
        lines.append((number, line))
        position += len(line) + 1
    for secret in _process_line_based_plugins(lines, "scanned-text"):
        if secret.type in _SKIPPED_SECRET_TYPES or not secret.secret_value or secret.line_number is None:
            continue
        type_id = _SECRET_TYPE_IDS.get(secret.type) or re.sub(r"[^a-z0-9]+", "_", secret.type.lower()).strip(
            "_"
        )
        line_start = offsets[secret.line_number - 1]
        line = lines[secret.line_number - 1][1]
        found = line.find(secret.secret_value)
        while found >= 0:
            yield type_id, line_start + found, line_start + found + len(secret.secret_value)
            found = line.find(secret.secret_value, found + 1)


def _expand(text: str, type_id: str, start: int, end: int) -> tuple[int, int]:
    """Widen a span to the whole secret: the full key block, or the whole token around a matched prefix."""
    if type_id == "private_key":
        for block in _PRIVATE_KEY_BLOCK.finditer(text):
            if block.start() <= start < block.end():
                return block.start(), block.end()
        line_end = text.find("\n", end)
        return text.rfind("\n", 0, start) + 1, len(text) if line_end < 0 else line_end
    while start > 0 and _TOKEN_CHARS.match(text[start - 1]):
        start -= 1
    while end < len(text) and _TOKEN_CHARS.match(text[end]):
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1  # base64 padding belongs to the token
    return start, end


def _high_entropy_tokens(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _CANDIDATE_TOKEN.finditer(text):
        token = match.group()
        if not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
            continue  # long words and long numbers are not keys
        limit = _HEX_ENTROPY_LIMIT if _HEX.match(token) else _BASE64_ENTROPY_LIMIT
        if shannon_entropy(token) > limit:
            yield "high_entropy_string", match.start(), match.end()


def find_spans(text: str, *, secrets: bool = True, personal: bool = True) -> list[tuple[str, int, int]]:
    """Non-overlapping `(type, start, end)` spans, in text order; secrets win over personal data.

    Must run inside `secret_plugins()` when `secrets` is true.
    """
    candidates: list[tuple[str, int, int]] = []
    if secrets:
        candidates += [(t, *_expand(text, t, s, e)) for t, s, e in _detect_secret_spans(text)]
        candidates += list(_high_entropy_tokens(text))
    secret_count = len(candidates)
    if personal:
        candidates += list(find_personal_data(text))
    kept: list[tuple[str, int, int]] = []
    # Named secrets first, then longer spans: a key is reported as an AWS key, not as high entropy.
    ranked = sorted(
        enumerate(candidates),
        key=lambda item: (
            item[0] >= secret_count,
            item[1][0] == "high_entropy_string",
            -(item[1][2] - item[1][1]),
            item[1][1],
        ),
    )
    for _, (type_id, start, end) in ranked:
        if all(end <= s or start >= e for _, s, e in kept):
            kept.append((type_id, start, end))
    return sorted(kept, key=lambda span: span[1])


def findings_in(
    text: str, spans: list[tuple[str, int, int]], *, row: int | None = None, field: str | None = None
) -> list[Finding]:
    """Findings for `spans` of `text`, each excerpt with every span in it masked."""
    masked_text = []
    shifted: list[tuple[int, int]] = []
    cursor = 0
    for _, start, end in spans:
        masked_text.append(text[cursor:start])
        new_start = sum(len(part) for part in masked_text)
        masked_text.append(mask(text[start:end]))
        shifted.append((new_start, new_start + len(masked_text[-1])))
        cursor = end
    masked_text.append(text[cursor:])
    flat = "".join(masked_text)
    findings = []
    for (type_id, start, end), (new_start, new_end) in zip(spans, shifted, strict=True):
        excerpt = flat[max(0, new_start - EXCERPT_CONTEXT) : new_end + EXCERPT_CONTEXT].replace("\n", " ")
        category: Category = "personal" if type_id in PERSONAL_TYPES else "secret"
        findings.append(Finding(type_id, category, start, end, mask(text[start:end]), excerpt, row, field))
    return findings


def scan_text(text: str, *, secrets: bool = True, personal: bool = True) -> list[Finding]:
    """Every secret and piece of personal data in `text`, masked; usable on any exported artifact."""
    with secret_plugins():
        return findings_in(text, find_spans(text, secrets=secrets, personal=personal))


def redact_text(text: str, spans: list[tuple[str, int, int]]) -> str:
    """`text` with each span replaced by `[REDACTED:<type>]`."""
    out, cursor = [], 0
    for type_id, start, end in spans:
        out += [text[cursor:start], f"[REDACTED:{type_id}]"]
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
