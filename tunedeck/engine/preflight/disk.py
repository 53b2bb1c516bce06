"""Check 2: the base model resolved and pinned; free disk against the weights and the checkpoints the run keeps.

Checkpoint size here is an estimate from parameter counts (check 6 measures a real one and
check 8 uses that): the trainable weights in fp32, twice that for AdamW's two moments, plus
the final model or adapter.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.engine.models.model_source import WEIGHT_PATTERNS
from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.report import CheckResult

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def check_checkpoint_and_disk(ctx: PreflightContext) -> CheckResult:
    """Pin the base model and compare the disk the run needs with what is free."""
    ctx.resolve()
    if ctx.resolved is None:
        return CheckResult(2, "fail", ctx.problems["resolved"], {"model": ctx.spec.model.name})
    resolved = ctx.resolved
    weights = weights_bytes(resolved.path)
    figures: dict[str, Any] = {
        "model": resolved.name,
        "source": resolved.source,
        "requested_revision": ctx.spec.model.revision,
        "pinned_revision": resolved.revision,
        "fingerprint": resolved.fingerprint,
        "weights_bytes": weights,
    }
    pinned = bool(resolved.fingerprint) or bool(resolved.revision and _COMMIT.match(resolved.revision))
    if not pinned:
        return CheckResult(2, "fail", f"{resolved.name}: the revision could not be pinned to a commit", figures)
    parameters = estimate_parameters(weights)
    estimate = checkpoint_estimate(ctx, parameters)
    saves = saves_kept(ctx)
    final_bytes = estimate["final_bytes"]
    needed = estimate["checkpoint_bytes"] * saves + final_bytes
    free = free_disk_bytes(ctx.spec.out_dir)
    figures.update(
        estimate,
        checkpoints_kept=saves,
        needed_bytes=needed,
        free_bytes=free,
        out_dir=str(ctx.spec.out_dir),
    )
    revision_note = (
        f"pinned to commit {resolved.revision}" if resolved.source == "hub" else "local folder fingerprinted"
    )
    if needed > free:
        return CheckResult(
            2,
            "fail",
            f"{revision_note}; the run needs about {_gb(needed)} for {saves} checkpoint(s) and the final model, "
            f"{_gb(free)} is free",
            figures,
            ["free disk space, raise save_steps, or keep fewer checkpoints"],
        )
    if needed > free * ctx.options.disk_warn_share:
        return CheckResult(
            2, "warn", f"{revision_note}; checkpoints would fill {needed / free:.0%} of the free disk", figures
        )
    return CheckResult(2, "pass", f"{revision_note}; about {_gb(needed)} needed of {_gb(free)} free", figures)


def weights_bytes(folder: Path) -> int:
    """Bytes of the safetensors weights in a model folder."""
    files = {p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.suffix == ".safetensors"}
    return sum(p.stat().st_size for p in files)


def estimate_parameters(weights: int) -> int:
    """Parameters from weight bytes, reading the stored dtype as 2 bytes when ambiguous (most models ship bf16)."""
    return weights // 2


def checkpoint_estimate(ctx: PreflightContext, parameters: int) -> dict[str, int]:
    """Estimated bytes of one checkpoint and of the final output, before the model is loaded."""
    config = ctx.config
    # A LoRA adapter on all linear layers is about 2 × r / hidden of the base: r / 1600 (capped at 5%)
    # is a generous bound for the usual ranks until check 6 measures a real checkpoint.
    trainable = max(1, int(parameters * min(0.05, config.lora_r / 1600))) if config.use_peft else parameters
    weights = trainable * 4
    return {
        "estimated_trainable_parameters": trainable,
        "checkpoint_bytes": weights * 3,  # weights + AdamW's two moments
        "final_bytes": weights,
    }


def saves_kept(ctx: PreflightContext) -> int:
    """How many checkpoints stay on local disk during the run."""
    from tunedeck.config.derived import derive_values

    config = ctx.config
    examples = len(ctx.data.train) if ctx.data is not None else config.batch_size * config.gradient_accumulation_steps
    total = derive_values(config, max(1, examples), ctx.spec.processes).total_steps
    saves = checkpoint_count(config, total)
    kept = ctx.options.kept_checkpoints
    return saves if kept is None else min(saves, kept)


def checkpoint_count(config: TrainingConfig, total_steps: int) -> int:
    """Checkpoints the run saves."""
    if config.save_strategy == "steps":
        return total_steps // config.save_steps
    if config.save_strategy == "epoch":
        return config.epochs
    return 0


def free_disk_bytes(out_dir: Path) -> int:
    """Free bytes on the filesystem that will hold `out_dir` (its nearest existing parent)."""
    folder = Path(out_dir).resolve()
    while not folder.exists():
        folder = folder.parent
    return int(shutil.disk_usage(folder).free)


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB"
