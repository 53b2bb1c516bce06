"""The data scanner applied to exported text (tunedeck/engine/export/secrets_check.py): personal data too.

Model cards, configs and results leave the machine with the model, so an email or a card
number in them refuses the export; what tunedeck writes itself (hashes, metrics, versions)
does not.
"""

from __future__ import annotations

import json

import pytest

from tunedeck.core.errors import DataError
from tunedeck.data.personal_data import luhn_valid
from tunedeck.engine.export.secrets_check import recorded_versions, refuse_secrets

CARD = "4111 1111 1111 1111"


@pytest.mark.parametrize(("text", "kind"), [
    ("Trained on tickets sent to jane.doe@example.com.", "email"),
    ("Questions: call +33 6 12 34 56 78.", "phone"),
    (f"Refunds went to card {CARD}.", "card_number"),
    ("Served from 192.168.1.20 during training.", "ip_address"),
])
def test_personal_data_in_a_card_refuses_the_export(text: str, kind: str) -> None:
    with pytest.raises(DataError, match="personal data") as refused:
        refuse_secrets({"README.md": f"# model\n\n{text}\n"}, set())
    (issue,) = refused.value.issues
    assert issue.file == "README.md" and issue.line == 3 and f"({kind})" in issue.message
    assert "personal data" in (issue.expected or "")
    for secret in ("jane.doe@example.com", CARD, "192.168.1.20"):
        assert secret not in str(refused.value)


def test_metrics_with_many_digits_are_not_card_numbers() -> None:
    # Each of these digit runs passes the Luhn check, but it is the fraction of a float.
    fraction = "3456789012345675"
    assert luhn_valid(fraction)
    text = f'{{"eval_loss": 2.{fraction}, "learning_rate": 1.5e-05, "epoch": 3.0, "step": {fraction}.0}}'
    assert json.loads(text)["epoch"] == 3.0
    refuse_secrets({"results.json": text, "README.md": f"| eval_loss | 2.{fraction} |\n"}, set())
    refuse_secrets({"README.md": f"loss {fraction}e-05\n"}, set())


def test_recorded_versions_are_not_addresses_but_other_ips_are() -> None:
    env = {"versions": {"somepkg": "1.2.3.4"}, "cuda_version": "12.4.1.0", "host": {"ip": "10.1.2.3"}}
    assert recorded_versions([env]) == {"1.2.3.4", "12.4.1.0"}
    text = json.dumps(env)
    with pytest.raises(DataError) as refused:
        refuse_secrets({"env.json": text, "README.md": "somepkg 1.2.3.4, CUDA 12.4.1.0\n"}, set())
    (issue,) = refused.value.issues  # only the host address
    assert issue.file == "env.json" and "ip_address" in issue.message


def test_a_tunedeck_style_card_passes() -> None:
    digest = "9954559bf1311367dc7ac01f28227ccb9493f1774c0007c1156d5ead4b78f6cb"
    card = (f"# support-bot\n\nBase: `/models/base` (sha256 `{digest}`)\n\n"
            "| metric | baseline | trained |\n|---|---|---|\n| eval_loss | 2.3012 | 1.0457 |\n\n"
            "Exported 2026-12-03T06:15:04+00:00 by tunedeck 0.1.0, transformers 4.57.1, torch 2.5.1+cu124.\n")
    refuse_secrets({"README.md": card}, {digest})
