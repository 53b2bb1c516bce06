"""Personal data found by pattern and confirmed by checksum: emails, phones, IBANs, card numbers, IPs.

Patterns alone flag too much (any 16 digits, any two letters and digits), so
IBANs must pass the ISO 13616 mod-97 check, card numbers the Luhn check, and IP
addresses must parse. Each finder yields `(type, start, end)` spans.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator

Span = tuple[str, int, int]

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])")
PHONE_INTERNATIONAL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,6}(?!\w)")
PHONE_NATIONAL = re.compile(
    r"(?<!\w)(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\w)|(?<!\w)0\d(?:[ .-]?\d{2}){4}(?!\w)"
)
IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")


def luhn_valid(digits: str) -> bool:
    """True when the digit string passes the Luhn checksum used by payment cards."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    """True when `candidate` (spaces allowed) is 15-34 characters and passes the IBAN mod-97 check."""
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def find_emails(text: str) -> Iterator[Span]:
    """Email addresses."""
    for match in EMAIL.finditer(text):
        yield "email", match.start(), match.end()


def find_ibans(text: str) -> Iterator[Span]:
    """IBANs with a valid checksum; a match that swallowed following capitals is shortened group by group."""
    for match in IBAN.finditer(text):
        candidate = match.group()
        while len(candidate.replace(" ", "")) >= 15:
            if iban_valid(candidate):
                yield "iban", match.start(), match.start() + len(candidate)
                break
            cut = candidate.rfind(" ")
            candidate = candidate[:cut] if cut > 0 else candidate[:-1]


def find_cards(text: str) -> Iterator[Span]:
    """Payment card numbers: 13-19 digits, optionally grouped, passing Luhn."""
    for match in CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits) and len(set(digits)) > 1:
            yield "card_number", match.start(), match.end()


def find_phones(text: str) -> Iterator[Span]:
    """Phone numbers: international (+CC ...) or common national layouts, 9 to 15 digits."""
    for pattern in (PHONE_INTERNATIONAL, PHONE_NATIONAL):
        for match in pattern.finditer(text):
            if 9 <= sum(char.isdigit() for char in match.group()) <= 15:
                yield "phone", match.start(), match.end()


def find_ip_addresses(text: str) -> Iterator[Span]:
    """IPv4 and IPv6 addresses that parse as such."""
    for pattern in (IPV4, IPV6):
        for match in pattern.finditer(text):
            try:
                ipaddress.ip_address(match.group())
            except ValueError:
                continue
            yield "ip_address", match.start(), match.end()


# Order matters: an IBAN contains digit runs a card pattern would also match, and
# the first finder to claim a span keeps it.
PERSONAL_DATA_FINDERS: tuple[Callable[[str], Iterator[Span]], ...] = (
    find_ibans,
    find_cards,
    find_emails,
    find_phones,
    find_ip_addresses,
)


def find_personal_data(text: str) -> Iterator[Span]:
    """Every personal-data span in `text`, possibly overlapping; the caller resolves overlaps."""
    for finder in PERSONAL_DATA_FINDERS:
        yield from finder(text)
