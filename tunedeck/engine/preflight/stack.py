"""Check 1: driver, runtime, framework and accelerator support each other and the options chosen.

Failures name the reason and the alternative: QLoRA off CUDA, bf16 where the device lacks
it (pre-Ampere CUDA, most CPUs), flash-attention without a capable GPU, a driver older than
the CUDA runtime torch was built for. On a ROCm build of torch the AMD stack is compared with
its support table as well (`tunedeck.engine.preflight.rocm_stack`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunedeck.core.errors import HardwareError, TunedeckError
from tunedeck.engine.host.gpu_reach import torch_gpu_problem
from tunedeck.engine.host.gpu_telemetry import driver_info
from tunedeck.engine.host.hardware import check_qlora, resolve_attention, resolve_precision, trainer_optimizer
from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.preflight.rocm_stack import check_rocm_stack
from tunedeck.hostcheck.gpus import version_tuple


def check_stack(ctx: PreflightContext) -> CheckResult:
    """Record the stack and refuse options the hardware cannot run."""
    import torch

    hw, config = ctx.hardware, ctx.config
    figures: dict[str, Any] = {
        "backend": hw.backend,
        "device": hw.device_name,
        "device_count": hw.device_count,
        "compute_capability": ".".join(map(str, hw.capability)) if hw.capability else None,
        "total_memory_bytes": hw.total_memory_bytes,
        "torch": hw.torch_version or torch.__version__,
        "torch_cuda_runtime": hw.cuda_version,
        "torch_hip_runtime": hw.hip_version,
        "bf16_supported": hw.supports_bf16,
        "fp16_supported": hw.supports_fp16,
        "bitsandbytes_installed": hw.bitsandbytes_installed,
        "flash_attn_installed": hw.flash_attn_installed,
        "requested_precision": config.mixed_precision,
        "peft_method": config.peft_method if config.use_peft else "full",
        "attn_implementation": config.attn_implementation,
    }
    figures.update(driver_info(hw))
    failures: list[str] = []
    advice: list[str] = []
    warnings: list[str] = []
    try:
        ctx.precision = resolve_precision(config.mixed_precision, hw)
        figures["resolved_precision"] = ctx.precision
    except HardwareError as error:
        failures.append(str(error))
        ctx.problems["precision"] = str(error)
    if config.use_peft and config.peft_method == "qlora":
        try:
            check_qlora(hw)
        except HardwareError as error:
            failures.append(str(error))
            advice.append('use peft_method "lora" (QLoRA needs bitsandbytes 4-bit kernels where they run)')
    try:
        figures["optimizer"] = trainer_optimizer(config.optim, hw)
    except HardwareError as error:
        failures.append(str(error))
        advice.append('use optim "adamw" (8-bit optimizers need bitsandbytes kernels where they run)')
    model_class = _model_class(ctx) if config.attn_implementation != "auto" else None
    if config.attn_implementation == "flash_attention_2" or (
        config.attn_implementation == "sdpa" and model_class is not None
    ):
        try:
            figures["resolved_attention"] = resolve_attention(
                config.attn_implementation, hw, ctx.precision or "fp32", model_class
            )
        except HardwareError as error:
            failures.append(str(error))
            advice.append('use attn_implementation "auto" (sdpa where flash-attention cannot run)')
    driver_failures, driver_advice = _driver_failures(figures.get("driver_cuda_version"), hw.cuda_version)
    failures += driver_failures
    advice += driver_advice
    rocm = check_rocm_stack(hw, config)
    if rocm is not None:
        figures.update(rocm.figures)
        failures += rocm.failures
        warnings += rocm.warnings
        advice += rocm.advice
    facts = f"; {rocm.summary}" if rocm is not None else ""
    if hw.backend == "cpu":
        warnings.append("no accelerator: training runs on the CPU and is slow beyond tiny models")
    if hw.backend in ("cuda", "rocm") and not hw.flash_attn_installed:
        figures["flash_attn_note"] = "flash_attn not installed: attention uses sdpa"
    if failures:
        return CheckResult(1, "fail", "; ".join(failures) + facts, figures, advice)
    # What "auto" became is said, not only recorded: it decides the speed and the memory of the run.
    precision = f"{ctx.precision} (mixed_precision auto)" if config.mixed_precision == "auto" else str(ctx.precision)
    if warnings:
        return CheckResult(1, "warn", f"{'; '.join(warnings)}; training in {precision}{facts}", figures, advice)
    return CheckResult(1, "pass", f"{hw.backend} with {precision}: the chosen options are supported{facts}", figures)


def _model_class(ctx: PreflightContext) -> Any:
    """The model class the run would load, to know its attention kernels; None when unknown yet."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    path = ctx.spec.model.name
    if not Path(path).expanduser().is_dir():
        return None  # a hub id: reading its config would fetch it, which check 2 does
    try:
        model_config = AutoConfig.from_pretrained(path, trust_remote_code=ctx.config.trust_remote_code)
    except (OSError, ValueError, TunedeckError):
        return None  # a hub id not fetched yet: check 2 reports resolution problems
    auto: Any = AutoModelForSequenceClassification if ctx.config.task == "classification" else AutoModelForCausalLM
    try:
        return auto._model_mapping[type(model_config)]
    except KeyError:
        return None


def _driver_failures(driver_cuda: str | None, runtime: str | None) -> tuple[list[str], list[str]]:
    """GPUs the installed torch cannot reach, and a driver older than torch's CUDA runtime: failures and advice."""
    failures, advice = [], []
    unreachable = torch_gpu_problem()
    if unreachable is not None:
        failures.append(unreachable)
        advice.append("install the torch build for this machine's GPUs, then start the job again")
    driver_problem = _driver_too_old(driver_cuda, runtime)
    if driver_problem:
        failures.append(driver_problem)
        advice.append("update the NVIDIA driver, or install a torch build for an older CUDA runtime")
    return failures, advice


def _driver_too_old(driver_cuda: str | None, runtime: str | None) -> str | None:
    if not driver_cuda or not runtime:
        return None
    if version_tuple(driver_cuda) < version_tuple(runtime)[:2]:
        return (
            f"the driver supports CUDA up to {driver_cuda} but torch was built for CUDA {runtime}; "
            "kernels will fail to launch"
        )
    return None
