"""Hand-written evaluation documents and variants for the comparison and job-report tests."""

from __future__ import annotations

from typing import Any

from tunedeck.eval.experiment_report import VariantRun

PROCEDURE = "p" * 64


def evaluation(accuracy: float, loss: float, f1: dict[str, float], *, procedure: str = PROCEDURE) -> dict[str, Any]:
    """An evaluation document with a per-class table (precision = recall = f1 for brevity)."""
    return {
        "procedure_sha256": procedure,
        "metrics": {
            "eval_loss": loss,
            "eval_perplexity": 2.718281828**loss,
            "num_examples": 30,
            "accuracy": accuracy,
            "macro_f1": sum(f1.values()) / len(f1),
            "per_class": {
                label: {"precision": value, "recall": value, "f1": value, "support": 10} for label, value in f1.items()
            },
        },
        "truncation": {"truncated": 0},
        "examples": [],
    }


BASELINE = evaluation(0.33, 1.10, {"ham": 0.40, "spam": 0.30, "promo": 0.30})
REFERENCE_CONFIG = {"learning_rate": 1e-4, "lora_r": 16, "epochs": 3, "seed": 42}
DATA = [{"role": "train", "sha256": "a" * 64, "rows": 90}, {"role": "validation", "sha256": "b" * 64, "rows": 30}]


def three_variants() -> list[VariantRun]:
    """The reference run, a higher-rank variant that hurts the promo class, and a failed variant."""
    from tunedeck.config.training import TrainingConfig

    full = TrainingConfig(**REFERENCE_CONFIG).to_json_dict()
    return [
        VariantRun(
            job_id="job_ref", name="reference", state="succeeded", config=full,
            budget={"epochs": 3, "total_steps": 30}, data=DATA, baseline=BASELINE,
            final=evaluation(0.80, 0.50, {"ham": 0.85, "spam": 0.80, "promo": 0.75}),
            curves={"loss": [(1, 1.1), (10, 0.8), (30, 0.5)], "eval_loss": [(15, 0.7), (30, 0.5)]},
        ),
        VariantRun(
            job_id="job_r64", name="rank-64", state="succeeded", config={**full, "lora_r": 64},
            budget={"epochs": 3, "total_steps": 30}, data=DATA, baseline=BASELINE,
            final=evaluation(0.83, 0.45, {"ham": 0.95, "spam": 0.90, "promo": 0.20}),
            curves={"loss": [(1, 1.1), (10, 0.7), (30, 0.4)]},
        ),
        VariantRun(
            job_id="job_lr", name="lr-1e-2", state="failed", config={**full, "learning_rate": 0.01},
            reason="training failed at step 4: loss is NaN", budget={"epochs": 3, "total_steps": 30},
            data=DATA, baseline=BASELINE, final=None, curves={"loss": [(1, 1.1), (4, 9.5)]},
        ),
    ]  # fmt: skip
