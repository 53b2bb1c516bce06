"""The model card's licences: the base model's as read from its files, each training dataset's as recorded."""

from __future__ import annotations

from tunedeck.core.model_licence import NOT_FOUND, NOT_RECORDED, ModelLicence
from tunedeck.engine.export.card import build_model_card
from tunedeck.engine.export.source import RunDocuments
from tunedeck.engine.models.pinning import BasePin

PIN = BasePin("org/base-model", "hub", "0123456789abcdef0123456789abcdef01234567", None, "f" * 64)
TRAIN_SHA = "a" * 64


def _documents(model: dict[str, object] | None = None) -> RunDocuments:
    return RunDocuments(
        config={"config": {"use_peft": True}, "task": "sft", "model": model or {}},
        data_manifest={
            "datasets": [
                {"role": "train", "name": "faq.jsonl", "rows": 120, "sha256": TRAIN_SHA},
                {"role": "validation", "name": "held-out.jsonl", "rows": 20, "sha256": "b" * 64},
            ]
        },
        results={"status": "succeeded"},
    )


def _card(documents: RunDocuments, **kwargs: object) -> str:
    return build_model_card(
        title="faq", documents=documents, pin=PIN, export_format="adapter", source_label="final", full_model=False,
        **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def _licence_section(card: str) -> str:
    return card.split("## License", 1)[1].split("## How to load", 1)[0]


def test_the_card_states_the_base_licence_and_each_datasets() -> None:
    recorded = ModelLicence(
        licence="other", name="llama3", link="https://example.org/l", source="README.md front matter"
    )
    rights = [{"role": "train", "name": "faq", "version": 2, "sha256": TRAIN_SHA, "licence": "cc-by-4.0",
               "rights_note": "Public FAQ\npages."}]  # fmt: skip
    card = _card(_documents({"licence": recorded.to_dict()}), datasets=rights)
    section = _licence_section(card)
    assert (
        "- **license of the base model (it applies to derived weights too):** other / llama3"
        ", https://example.org/l (from the base model's README.md front matter)"
    ) in section
    assert "  - train: faq v2 — cc-by-4.0" in section and "    - rights: Public FAQ pages." in section
    assert "  - validation: held-out.jsonl — not recorded" in section  # nothing guessed
    assert "- **license of this model:** _to fill in_" in section
    # The training data table has the licence column too.
    assert f"| train | faq.jsonl | — | — | 120 | — | — | — | {TRAIN_SHA} | cc-by-4.0 |" in card


def test_a_base_model_without_a_licence_says_so() -> None:
    card = _card(_documents({"licence": ModelLicence().to_dict()}))
    assert f"(it applies to derived weights too):** {NOT_FOUND}" in card
    assert NOT_FOUND == "licence not found in the base model's files"
    # A licence read at export time (from a base folder at hand) wins over a run that recorded none.
    read = _card(_documents(), base_licence=ModelLicence(licence="mit", source="LICENSE file"))
    assert "(it applies to derived weights too):** mit (from the base model's LICENSE file)" in read
    assert f"(it applies to derived weights too):** {NOT_RECORDED}" in _card(_documents())


def test_a_dataset_registered_with_the_cli_keeps_its_licence_from_its_manifest_notes() -> None:
    documents = _documents()
    documents.data_manifest["datasets"][0]["notes"] = {"licence": "cc0-1.0", "rights_note": "Ours."}
    section = _licence_section(_card(documents))
    assert "  - train: faq.jsonl — cc0-1.0" in section and "    - rights: Ours." in section
