"""The model card: every section, the comparison with the baseline, limits, and no data rows."""

from __future__ import annotations

from tunedeck.engine.export.card import SECTIONS, build_model_card
from tunedeck.engine.export.source import RunDocuments
from tunedeck.engine.models.pinning import BasePin

PIN = BasePin("org/base-model", "hub", "0123456789abcdef0123456789abcdef01234567", None, "f" * 64)
RAW_ROW = "My grandmother's secret recipe uses four eggs"


def _documents() -> RunDocuments:
    return RunDocuments(
        config={
            "config": {"use_peft": True, "peft_method": "qlora", "lora_r": 16, "lora_alpha": 32, "max_length": 256},
            "task": "sft",
            "model": {"trainable_parameters": 1000, "total_parameters": 100000},
            "derived": {"resolved_precision": "bf16", "total_steps": 50},
        },
        env={"python": "3.11", "packages": {"torch": "2.13.0"}, "hardware": {"backend": "cuda", "device_name": "GPU"}},
        data_manifest={
            "datasets": [
                {"role": "train", "name": "recipes", "rows": 120, "sha256": "a" * 64, "notes": {"example": RAW_ROW}}
            ],
            "tokenization": {"train": {"truncated": 3, "total": 120, "lost_part_of_answer": 1}},
        },
        results={"status": "succeeded", "global_step": 50, "total_steps": 50, "first_loss": 2.5, "last_loss": 0.7},
        baseline_eval={"metrics": {"eval_loss": 2.0, "exact_match": 0.4}, "examples": [{"reference": RAW_ROW}]},
        final_eval={"metrics": {"eval_loss": 1.2, "exact_match": 0.3}, "examples": [{"prediction": RAW_ROW}]},
        diagnoses=[{"type": "diagnosis", "kind": "slow", "message": "data loading is the bottleneck"}],
    )


def test_card_has_every_section_in_order_and_the_comparison() -> None:
    card = build_model_card(
        title="recipes", documents=_documents(), pin=PIN, export_format="adapter", source_label="step-40",
        full_model=False, warnings=["merged onto the de-quantised base"],
    )
    assert [line[3:] for line in card.splitlines() if line.startswith("## ")] == list(SECTIONS)
    assert card.startswith("---\nlicense: null")
    assert PIN.revision is not None and PIN.revision in card and "org/base-model" in card
    assert "| eval_loss | 2.0000 | 1.2000 | -0.8000 | better |" in card
    assert "| exact_match | 0.4000 | 0.3000 | -0.1000 | worse |" in card
    for limit in ("metric exact_match got worse", "3 of 120 training rows were cut", "checkpoint at step 40",
                  "data loading is the bottleneck", "at most 256 tokens"):
        assert limit in card, limit
    assert "QLORA: rank 16" in card and "> **Warning:** merged onto the de-quantised base" in card
    assert "_to fill in_" in card and 'revision="0123456789abcdef' in card


def test_card_states_the_saved_adapters_own_shape_over_the_config() -> None:
    # A run that continued another job's adapter kept that adapter's rank, whatever its config asked.
    card = build_model_card(
        title="dpo", documents=_documents(), pin=PIN, export_format="adapter", source_label="final", full_model=False,
        adapter_config={"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": ["v_proj", "q_proj"]},
    )
    assert "QLORA: rank 8, alpha 16, dropout 0.0, target modules q_proj, v_proj" in card


def test_card_never_shows_rows_or_fields_outside_the_manifest_whitelist() -> None:
    card = build_model_card(
        title="recipes", documents=_documents(), pin=PIN, export_format="bundle", source_label="final", full_model=False
    )
    assert RAW_ROW not in card and "notes" not in card
    assert "| train | recipes | — | — | 120 |" in card


def test_card_of_a_full_fine_tune_without_records_says_what_is_missing() -> None:
    card = build_model_card(
        title="bare", documents=RunDocuments(), pin=None, export_format="merged", source_label="final", full_model=True
    )
    assert [line[3:] for line in card.splitlines() if line.startswith("## ")] == list(SECTIONS)
    assert "not recorded" in card and "no baseline evaluation" in card
    assert "both hold the full model" in card and "AutoModelForCausalLM.from_pretrained" in card
