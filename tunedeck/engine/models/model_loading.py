"""Loading a pinned base model for training: tokenizer, task head, precision, LoRA or QLoRA.

Everything the hardware or the model cannot honour fails here, before a run directory
exists: QLoRA off CUDA, a precision the device lacks, `max_length` beyond the model's
positions, a folder that will not load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.config.training import TrainingConfig, gradient_checkpointing_on
from tunedeck.core.errors import ConfigError, Issue, ModelLoadError
from tunedeck.data.chat_render import chat_template_sha256
from tunedeck.engine.host.hardware import HardwareProfile, check_qlora, resolve_attention
from tunedeck.engine.models.init_from import StartingPoint, check_same_architecture, read_parent, start_from_parent
from tunedeck.engine.models.model_source import ResolvedModel

_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx")


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for the trainer, with what was decided while loading it."""

    model: Any
    tokenizer: Any
    precision: str
    attn_implementation: str
    trainable_parameters: int
    total_parameters: int
    uses_peft: bool
    max_positions: int | None
    label2id: dict[str, int] = field(default_factory=dict)
    start: StartingPoint | None = None  # how the run started from another job's model (`init_from_job`)

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts for config.json, results.json and the CLI."""
        return {
            "precision": self.precision,
            "attn_implementation": self.attn_implementation,
            "trainable_parameters": self.trainable_parameters,
            "total_parameters": self.total_parameters,
            "trainable_share": self.trainable_parameters / max(self.total_parameters, 1),
            "uses_peft": self.uses_peft,
            "max_positions": self.max_positions,
            # Compared between the variants of an experiment: another template renders other tokens.
            "chat_template_sha256": chat_template_sha256(self.tokenizer),
        }


def load_tokenizer(model: ResolvedModel, config: TrainingConfig) -> Any:
    """The model's tokenizer, with a pad token (the end-of-sequence token when it has none)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model.path), trust_remote_code=config.trust_remote_code)
    except Exception as error:  # tokenizer loading raises OSError, ValueError, KeyError...
        raise ModelLoadError(f"{model.path}: cannot load the tokenizer: {error}") from error
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelLoadError(f"{model.path}: the tokenizer has neither a pad nor an end-of-sequence token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def read_model_config(model: ResolvedModel, config: TrainingConfig) -> Any:
    """The model's transformers config (architecture, positions), without loading weights."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(model.path), trust_remote_code=config.trust_remote_code)
    except Exception as error:
        raise ModelLoadError(f"{model.path}: cannot read config.json: {error}") from error


def max_positions_of(model_config: Any) -> int | None:
    """The longest sequence the architecture accepts, when the config says."""
    for key in _POSITION_KEYS:
        value = getattr(model_config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def check_max_length(config: TrainingConfig, model_config: Any, source: str | None = None) -> int | None:
    """Refuse a `max_length` above the model's maximum positions; return that maximum."""
    limit = max_positions_of(model_config)
    if limit is not None and config.max_length > limit:
        raise ConfigError(
            [
                Issue(
                    "max_length is longer than the model accepts",
                    field="max_length",
                    file=source,
                    expected=f"at most {limit} (the model's maximum positions)",
                    found=str(config.max_length),
                )
            ]
        )
    return limit


def load_model(
    model: ResolvedModel,
    config: TrainingConfig,
    hardware: HardwareProfile,
    precision: str,
    tokenizer: Any,
    label2id: dict[str, int] | None = None,
    init_from: Path | None = None,
) -> LoadedModel:
    """Load the base weights with the task head, then wrap them in LoRA when `use_peft` is set.

    `init_from` (another job's model folder) is applied on top of the base as
    `tunedeck.engine.models.init_from` describes: its adapter continued or merged, or its weights
    loaded in place of the base's.
    """
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    model_config = read_model_config(model, config)
    limit = check_max_length(config, model_config)
    parent = read_parent(init_from) if init_from is not None else None
    weights_path = model.path
    if parent is not None and parent.weights_folder is not None:
        check_same_architecture(parent, model_config)
        weights_path = parent.weights_folder
    qlora = config.use_peft and config.peft_method == "qlora"
    if qlora:
        check_qlora(hardware)
    auto_class: Any = AutoModelForSequenceClassification if config.task == "classification" else AutoModelForCausalLM
    try:
        model_class = auto_class._model_mapping[type(model_config)]
    except KeyError:
        model_class = None
    attn = resolve_attention(config.attn_implementation, hardware, precision, model_class)
    kwargs = _from_pretrained_kwargs(config, hardware, precision, attn, tokenizer, label2id, qlora)
    try:
        network = auto_class.from_pretrained(str(weights_path), **kwargs)
    except Exception as error:
        raise ModelLoadError(f"{weights_path}: cannot load the model for task {config.task}: {error}") from error
    if getattr(network.config, "pad_token_id", None) is None:
        network.config.pad_token_id = tokenizer.pad_token_id
    start = None
    if parent is not None:
        network, start = start_from_parent(network, parent, config, qlora)
    if config.use_peft and (start is None or start.how != "adapter"):
        network = _add_lora(network, config, qlora)
    trainable = sum(p.numel() for p in network.parameters() if p.requires_grad)
    total = sum(p.numel() for p in network.parameters())
    return LoadedModel(
        model=network,
        tokenizer=tokenizer,
        precision=precision,
        attn_implementation=attn,
        trainable_parameters=trainable,
        total_parameters=total,
        uses_peft=config.use_peft,
        max_positions=limit,
        label2id=dict(label2id or {}),
        start=start,
    )


def _from_pretrained_kwargs(
    config: TrainingConfig,
    hardware: HardwareProfile,
    precision: str,
    attn: str,
    tokenizer: Any,
    label2id: dict[str, int] | None,
    qlora: bool,
) -> dict[str, Any]:
    """The arguments `from_pretrained` loads the weights with: dtype, attention, the labels of a
    classification head, and 4-bit quantization for QLoRA."""
    import torch

    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    kwargs: dict[str, Any] = {
        "trust_remote_code": config.trust_remote_code,
        "attn_implementation": attn,
        "use_safetensors": True,
        # A frozen LoRA base can live in half precision; weights that train stay fp32 (autocast
        # does the half-precision math) so small updates are not rounded away.
        "dtype": half if (config.use_peft and half is not None and hardware.backend != "cpu") else torch.float32,
    }
    if label2id is not None:
        kwargs.update(
            num_labels=len(label2id),
            label2id=dict(label2id),
            id2label={index: label for label, index in label2id.items()},
            pad_token_id=tokenizer.pad_token_id,
        )
    if qlora:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=half or torch.bfloat16,
        )
        kwargs["dtype"] = half or torch.bfloat16
    return kwargs


def _add_lora(network: Any, config: TrainingConfig, qlora: bool) -> Any:
    from peft import LoraConfig, TaskType, get_peft_model, prepare_model_for_kbit_training

    if qlora:
        network = prepare_model_for_kbit_training(network, use_gradient_checkpointing=gradient_checkpointing_on(config))
    targets = config.lora_target_modules
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,  # type: ignore[arg-type]  # peft divides it by r; a float is fine
        lora_dropout=config.lora_dropout,
        target_modules=targets if targets == "all-linear" else list(targets),
        task_type=TaskType.SEQ_CLS if config.task == "classification" else TaskType.CAUSAL_LM,
    )
    try:
        return get_peft_model(network, lora)
    except ValueError as error:  # peft names the missing target modules
        raise ConfigError(
            [Issue(str(error), field="lora_target_modules", expected="module names present in the model")]
        ) from None


def save_resolved_tokenizer(tokenizer: Any, folder: Path) -> None:
    """Save the tokenizer beside the weights so `final/` loads on its own."""
    tokenizer.save_pretrained(str(folder))
