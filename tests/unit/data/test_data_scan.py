"""Secrets and personal data are found, masked in reports, blocked or redacted into a new version."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.data import write_jsonl
from tunedeck.core.errors import DataError
from tunedeck.data.loading import load_dataset
from tunedeck.data.personal_data import iban_valid, luhn_valid
from tunedeck.data.registry import DatasetRegistry
from tunedeck.data.scan import scan_text
from tunedeck.data.scan_policy import apply_scan_policy, scan_artifact, scan_dataset

# Planted values: documentation-style examples, never real credentials.
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "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"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)
EMAIL = "jane.doe@example.com"
IBAN = "DE89 3704 0044 0532 0130 00"
CARD = "4111 1111 1111 1111"
NOT_A_CARD = "1234567812345678"  # 16 digits failing Luhn

PLANTED = {
    "aws_access_key": AWS_KEY,
    "github_token": GITHUB_TOKEN,
    "private_key": PRIVATE_KEY,
    "email": EMAIL,
    "iban": IBAN,
    "card_number": CARD,
}


@pytest.fixture
def planted_file(tmp_path: Path) -> Path:
    rows = [
        {"prompt": "How do I configure the client?", "completion": f"Set the key {AWS_KEY} in the env."},
        {"prompt": "Order number?", "completion": f"Your order id is {NOT_A_CARD}."},
        {"prompt": "Push access", "completion": f"use token {GITHUB_TOKEN} to push"},
        {"prompt": "Here is my key:\n" + PRIVATE_KEY, "completion": "Never share that."},
        {"prompt": "Contact?", "completion": f"Write to {EMAIL} please."},
        {"prompt": "Pay where?", "completion": f"Transfer to IBAN {IBAN} today."},
        {"prompt": "Card on file?", "completion": f"The card is {CARD}, expiring soon."},
        {"prompt": "What is the capital of France?", "completion": "Paris."},
    ]
    return write_jsonl(tmp_path / "planted.jsonl", rows)


def test_checksums() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid(NOT_A_CARD)
    assert iban_valid(IBAN) and not iban_valid("DE89 3704 0044 0532 0130 01")


def test_scan_finds_every_planted_value_with_rows_and_masks(planted_file: Path) -> None:
    report = scan_dataset(load_dataset(planted_file))
    assert report.rows_by_type() == {
        "aws_access_key": [1],
        "github_token": [3],
        "private_key": [4],
        "email": [5],
        "iban": [6],
        "card_number": [7],
    }
    assert report.counts() == dict.fromkeys(PLANTED, 1)
    by_type = {f.type: f for f in report.findings}
    assert by_type["private_key"].field == "prompt" and by_type["aws_access_key"].field == "completion"
    assert by_type["aws_access_key"].category == "secret" and by_type["iban"].category == "personal"
    rendered = repr(report.to_dict())
    for value in PLANTED.values():
        assert value not in rendered and value.split("\n")[1 if "\n" in value else 0] not in rendered
    assert by_type["aws_access_key"].masked.startswith("AKIA") and "*" in by_type["aws_access_key"].masked


def test_unflagged_numbers_and_plain_text() -> None:
    assert scan_text(f"Order {NOT_A_CARD} shipped on 2024-01-15 at 12:30:45, version 3.11.") == []
    assert scan_text("The quick brown fox jumps over the lazy dog.") == []


def test_phones_and_ip_addresses() -> None:
    types = [
        f.type for f in scan_text("Call +33 6 12 34 56 78 or (555) 123-4567; host 192.168.1.20, 2001:db8::1")
    ]
    assert types == ["phone", "phone", "ip_address", "ip_address"]


def test_block_policy_raises_with_every_finding(planted_file: Path) -> None:
    loaded = load_dataset(planted_file)
    with pytest.raises(DataError) as caught:
        apply_scan_policy(loaded, scan_dataset(loaded), "block")
    assert [i.line for i in caught.value.issues] == [1, 3, 4, 5, 6, 7]
    assert AWS_KEY not in str(caught.value)


def test_redact_policy_registers_a_clean_new_version(planted_file: Path, tmp_path: Path) -> None:
    registry = DatasetRegistry(tmp_path / "registry")
    original = registry.register(planted_file, "support")
    loaded = original.load()
    outcome = apply_scan_policy(loaded, scan_dataset(loaded), "redact", registry=registry)
    assert outcome.redacted is not None
    redacted = outcome.redacted
    assert redacted.manifest.version == 2 and redacted.manifest.parent == original.manifest.sha256
    assert redacted.manifest.notes["redacted"]["aws_access_key"] == 1
    text = redacted.data_path.read_text(encoding="utf-8")
    for value in PLANTED.values():
        assert value.split("\n")[0] not in text
    assert "[REDACTED:aws_access_key]" in text and "[REDACTED:card_number]" in text
    assert NOT_A_CARD in text and "Paris." in text
    assert scan_dataset(redacted.load()).clean
    # The original version is untouched.
    assert AWS_KEY in original.data_path.read_text(encoding="utf-8")


def test_scan_artifact_reports_lines(tmp_path: Path) -> None:
    card = tmp_path / "model_card.md"
    card.write_text(f"# Model\n\nTrained by the team.\nContact: {EMAIL}\n", encoding="utf-8")
    report = scan_artifact(card)
    assert [(f.type, f.row) for f in report.findings] == [("email", 4)]


def test_high_entropy_strings_are_flagged_quoted_or_not() -> None:
    # Unnamed credentials: no vendor prefix, so only their entropy gives them away.
    unquoted = "Kq7vR2xWm9Zp4LtY8bNc3HsJ6dFg1QaE"
    hex_key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    text = f"token {unquoted} then the value \"{hex_key}\" and done"
    findings = scan_text(text, personal=False)
    assert [f.type for f in findings] == ["high_entropy_string", "high_entropy_string"]
    assert [text[f.start:f.end] for f in findings] == [unquoted, hex_key]
    assert all(f.category == "secret" and unquoted not in f.masked and hex_key not in f.masked for f in findings)


def test_low_entropy_long_tokens_are_not_secrets() -> None:
    # Long but repetitive, all letters, or all digits: identifiers and numbers, not keys.
    for token in ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", "internationalization_configuration_value",
                  "123456789012345678901234567890", "abcabcabcabcabcabcabc123abc"):
        assert scan_text(f"value {token} end", personal=False) == [], token


def test_high_entropy_string_in_a_dataset_row_is_reported_masked(tmp_path: Path) -> None:
    secret = "Zr8Lq2Vx7Nw4Kt9Pm3Bc6Hy1Jd5Fg0Sa"
    path = write_jsonl(tmp_path / "rows.jsonl", [{"text": "nothing here"}, {"text": f"use {secret} to log in"}])
    report = scan_dataset(load_dataset(path))
    assert report.rows_by_type() == {"high_entropy_string": [2]}
    assert secret not in repr(report.to_dict())
