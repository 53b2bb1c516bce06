"""The troubleshooting advice rendered with the run's own figures; out-of-memory recognised on every backend."""

from __future__ import annotations

import math

import torch

from tunedeck.config.loading import validate_config
from tunedeck.engine.training.diagnosis import (
    DiagnosedError,
    diagnose_failure,
    is_out_of_memory,
    nan_loss_diagnosis,
    oom_diagnosis,
)
from tunedeck.engine.training.training_speed import PaddingCountingCollator, TrainingSpeedMonitor


def test_nan_advice_names_the_lower_rate_precision_data_counts_and_checkpointing() -> None:
    config = validate_config({"learning_rate": 5e-5, "gradient_checkpointing": False})
    counts = {"total": 100, "no_answer": 3, "lost_all_answer": 2, "truncated": 7}
    diagnosis = nan_loss_diagnosis(config, "fp16", step=12, loss=math.nan, counts=counts)
    event = diagnosis.to_event_fields()
    assert event["kind"] == "nan_loss" and "step 12" in event["message"]
    advice = " ".join(event["advice"])
    assert "from 5e-5 to 1e-5" in advice and "try 1e-05" in advice
    assert "fp16 to bf16, or use fp32" in advice
    assert "100 training examples, 3 with no trained token, 2 whose answer" in advice
    assert "gradient checkpointing" in advice.lower()
    assert event["figures"]["data"] == counts and event["figures"]["precision"] == "fp16"


def test_oom_advice_keeps_the_effective_batch_in_its_example() -> None:
    config = validate_config({"batch_size": 4, "gradient_accumulation_steps": 8, "max_length": 1024})
    diagnosis = oom_diagnosis(config, "fp32", torch.OutOfMemoryError("CUDA out of memory"))
    assert "4 × 8 = 32; 2 × 16 keeps it" in diagnosis.advice[0]
    assert "Reduce max_length (now 1024)" in diagnosis.advice[1]
    assert "This run trains in fp32" in diagnosis.advice[4]
    assert diagnosis.figures["effective_batch"] == 32


def test_oom_advice_for_whole_dataset_packing_names_max_length_not_the_batch() -> None:
    from tunedeck.config.packed_batches import packed_row_steps

    config = packed_row_steps(validate_config({"packing": True, "batch_size": 8, "max_length": 1024}))
    diagnosis = oom_diagnosis(config, "fp32", torch.OutOfMemoryError("CUDA out of memory"))
    assert diagnosis.advice[0].startswith("batch_size does not lower the peak here")
    assert "max_length (1024)" in diagnosis.advice[0]
    assert diagnosis.figures["micro_batch"] == 1 and diagnosis.figures["effective_batch"] == 8 * 4


def test_out_of_memory_is_recognised_from_each_backend() -> None:
    assert is_out_of_memory(torch.OutOfMemoryError("x"))
    assert is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 9 GB"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_failures_map_to_their_diagnosis() -> None:
    config = validate_config({})
    inner = nan_loss_diagnosis(config, "bf16", step=3, loss=math.inf)
    assert diagnose_failure(DiagnosedError(inner), config) is inner
    assert diagnose_failure(torch.OutOfMemoryError("x"), config, step=5).kind == "oom"
    assert diagnose_failure(KeyboardInterrupt()).kind == "interrupted"
    assert diagnose_failure(ValueError("bad"), config).kind == "error"


def test_padding_is_counted_through_the_collator() -> None:
    def pad(examples: list[dict]) -> dict:
        return {
            "input_ids": torch.zeros(2, 4, dtype=torch.long),
            "attention_mask": torch.tensor([[1, 1, 0, 0], [1] * 4]),
        }

    counting = PaddingCountingCollator(pad)
    counting([{"input_ids": [5, 6]}, {"input_ids": [5, 6, 7, 8]}])
    assert (counting.positions, counting.padding) == (8, 2)


def test_a_packed_batch_with_a_4d_mask_counts_tokens_not_mask_entries() -> None:
    def pack(examples: list[dict]) -> dict:
        # One row of 8 positions holding two examples of 3 tokens, then 2 padding positions.
        return {
            "input_ids": torch.zeros(1, 8, dtype=torch.long),
            "attention_mask": torch.ones(1, 1, 8, 8, dtype=torch.bool),
        }

    counting = PaddingCountingCollator(pack)
    counting([{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5, 6]}])
    assert (counting.positions, counting.padding) == (8, 2)


def test_slow_reasons_follow_the_thresholds_and_pick_the_matching_advice() -> None:
    config = validate_config({"logging_steps": 1, "max_length": 2048})
    monitor = TrainingSpeedMonitor(config, "fp32", backend="cuda", accelerator_total_bytes=80 * 2**30)
    figures = {"data_share": 0.35, "logging_share": 0.08, "padding_share": 0.6, "accelerator_memory_share": 0.2}
    reasons = monitor.reasons(figures)
    assert reasons == ["data_loading", "logging", "padding", "precision", "memory_headroom"]
    quiet = monitor.reasons({"data_share": 0.01, "logging_share": 0.01, "padding_share": 0.05})
    assert quiet == ["precision"]  # fp32 on a GPU is slow whatever the split
    cpu = TrainingSpeedMonitor(config, "fp32", backend="cpu")
    assert cpu.reasons({"data_share": 0.01, "logging_share": 0.01, "padding_share": 0.05}) == []
    from tunedeck.engine.training.diagnosis import slow_training_advice

    advice = " ".join(slow_training_advice(config, "fp32", figures, reasons))
    assert "Enable mixed precision" in advice
    assert "Increase the batch size if GPU memory allows (the peak used 20%" in advice
    assert "Reduce max_length if your data is shorter (now 2048; 60%" in advice
    assert "Check logging_steps" in advice and "Profile data loading" in advice
