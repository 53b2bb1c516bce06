"""`TrainingConfig`: the job config keys, verbatim, plus what a real run needs.

Defaults are the values of the first example of the job config contract. Any subset of keys is a
valid config. Unknown keys, out-of-range values and contradictions are refused
with the field named and what was expected.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tunedeck.config.preference import preference_problems
from tunedeck.core.metric_direction import greater_is_better

MixedPrecision = Literal["bf16", "fp16", "fp32", "auto"]
LrScheduler = Literal["linear", "cosine", "polynomial", "constant", "constant_with_warmup"]
PeftMethod = Literal["lora", "qlora"]
Optimizer = Literal["adamw", "adamw_8bit", "paged_adamw_8bit", "adafactor"]
Strategy = Literal["steps", "epoch", "no"]
Task = Literal["sft", "classification", "dpo", "orpo", "kto"]
# The loss variants of the dpo task (TRL's DPO trainer computes each; several combine with loss_weights).
DpoLossType = Literal[
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot", "aot_unpaired",
    "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
]
KtoLossType = Literal["kto", "apo_zero_unpaired"]
AttnImplementation = Literal["auto", "sdpa", "eager", "flash_attention_2"]
DistributedStrategy = Literal["auto", "none", "ddp", "fsdp"]
Truncation = Literal["refuse", "drop", "truncate_prompt"]
TrackerName = Literal["mlflow", "tensorboard", "wandb", "trackio"]
TRACKER_NAMES: tuple[str, ...] = ("mlflow", "tensorboard", "wandb", "trackio")

# Metrics where lower is better; every other metric is maximised.
def _count_or_auto_schema(least: int) -> dict[str, Any]:
    """The JSON Schema of a count key with an automatic setting (its validator is a plain function)."""
    return {"anyOf": [{"type": "integer", "minimum": least, "maximum": 64}, {"type": "string", "const": "auto"}]}


class TrainingConfig(BaseModel):
    """One training job's configuration (the job config keys, then tunedeck's additions)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    # --- job config keys: basic fields ---
    epochs: int = Field(3, ge=1, le=1000, description="Passes over the training data.")
    batch_size: int = Field(4, ge=1, le=4096, description="Micro-batch size per device.")
    learning_rate: float = Field(5e-5, gt=0, le=1.0, description="Peak learning rate.")
    weight_decay: float = Field(0.01, ge=0, le=1.0, description="Weight decay, decoupled from the gradient.")
    warmup_ratio: float = Field(
        0.1, ge=0, lt=1.0, description="Share of total steps with a linear warmup from 0 to the peak."
    )
    max_length: int = Field(512, ge=8, le=1_048_576, description="Maximum tokens per example.")
    # --- job config keys: advanced fields ---
    gradient_accumulation_steps: int = Field(4, ge=1, le=4096, description="Micro-batches per optimizer update.")
    mixed_precision: MixedPrecision = Field(
        "auto",
        description="auto (bf16 where the hardware has it, else fp16 on a GPU, else fp32), bf16, fp16 or fp32.",
    )
    gradient_checkpointing: bool | Literal["auto"] = Field(
        "auto",
        description=(
            "Recompute activations in the backward pass to save memory, at the cost of about a third more "
            'compute. "auto" turns it on only when the step measured before training does not fit in memory '
            "without it; true and false force it on or off."
        ),
    )
    lr_scheduler: LrScheduler = Field("cosine", description="Learning-rate schedule after warmup.")
    use_peft: bool = Field(True, description="Train an adapter instead of every weight.")
    peft_method: PeftMethod = Field(
        "lora", description="lora, or qlora (4-bit base; CUDA, or ROCm where bitsandbytes' kernels run)."
    )
    lora_r: int = Field(16, ge=1, le=1024, description="LoRA rank.")
    lora_alpha: float = Field(32, gt=0, le=4096, description="LoRA scaling numerator.")
    lora_dropout: float = Field(0.05, ge=0, lt=1.0, description="Dropout on the LoRA input.")
    save_strategy: Strategy = Field("steps", description="When to save checkpoints.")
    save_steps: int = Field(500, ge=1, description="Steps between checkpoints (save_strategy=steps).")
    eval_strategy: Strategy = Field("steps", description="When to evaluate on the validation set.")
    eval_steps: int = Field(250, ge=1, description="Steps between evaluations (eval_strategy=steps).")
    logging_steps: int = Field(10, ge=1, description="Steps between metric events.")
    seed: int = Field(42, ge=0, le=2**32 - 1, description="Seed for data order and initialisation.")
    validation_dataset_id: int | str | None = Field(None, description="Dataset used for evaluation.")
    load_best_model_at_end: bool = Field(False, description="Restore the best checkpoint when training ends.")
    metric_for_best_model: str = Field(
        "eval_loss", min_length=1, description="Metric that ranks checkpoints and drives early stopping."
    )
    early_stopping_patience: int | None = Field(
        None, ge=1, le=10_000, description="Evaluations without improvement before stopping."
    )
    early_stopping_threshold: float = Field(
        0.0, ge=0, description="Smallest change of the metric that counts as an improvement."
    )
    # --- tunedeck additions beyond the job config keys ---
    task: Task = Field(
        "sft",
        description=(
            "sft (causal LM), classification (sequence head), or preference tuning on chosen/rejected answers: "
            "dpo (against a frozen reference), orpo (no reference: odds ratio added to the sft loss) or kto "
            "(completions labelled desirable or undesirable, paired or not)."
        ),
    )
    # --- preference tuning (tasks dpo, orpo, kto) ---
    beta: float = Field(
        0.1,
        gt=0,
        le=100,
        description=(
            "Preference strength. dpo and kto: how far the model may move from the reference (smaller: further); "
            "orpo: the weight of the odds-ratio term beside the sft loss."
        ),
    )
    loss_type: DpoLossType | KtoLossType | list[DpoLossType] = Field(
        "sigmoid",
        description=(
            'The preference loss. dpo: "sigmoid" (the DPO paper), "hinge", "ipo", "exo_pair", "nca_pair", '
            '"robust", "bco_pair", "sppo_hard", "aot", "aot_unpaired", "apo_zero", "apo_down", "discopop", '
            '"sft", "sigmoid_norm", or a list of them combined with loss_weights. kto: "kto" or '
            '"apo_zero_unpaired".'
        ),
    )
    loss_weights: list[float] | None = Field(
        None, description="dpo with several loss_type values: the weight of each, in the same order."
    )
    max_prompt_length: int | None = Field(
        None,
        ge=1,
        le=1_048_576,
        description=(
            "Preference tasks: most prompt tokens kept (earlier tokens are cut from the left), so long prompts "
            "leave room for the answers within max_length. Unset: the prompt is kept whole."
        ),
    )
    reference_free: bool = Field(
        False,
        description=(
            "dpo: compare chosen and rejected answers without a reference model (its log-probabilities taken "
            "as zero): no reference forward pass, no reference copy in memory."
        ),
    )
    desirable_weight: float = Field(
        1.0, gt=0, le=100, description="kto: weight of the loss on desirable completions."
    )
    undesirable_weight: float = Field(
        1.0, gt=0, le=100, description="kto: weight of the loss on undesirable completions."
    )
    # --- starting from another job's model ---
    init_from_job: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description=(
            "Start from this job's trained model instead of the bare base model (e.g. sft, then dpo on its "
            "output). Its adapter is trained on (the reference of a preference task is that adapter, frozen); a "
            "fully fine-tuned model becomes the starting weights. The export records the chain of models."
        ),
    )
    init_from_checkpoint: int | None = Field(
        None,
        ge=1,
        description="With init_from_job: start from this step's checkpoint instead of that job's final model.",
    )
    train_on_inputs: bool = Field(False, description="Also compute the loss on prompt/user tokens.")
    truncation: Truncation = Field(
        "refuse",
        description=(
            "What to do with an example that max_length leaves with no trained token. "
            '"refuse": stop the job and name the rows; "drop": train without those rows (the tokenization '
            'report and the run log name them); "truncate_prompt": cut the prompt or earlier turns from the '
            "left (keeping leading special tokens such as BOS) so the answer fits."
        ),
    )
    lora_target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Modules that get LoRA adapters."
    )
    polynomial_power: float = Field(1.0, gt=0, le=10, description="Power of the polynomial schedule.")
    optim: Optimizer = Field(
        "adamw",
        description=(
            'Optimizer. "adamw": AdamW with its fused kernel (two fp32 states per trained weight). '
            '"adamw_8bit": AdamW with 8-bit states (a quarter of the memory); "paged_adamw_8bit": the '
            "same, moved to host memory when the GPU runs short; both need bitsandbytes' kernels (a CUDA GPU, or a "
            "ROCm GPU where they run). "
            '"adafactor": factored second moments and no momentum, almost no optimizer memory.'
        ),
    )
    max_grad_norm: float = Field(1.0, ge=0, description="Gradient clipping norm (0 disables).")
    packing: bool | Literal["auto"] = Field(
        "auto",
        description=(
            'Put several examples in one row with block-diagonal attention. "auto" (sft on a model whose '
            "attention supports it) packs the examples of each micro-batch into rows instead of padding them: "
            "every step trains on the same examples with the same loss, only faster. true packs the whole "
            "dataset (fewest rows, fewer steps per epoch; each packed row is its own micro-batch, accumulated "
            "up to batch_size × gradient_accumulation_steps rows per step); false pads every batch."
        ),
    )
    trust_remote_code: bool = Field(False, description="Run code shipped with the model (off by default).")
    attn_implementation: AttnImplementation = Field(
        "auto", description="Attention kernel: flash_attention_2 when installed, else sdpa."
    )
    preflight: bool = Field(
        True, description="Run the preflight checks before training; a failed check refuses the job."
    )
    auto_reduce_batch_on_oom: bool = Field(
        True, description="On out-of-memory, retry with half the micro-batch and twice the accumulation."
    )
    torch_compile: bool = Field(
        False,
        description=(
            "Compile the model with torch.compile. Off until measured on your hardware: compiling takes "
            "minutes and pays back only on long runs with static shapes."
        ),
    )
    chunked_cross_entropy: bool | Literal["auto"] = Field(
        "auto",
        description=(
            "Compute the sft loss only on trained tokens, chunk by chunk, instead of materialising fp32 "
            'logits for every position: same loss and gradients, less memory and time. "auto" uses it on '
            "one process without torch_compile for a causal LM with a plain output head (llama, mistral, "
            "qwen2, qwen3, phi3, gpt2, gpt_neox, olmo, olmo2); true refuses a run where it does not apply."
        ),
    )
    eval_max_new_tokens: int = Field(
        128,
        ge=1,
        le=8192,
        description=(
            "Most tokens generated per answer by the baseline, final and per-evaluation generation "
            "passes (greedy). Answers cut at this cap are listed in the report; raise it when the "
            "completions you train on are longer."
        ),
    )
    output_schema: dict[str, Any] | None = Field(
        None,
        description=(
            "JSON Schema the answers of extraction data must satisfy: evaluation then reports the share of "
            "answers valid against it (schema_valid_rate) and the presence of its required fields."
        ),
    )
    eval_generation_each_eval: bool = Field(
        False,
        description=(
            "At every evaluation during training, also run the baseline/final evaluation procedure "
            "(greedy generation for chat, prompt/completion and extraction data; per-class scores for "
            "classification) and report its task metrics with a gen_ prefix, e.g. eval_gen_exact_match; "
            "metric_for_best_model may then name one (gen_token_f1). Costs one generation pass over the "
            "validation set per evaluation."
        ),
    )
    report_to: list[TrackerName] = Field(
        [],
        description=(
            "Experiment trackers that receive the run: its config, metrics at each logging step, the baseline "
            "and final evaluations and a link to the job (mlflow, tensorboard, wandb, trackio). Where each one "
            "writes is the operator's setting; a tracker that fails never fails the job."
        ),
    )

    # --- several devices and machines ---
    devices: int | Literal["auto"] = Field(
        "auto",
        description=(
            'Accelerators (GPUs) the job reserves on each machine. "auto": none reserved, the job trains on '
            "the worker's first accelerator (the CPU on a machine without one); 0: the CPU only (the job sees "
            "no accelerator); N: N devices of their own, one process each."
        ),
        json_schema_extra=_count_or_auto_schema(0),
    )
    processes: int | Literal["auto"] = Field(
        "auto",
        description=(
            'Training processes on each machine. "auto": one per reserved device, one on the CPU. On the '
            "CPU (devices 0) N > 1 runs N processes over gloo; with devices it must equal devices."
        ),
        json_schema_extra=_count_or_auto_schema(1),
    )
    machines: int = Field(
        1,
        ge=1,
        le=64,
        description=(
            "Machines the job spans; more than one runs on a Ray cluster (a worker started with --ray-address)."
        ),
    )
    strategy: DistributedStrategy = Field(
        "auto",
        description=(
            'How several processes share the work. "ddp": each holds the whole model and a share of the '
            'data; "fsdp": parameters, gradients and optimizer state are sharded across processes; "none": '
            'one process. "auto": none on one process, else ddp when model, gradients and optimizer state '
            "fit each device, fsdp when they do not (with CPU offload when sharding alone does not fit)."
        ),
    )
    fsdp_cpu_offload: bool | Literal["auto"] = Field(
        "auto",
        description=(
            "Under fsdp, keep parameters, gradients and optimizer state in CPU memory between uses "
            '(slower, much less device memory). "auto": only when sharding alone does not fit.'
        ),
    )
    fsdp_reshard_after_forward: bool = Field(
        True,
        description=(
            "Under fsdp, free each layer's gathered parameters after its forward pass (less memory, one more "
            "all-gather in the backward pass). Under fsdp, gradient_checkpointing is applied as FSDP "
            "activation checkpointing."
        ),
    )

    @field_validator("devices", "processes", mode="plain")
    @classmethod
    def _count_or_auto(cls, value: Any, info: ValidationInfo) -> int | Literal["auto"]:
        """A whole count in range, or "auto" (one message, not one per member of the union)."""
        least = 0 if info.field_name == "devices" else 1
        if value == "auto":
            return "auto"
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= 64:
            raise ValueError(f'expected "auto" or a whole number from {least} to 64')
        return int(value)

    @field_validator("report_to", mode="before")
    @classmethod
    def _known_trackers(cls, value: Any) -> Any:
        """Each entry a tracker tunedeck reports to, named by its position; repeats kept once."""
        if not isinstance(value, list):
            raise ValueError(f"expected a list of tracker names from {', '.join(TRACKER_NAMES)}")
        for index, name in enumerate(value):
            if name not in TRACKER_NAMES:
                raise ValueError(
                    f'report_to[{index}] is "{name}", not a tracker: expected one of {", ".join(TRACKER_NAMES)}'
                )
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _check_contradictions(self) -> TrainingConfig:
        problems = contradictions(self)
        if problems:
            # Raised as ValueError so pydantic attaches it; load_config turns it into a ConfigError.
            raise ValueError("; ".join(f"[{name}] {message}" for name, message in problems))
        return self

    def user_set(self, name: str) -> bool:
        """Whether the user chose `name`: the key was written, and (in a full dump) differs from its default.

        A config the user wrote holds only the keys they chose, so any key present counts,
        even at its default value. A full dump (every job config key present: how the job store,
        a clone and the run spec keep a config) lists every key whether chosen or not, so
        there only a value other than the default shows a choice; this keeps every valid
        config's dump re-validating.
        """
        if name not in self.model_fields_set:
            return False
        if not set(CONTRACT_KEYS) <= self.model_fields_set:
            return True
        return bool(getattr(self, name) != type(self).model_fields[name].default)

    @property
    def effective_batch_size_per_process(self) -> int:
        """batch_size × gradient_accumulation_steps (multiply by processes for the global value)."""
        return self.batch_size * self.gradient_accumulation_steps

    @property
    def greater_is_better(self) -> bool:
        """Direction of `metric_for_best_model`."""
        return greater_is_better(self.metric_for_best_model)

    def to_json_dict(self) -> dict[str, Any]:
        """Every key with its value, as the API and run directory store it."""
        return self.model_dump(mode="json")


def contradictions(config: TrainingConfig) -> list[tuple[str, str]]:
    """Each pair of keys `config` sets that cannot go together, as (field to blame, message); empty when none.

    Built with `TrainingConfig.model_construct(**keys)` it checks keys that were not validated yet.
    """
    problems: list[tuple[str, str]] = []
    if config.save_strategy == "no" and config.user_set("save_steps"):
        problems.append(("save_steps", 'save_steps is set but save_strategy is "no": remove one of them'))
    if config.eval_strategy == "no" and config.user_set("eval_steps"):
        problems.append(("eval_steps", 'eval_steps is set but eval_strategy is "no": remove one of them'))
    if config.early_stopping_patience is not None and config.eval_strategy == "no":
        problems.append(
            (
                "early_stopping_patience",
                'early stopping needs evaluation: set eval_strategy to "steps" or "epoch"',
            )
        )
    if config.load_best_model_at_end:
        if config.eval_strategy == "no":
            problems.append(
                ("load_best_model_at_end", 'load_best_model_at_end needs eval_strategy "steps" or "epoch"')
            )
        elif config.save_strategy != config.eval_strategy:
            problems.append(
                (
                    "load_best_model_at_end",
                    f"load_best_model_at_end needs save_strategy equal to eval_strategy "
                    f'(found save_strategy "{config.save_strategy}", eval_strategy "{config.eval_strategy}")',
                )
            )
        elif config.save_strategy == "steps" and config.save_steps % config.eval_steps != 0:
            problems.append(
                (
                    "save_steps",
                    f"load_best_model_at_end needs save_steps to be a multiple of eval_steps "
                    f"(found save_steps {config.save_steps}, eval_steps {config.eval_steps})",
                )
            )
    if config.peft_method == "qlora" and not config.use_peft:
        problems.append(("peft_method", 'peft_method "qlora" needs use_peft: true'))
    if config.output_schema is not None:
        problems += _schema_problems(config.output_schema)
    if config.task == "classification" and config.packing is True:
        problems.append(("packing", 'packing applies to sft only; set packing: "auto" or false for classification'))
    if config.task == "classification" and config.chunked_cross_entropy is True:
        problems.append(
            (
                "chunked_cross_entropy",
                'chunked_cross_entropy applies to the sft loss only; set it to "auto" or false for classification',
            )
        )
    if config.torch_compile and config.chunked_cross_entropy is True:
        problems.append(
            (
                "chunked_cross_entropy",
                "chunked_cross_entropy calls the model's body and head outside its compiled forward; "
                'with torch_compile set it to "auto" or false',
            )
        )
    if config.eval_generation_each_eval and config.eval_strategy == "no":
        problems.append(
            (
                "eval_generation_each_eval",
                'eval_generation_each_eval needs evaluation: set eval_strategy to "steps" or "epoch"',
            )
        )
    if _is_generation_metric(config.metric_for_best_model) and not config.eval_generation_each_eval:
        problems.append(
            (
                "metric_for_best_model",
                f'metric_for_best_model "{config.metric_for_best_model}" is reported only with '
                "eval_generation_each_eval: true",
            )
        )
    problems += _distribution_problems(config)
    problems += preference_problems(config)
    return problems


# Prefix of the evaluation-procedure metrics reported at each evaluation (eval_generation_each_eval).
GENERATION_METRIC_PREFIX = "gen_"


def _schema_problems(schema: dict[str, Any]) -> list[tuple[str, str]]:
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as error:
        return [("output_schema", f"not a valid JSON Schema: {error.message}")]
    return []


def gradient_checkpointing_on(config: TrainingConfig) -> bool:
    """Whether `config` recomputes activations: true, or "auto" that no memory measurement has resolved yet.

    A run resolves "auto" from the step measured before training and builds its trainer from a
    config holding the resolved true or false; an "auto" read before that counts as on, the
    choice that fits in memory wherever the other does.
    """
    return config.gradient_checkpointing is not False


def _is_generation_metric(name: str) -> bool:
    return name.removeprefix("eval_").startswith(GENERATION_METRIC_PREFIX)


CONTRACT_KEYS: tuple[str, ...] = (
    "epochs",
    "batch_size",
    "learning_rate",
    "weight_decay",
    "warmup_ratio",
    "max_length",
    "gradient_accumulation_steps",
    "mixed_precision",
    "gradient_checkpointing",
    "lr_scheduler",
    "use_peft",
    "peft_method",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "save_strategy",
    "save_steps",
    "eval_strategy",
    "eval_steps",
    "logging_steps",
    "seed",
    "validation_dataset_id",
    "load_best_model_at_end",
    "metric_for_best_model",
    "early_stopping_patience",
    "early_stopping_threshold",
)


def _distribution_problems(config: TrainingConfig) -> list[tuple[str, str]]:
    """Device, process, machine and strategy keys that cannot go together."""
    problems: list[tuple[str, str]] = []
    devices, processes = config.devices, config.processes
    if isinstance(devices, int) and devices >= 1 and isinstance(processes, int) and processes != devices:
        problems.append(
            ("processes", f"one process per device: with devices {devices} set processes to {devices} or \"auto\"")
        )
    if devices == "auto" and isinstance(processes, int) and processes > 1:
        problems.append(
            ("processes", "several processes need an explicit device count: set devices (0 for the CPU)")
        )
    several = config.machines > 1 or (isinstance(processes, int) and processes > 1) or (
        isinstance(devices, int) and devices > 1
    )
    if config.strategy == "none" and several:
        problems.append(("strategy", 'strategy "none" trains in one process: set it to "auto", "ddp" or "fsdp"'))
    if config.strategy != "fsdp" and config.user_set("fsdp_cpu_offload") and config.fsdp_cpu_offload is True:
        problems.append(("fsdp_cpu_offload", 'fsdp_cpu_offload applies to strategy "fsdp" only'))
    if config.strategy == "fsdp" and config.peft_method == "qlora":
        problems.append(
            ("strategy", 'qlora keeps a 4-bit base that fsdp cannot shard here: use strategy "ddp" or lora')
        )
    return problems
