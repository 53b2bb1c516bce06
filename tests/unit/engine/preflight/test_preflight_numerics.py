"""Checks 10 and 11: accumulation and activation checkpointing, each on its own, on a tiny model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.preflight.preflight_data import FAST_OPTIONS, chat_spec
from tunedeck.engine.preflight import run_preflight
from tunedeck.engine.preflight.report import PreflightReport
from tunedeck.engine.training.loss_normalisation import PER_TOKEN

pytestmark = pytest.mark.slow  # each check trains one step four ways on CPU
CONFIG: dict[str, Any] = {"batch_size": 4, "gradient_accumulation_steps": 2, "gradient_checkpointing": True}
THROUGH_THE_FULL_STEP = {1, 2, 3, 4}


def numerics_report(model: Path, folder: Path, only: set[int]) -> PreflightReport:
    return run_preflight(chat_spec(model, folder, **CONFIG), options=FAST_OPTIONS, only=THROUGH_THE_FULL_STEP | only)


def test_both_checks_pass_on_a_tiny_model_with_their_figures(tiny_llama_dir: Path, tmp_path: Path) -> None:
    report = numerics_report(tiny_llama_dir, tmp_path, {10, 11})
    document = report.to_dict()
    accumulation, checkpointing = report.check("accumulation"), report.check("activation_checkpointing")
    assert accumulation.status == "pass" and checkpointing.status == "pass", document
    figures = accumulation.figures
    assert figures["micro_batches"] == 2 and figures["loss_normalisation"] == PER_TOKEN
    assert len(set(figures["labelled_tokens_per_micro_batch"])) == 2  # the two normalisations would disagree
    assert figures["relative_difference"] <= figures["tolerance"] == 1e-3
    assert checkpointing.figures["relative_difference"] <= checkpointing.figures["tolerance"]
    assert [check["name"] for check in document["checks"]][-2:] == ["accumulation", "activation_checkpointing"]
    assert report.ok


def test_a_per_micro_batch_normalisation_fails_the_accumulation_check(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedeck.engine.training.trainer import TunedeckTrainer

    # No token count for the step: each micro-batch's mean loss, divided by the number of micro-batches.
    monkeypatch.setattr(TunedeckTrainer, "_get_num_items_in_batch", lambda self, batches, device: None)
    report = numerics_report(tiny_llama_dir, tmp_path, {10})
    accumulation = report.check("accumulation")
    assert accumulation.status == "fail", accumulation.to_dict()
    assert accumulation.figures["relative_difference"] > accumulation.figures["tolerance"]
    assert accumulation.advice and "tolerance" in accumulation.message
    assert not report.ok and report.status == "fail"


def test_checkpointing_that_cuts_the_gradient_fails_its_check(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    import transformers.modeling_utils

    def detached_checkpoint(function: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("use_reentrant", None)
        # A broken recomputation: the layer's input leaves the graph, so nothing before it learns.
        inputs = [arg.detach() if torch.is_tensor(arg) else arg for arg in args]
        return torch.utils.checkpoint.checkpoint(function, *inputs, use_reentrant=False, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "checkpoint", detached_checkpoint)
    report = numerics_report(tiny_llama_dir, tmp_path, {11})
    checkpointing = report.check("activation_checkpointing")
    assert checkpointing.status == "fail", checkpointing.to_dict()
    assert checkpointing.figures["relative_difference"] > checkpointing.figures["tolerance"]
    assert not report.ok


def test_the_checkpointing_check_does_not_apply_to_a_run_without_checkpointing(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    spec = chat_spec(tiny_llama_dir, tmp_path, **{**CONFIG, "gradient_checkpointing": False})
    report = run_preflight(spec, options=FAST_OPTIONS, only={1, 2, 3, 11})
    skipped = report.check("activation_checkpointing")
    assert skipped.status == "skip" and "not applicable" in skipped.message and not skipped.blocks


def test_a_classifier_accumulates_as_one_batch_with_its_per_micro_batch_loss(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    from tests.fixtures.data import write_jsonl
    from tests.integration.engine.engine_data import classification_rows, fast_config
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.training.loss_normalisation import PER_MICRO_BATCH
    from tunedeck.engine.training.run_spec import RunSpec

    # Its head's loss is each micro-batch's mean: the trainer must divide it by the accumulation steps.
    train = write_jsonl(tmp_path / "train.jsonl", classification_rows(4))
    config = fast_config(task="classification", batch_size=4, gradient_accumulation_steps=2)
    spec = RunSpec(config, ModelRef(str(tiny_bert_dir)), train, tmp_path / "run")
    report = run_preflight(spec, options=FAST_OPTIONS, only=THROUGH_THE_FULL_STEP | {10})
    accumulation = report.check("accumulation")
    assert accumulation.status == "pass", accumulation.to_dict()
    assert accumulation.figures["loss_normalisation"] == PER_MICRO_BATCH
