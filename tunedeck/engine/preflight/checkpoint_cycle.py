"""Check 6: save, resume, reload and generate from a checkpoint, before the dataset grows.

Two steps are trained and saved with the run's trainer; a new trainer resumes from that
checkpoint and must continue at step 3; the checkpoint is then loaded into a fresh model
(the run's loader, then the saved weights) whose loss on a fixed batch must equal the loss
of the model that wrote it; finally the reloaded model generates (or classifies) an example.

For a preference task the loss is the task's own (dpo, orpo, kto), with the run's reference
on both sides: the frozen "ref" adapter for LoRA, the frozen starting copy for a full fine-tune,
none for orpo or reference-free dpo; the reloaded model generates from an example's prompt.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tunedeck.engine.models.init_from import uses_reference_adapter
from tunedeck.engine.preference.reference import keep_start_as_reference
from tunedeck.engine.preflight.context import RELEASED, PreflightContext
from tunedeck.engine.preflight.measure import free_accelerator_memory
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.diagnosis import DiagnosedError
from tunedeck.engine.training.training_data import IGNORE_INDEX, ExampleDataset


def check_checkpoint_cycle(ctx: PreflightContext) -> CheckResult:
    """Save, resume, reload and generate; releases the preflight's model when done."""
    ctx.require("loaded", "data", "precision")
    sample = ExampleDataset(list(ctx.data.train.features[: ctx.options.overfit_examples]))
    micro = max(ctx.smallest_micro_batch, min(ctx.micro_batch, len(sample)))
    out = ctx.work_dir / "cycle"
    checkpoint = out / "checkpoint-2"
    try:
        trainer = ctx.trial_trainer(sample, out, micro_batch=micro, accumulation=1, max_steps=2, save_steps=2)
        trainer.train()
        trainer.optimizer = None
        if not (checkpoint / "trainer_state.json").is_file():
            return CheckResult(6, "fail", f"no complete checkpoint was written at {checkpoint}")
        ctx.checkpoint_bytes = folder_bytes(checkpoint)
        ctx.final_bytes = sum(p.stat().st_size for p in checkpoint.glob("*.safetensors"))
        fixed = FixedBatch(ctx, trainer, [sample[i] for i in range(micro)])
        reference = fixed.loss(ctx.loaded.model)
        resumed = ctx.trial_trainer(sample, out, micro_batch=micro, accumulation=1, max_steps=3, save_steps=1000)
        resumed.train(resume_from_checkpoint=str(checkpoint))
        resumed.optimizer = None
    except DiagnosedError as error:
        return CheckResult(6, "fail", error.diagnosis.message, error.diagnosis.figures, error.diagnosis.advice)
    new_steps = [entry["step"] for entry in resumed.state.log_history if "loss" in entry and entry["step"] > 2]
    figures: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "checkpoint_bytes": ctx.checkpoint_bytes,
        "checkpoint_files": sorted(p.name for p in checkpoint.iterdir()),
        "resumed_at_step": 2,
        "resumed_to_step": int(resumed.state.global_step),
        "steps_after_resume": new_steps,
        "reference_loss": reference,
    }
    del trainer, resumed
    device = next(ctx.loaded.model.parameters()).device
    attention = getattr(ctx.loaded.model.config, "_attn_implementation", None)
    ctx.loaded = None  # the preflight model is done with; the reload needs the memory
    ctx.problems["loaded"] = RELEASED
    free_accelerator_memory()
    reloaded = reload_checkpoint(ctx, checkpoint, device, attention)
    reloaded_loss = fixed.loss(reloaded)
    figures["reloaded_loss"] = reloaded_loss
    figures["generation"] = generate_sample(ctx, reloaded, sample[0], device)
    del reloaded, fixed
    ctx.reference = None  # a full fine-tune's frozen copy goes with the model it was the reference of
    free_accelerator_memory()
    problems = []
    if new_steps != [3] or figures["resumed_to_step"] != 3:
        problems.append(f"resuming from step 2 did not continue at step 3 (logged steps {new_steps})")
    tolerance = 1e-3 if ctx.precision == "fp32" else 2e-2
    if not math.isclose(reloaded_loss, reference, rel_tol=tolerance, abs_tol=tolerance):
        problems.append(
            f"the reloaded checkpoint gives loss {reloaded_loss:.5f}, the model that saved it {reference:.5f}"
        )
    if not figures["generation"].get("ok"):
        problems.append("the reloaded model produced no output")
    if problems:
        return CheckResult(6, "fail", "; ".join(problems), figures)
    return CheckResult(
        6, "pass", "saved at step 2, resumed to step 3, reloaded with the same loss, and generated", figures
    )


def folder_bytes(folder: Path) -> int:
    """Total size of the files in a folder."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


class FixedBatch:
    """One batch of training examples whose loss is compared before saving and after reloading.

    For sft and classification it is the run's collated batch and the model's own loss. For a
    preference task it is the trainer's loss (with the run's reference: the frozen "ref" adapter,
    or the frozen copy this preflight keeps) on rows as the trainer prepared them, computed
    by a trainer built for each model, since the first one is released before the reload.
    """

    def __init__(self, ctx: PreflightContext, trainer: Any, rows: list[dict[str, Any]]) -> None:
        self.ctx = ctx
        if ctx.preference:
            prepared = trainer.train_dataset  # with kto's KL completions, or reference-free dpo's zeros
            self.rows = [dict(prepared[i]) for i in range(len(rows))]
            self.examples = rows
        else:
            self.batch = ctx.base_collator()(rows)

    def loss(self, model: Any) -> float:
        """`model`'s loss on the batch, in eval mode, under the run's precision."""
        if not self.ctx.preference:
            return batch_loss(self.ctx, model, self.batch)
        scorer = self.ctx.preference_scorer(model, self.examples, self.ctx.work_dir / "cycle-loss")
        inputs = scorer._prepare_inputs(scorer.data_collator(self.rows))
        return _evaluated(self.ctx, model, lambda: scorer.compute_loss(model, inputs))


def batch_loss(ctx: PreflightContext, model: Any, batch: dict[str, Any]) -> float:
    """The model's loss on one batch, in eval mode, under the run's precision."""
    device = next(model.parameters()).device
    # Packed batches also carry plain ints (the longest example, for per-example attention).
    inputs = {key: value.to(device) if hasattr(value, "to") else value for key, value in batch.items()}
    return _evaluated(ctx, model, lambda: model(**inputs).loss)


def _evaluated(ctx: PreflightContext, model: Any, compute: Any) -> float:
    """`compute()` as a float, with `model` in eval mode, without gradients, under the run's precision."""
    import torch

    device = next(model.parameters()).device
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(ctx.precision))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            return float(compute())
    finally:
        model.train(was_training)


def reload_checkpoint(ctx: PreflightContext, checkpoint: Path, device: Any, attention: str | None = None) -> Any:
    """A fresh model from the checkpoint: the run's loader plus the saved adapter, or the saved full model.

    `attention` is the attention implementation the model that saved it ran with, when the run
    switched it (per-example sdpa for packed rows is not part of the saved config).
    """
    from tunedeck.engine.models.model_loading import load_model

    config = ctx.config
    fresh = load_model(ctx.resolved, config, ctx.hardware, str(ctx.precision), ctx.tokenizer, ctx.data.label2id)
    model = fresh.model
    if config.use_peft:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        if ctx.preference and uses_reference_adapter(config):
            # As a resumed run: the reference is the adapter the run started from, then the saved weights load.
            keep_start_as_reference(model)
        set_peft_model_state_dict(model, load_file(str(checkpoint / "adapter_model.safetensors")))
    else:
        model = type(model).from_pretrained(str(checkpoint), dtype=next(model.parameters()).dtype)
    if not getattr(model, "is_loaded_in_4bit", False):
        model = model.to(device)
    if attention and getattr(model.config, "_attn_implementation", None) != attention:
        # Otherwise a packed batch with per-example boundaries would read as one sequence.
        from tunedeck.engine.speedups.packed_attention_path import set_attention

        set_attention(model, attention)
    return model


def generate_sample(ctx: PreflightContext, model: Any, example: dict[str, Any], device: Any) -> dict[str, Any]:
    """Generate from the example's prompt (the tokens before its first trained one), or classify it."""
    import torch

    model.eval()
    ids = list(example.get("input_ids") or [])
    if ctx.config.task == "classification":
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids], device=device)).logits
        predicted = int(logits.argmax(-1)[0])
        id2label = {index: label for label, index in (ctx.data.label2id or {}).items()}
        return {"ok": True, "predicted_label": id2label.get(predicted, str(predicted))}
    if "prompt_ids" in example:  # a preference example: its prompt, as the evaluation generates from it
        cut = len(example["prompt_ids"]) or 1
        ids = list(example["prompt_ids"]) or [ctx.tokenizer.bos_token_id or 0]
    else:
        labels = example["labels"]
        cut = next((i for i, label in enumerate(labels) if label != IGNORE_INDEX), len(ids)) or 1
    prompt = torch.tensor([ids[:cut]], device=device)
    with torch.no_grad():
        output = model.generate(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=ctx.options.generate_tokens,
            do_sample=False,
            pad_token_id=ctx.tokenizer.pad_token_id,
        )
    new = output[0, prompt.shape[1] :].tolist()
    return {
        "ok": len(new) > 0,
        "prompt_tokens": cut,
        "new_tokens": len(new),
        "text": ctx.tokenizer.decode(new, skip_special_tokens=False),
    }
