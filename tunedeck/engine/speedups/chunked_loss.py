"""Chunked cross-entropy for sft: the causal-LM loss over labelled positions only, a chunk at a time.

The stock loss runs the output head on every position of the batch and upcasts the whole
`(batch, T, vocab)` logits to fp32; their gradient is as large again. With a real vocabulary
those tensors dominate a step's memory, and most of the positions are prompt or padding
whose label is -100 anyway. `chunked_causal_lm_loss` runs the decoder body as the model's
own forward would, shifts hidden states and labels by one, keeps the labelled positions, and
computes the head and a summed fp32 cross-entropy over at most `chunk_tokens` of them at a
time. Chunks keep their logits for the backward while the step's kept logits stay within
`keep_logits` (`kept_logits_limit` derives it from the memory the device has left); past that a
chunk is checkpointed: its backward recomputes the logits instead of keeping them. Which
chunks are kept changes the memory and the time, never the loss or the gradients. The sum
is divided as the stock loss divides: by `num_items_in_batch` when the trainer passes it
(gradient accumulation), else by the labelled tokens. Same loss, same gradients, up to float summation order.

Keeping only the labelled positions is a boolean selection, whose size the host must read
from the device: on an accelerator that is one synchronisation per micro-batch, which the
stock loss does not have. So the selection happens on CPU only (where reading it costs
nothing); on an accelerator every position goes through the chunks and the cross-entropy
ignores the unlabelled ones, which keeps the memory bound and adds no synchronisation.

Packed rows need nothing special: the packing code already ignores each example's first
label, so after the shift no position predicts across a boundary, and every input the
collator made (position ids, 4D block masks, varlen boundaries) reaches the body unchanged.

It applies where calling the model's parts is the same as calling the model: a plain
`ForCausalLM` of an architecture whose forward is exactly body → linear head → standard
loss (`SUPPORTED_MODEL_TYPES`), without torch.compile (which compiles the whole forward)
and not under FSDP (whose head weights are sharded outside the forward). Under DDP the
body runs through the wrapper's forward, where the gradient synchronisation is armed, with
the head swapped for an identity during that call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.token_labels import IGNORE_INDEX

DEFAULT_CHUNK_TOKENS = 4096
# What a step keeps when nothing is known of the memory left (a direct call, a trial step): 2**24
# fp32 logits, 64 MiB. A run derives its own from the headroom (`kept_logits_limit`).
DEFAULT_KEEP_LOGITS = 2**24
# Bytes one kept logit holds until the backward: the fp32 log-probabilities cross-entropy saves
# (4), plus up to 4 for the head's own output under mixed precision and the gradient the backward
# makes from them chunk by chunk.
BYTES_PER_KEPT_LOGIT = 8
# The share of the headroom the kept logits may take. The preflight's headroom is measured on the
# whole step and has the memory fit's margin taken off already; free memory read before the first
# step does not yet hold the step's activations and optimizer state, so it gets a smaller share.
MEASURED_HEADROOM_SHARE = 0.5
FREE_MEMORY_SHARE = 0.25
FIELD = "chunked_cross_entropy"

# Architectures whose causal-LM forward is body → linear head → ForCausalLM loss, with nothing
# in between. Deliberately absent: final-logit softcapping (gemma2, gemma3) and logit scaling
# (cohere, granite), which the head alone would skip.
SUPPORTED_MODEL_TYPES = frozenset(
    {"llama", "mistral", "qwen2", "qwen3", "phi3", "gpt2", "gpt_neox", "olmo", "olmo2"}
)
# Config attributes that change logits after the head; a set one rules the chunked loss out.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")
# Inputs the body must not see: the chunked loss reads them itself.
_LOSS_KEYS = frozenset({"labels", "shift_labels", "num_items_in_batch"})


@dataclass(frozen=True)
class ChunkedLossChoice:
    """Whether the run uses the chunked loss and, when it does not, why."""

    enabled: bool
    reason: str | None = None


def causal_lm_of(model: Any) -> Any:
    """The transformers causal LM inside `model` (a peft wrapper is unwrapped)."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def model_problem(model: Any) -> str | None:
    """Why calling `model`'s body and head would not give its own loss, or None when it would."""
    import torch
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    peft_config = getattr(model, "active_peft_config", None)
    if peft_config is not None and getattr(peft_config, "is_prompt_learning", False):
        return "prompt-learning adapters add virtual tokens in the wrapper's forward"
    causal_lm = causal_lm_of(model)
    config = getattr(causal_lm, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        return (f"model type {model_type!r} is not one whose forward is a plain linear head "
                f"(supported: {', '.join(sorted(SUPPORTED_MODEL_TYPES))})")
    if type(causal_lm).__name__ not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values():
        return f"{type(causal_lm).__name__} is not a causal language model"
    for name in _LOGIT_TRANSFORMS:
        value = getattr(config, name, None)
        if value is not None and value != 1:
            return f"the model transforms its logits after the head ({name} = {value})"
    loss_type = getattr(config, "loss_type", None)
    if loss_type not in (None, "ForCausalLM"):
        return f"the model uses its own loss ({loss_type})"
    body = getattr(causal_lm, "base_model", causal_lm)
    if body is causal_lm:
        return "the model's decoder body cannot be found (base_model_prefix)"
    head = causal_lm.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        return f"the output head is {type(head).__name__}, not a plain linear layer"
    return None


def decide_chunked_loss(
    model: Any, config: TrainingConfig, processes: int, strategy: str = "none"
) -> ChunkedLossChoice:
    """Whether `config.chunked_cross_entropy` turns the chunked loss on for `model`.

    "auto" turns it on wherever it applies and otherwise says why not; true where it does not
    apply is a ConfigError naming the field.
    """
    setting = config.chunked_cross_entropy
    if setting is False:
        return ChunkedLossChoice(False, "chunked_cross_entropy: false")
    problem: str | None
    if config.task != "sft":
        problem = f"task {config.task} has no language-model loss"
    elif processes != 1 and strategy == "fsdp":
        problem = ("under fsdp the output head's weights are sharded outside the model's forward; "
                   "it applies on one process and under ddp")
    elif config.torch_compile:
        problem = "torch_compile compiles the model's whole forward, which the chunked loss bypasses"
    else:
        problem = model_problem(model)
    if problem is None:
        return ChunkedLossChoice(True)
    if setting is True:
        raise ConfigError([Issue(f"chunked cross-entropy does not apply: {problem}; "
                                 'set chunked_cross_entropy to "auto" or false', field=FIELD)])
    return ChunkedLossChoice(False, problem)


def chunked_causal_lm_loss(
    model: Any,
    inputs: Mapping[str, Any],
    num_items_in_batch: Any = None,
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    keep_logits: int = DEFAULT_KEEP_LOGITS,
    select_labelled: bool | None = None,
    wrapper: Any = None,
) -> Any:
    """The causal-LM loss of `model` on `inputs` (with `labels`), equal to `model(**inputs).loss`.

    `num_items_in_batch` (an int or a tensor) divides the summed loss, as the trainer asks
    under gradient accumulation; without it the loss is the mean over labelled tokens.
    `select_labelled` drops unlabelled positions before the head (default: on CPU only, see
    the module's docstring). Chunks keep their logits for the backward up to `keep_logits` in all
    (the step's budget, from `kept_logits_limit`); the chunks past it are recomputed in the backward.
    `wrapper` is the module wrapping `model` for several processes
    (DistributedDataParallel): the body then runs through its forward.
    """
    import torch
    from torch.nn import functional
    from torch.utils.checkpoint import checkpoint

    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be positive")
    causal_lm = causal_lm_of(model)
    head = causal_lm.get_output_embeddings()
    body_inputs = {key: value for key, value in inputs.items() if key not in _LOSS_KEYS}
    if wrapper is None:
        outputs = causal_lm.base_model(**body_inputs)
        hidden = outputs.last_hidden_state if hasattr(outputs, "last_hidden_state") else outputs[0]
    else:
        # Through the wrapper's own forward (DDP's gradient hooks are armed there), with the head
        # swapped for an identity for that call: the "logits" it returns are the hidden states.
        with _head_bypassed(causal_lm, head):
            hidden = wrapper(**body_inputs).logits
    targets = inputs.get("shift_labels")
    if targets is None:
        # Position t predicts token t + 1; the last position predicts nothing.
        hidden, targets = hidden[:, :-1], inputs["labels"][:, 1:]
    targets = targets.to(hidden.device)
    labelled = targets != IGNORE_INDEX
    if select_labelled is None:
        select_labelled = hidden.device.type == "cpu"
    if select_labelled:
        rows, wanted = hidden[labelled], targets[labelled]
    else:
        rows, wanted = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)

    def chunk_loss(piece: Any, piece_targets: Any) -> Any:
        # fp32 as the stock loss upcasts; under autocast the head itself runs in half precision as it would there.
        return functional.cross_entropy(
            head(piece).float(), piece_targets, ignore_index=IGNORE_INDEX, reduction="sum"
        )

    total: Any = None
    kept = 0
    # At least one chunk, even empty, so a batch without labels still has a loss tied to the graph.
    for start in range(0, max(int(rows.shape[0]), 1), chunk_tokens):
        piece, piece_targets = rows[start:start + chunk_tokens], wanted[start:start + chunk_tokens]
        logits = int(piece.shape[0]) * head.out_features
        if kept + logits > keep_logits:
            part = checkpoint(chunk_loss, piece, piece_targets, use_reentrant=False)
        else:
            kept += logits
            part = chunk_loss(piece, piece_targets)
        total = part if total is None else total + part
    if num_items_in_batch is None:
        return total / labelled.sum()  # the mean over labelled tokens (NaN without any, as the stock loss)
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


@dataclass(frozen=True)
class LogitsBudget:
    """How many logits a step keeps for the backward, and the headroom it was derived from (recorded in the run)."""

    keep_logits: int
    headroom_bytes: int | None
    headroom_source: str  # "preflight", "accelerator", "host", or "unknown"

    def describe(self, vocab: int | None = None) -> str:
        """One line for the run's events: the budget, in logits and in positions of `vocab` when known."""
        if self.headroom_bytes is None:
            return f"logits kept up to {self.keep_logits:,} per step (no headroom measured)"
        positions = f" ({self.keep_logits // vocab:,} positions)" if vocab else ""
        return (f"logits kept up to {self.keep_logits:,} per step{positions}, beyond that recomputed in the "
                f"backward; from {self.headroom_bytes / 2**30:.2f} GiB of {self.headroom_source} headroom")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"keep_logits": self.keep_logits, "headroom_bytes": self.headroom_bytes,
                "headroom_source": self.headroom_source}


def kept_logits_limit(headroom_bytes: int | None, source: str) -> LogitsBudget:
    """How many logits a step may keep for the backward instead of recomputing them, given the memory left.

    Keeping a chunk's logits saves recomputing the output head in the backward (with a 32k
    vocabulary that head is a large share of a small model's step), but every kept chunk holds
    `BYTES_PER_KEPT_LOGIT` per logit until the backward. A fixed limit is wrong both ways: too
    small on a device with room to spare (most steps recompute), too large on a full one. So the
    limit is a share of the headroom, the memory the step does not use: `MEASURED_HEADROOM_SHARE`
    of the preflight's (its measured step peak against the usable memory, `source` "preflight"),
    `FREE_MEMORY_SHARE` of free memory read before training (the step is not allocated yet).
    Without a figure (`headroom_bytes` None) it is `DEFAULT_KEEP_LOGITS`. The loss and gradients
    are the same either way; only memory and time change.
    """
    if headroom_bytes is None:
        return LogitsBudget(DEFAULT_KEEP_LOGITS, None, "unknown")
    share = MEASURED_HEADROOM_SHARE if source == "preflight" else FREE_MEMORY_SHARE
    keep = int(max(0, headroom_bytes) * share) // BYTES_PER_KEPT_LOGIT
    return LogitsBudget(keep, int(headroom_bytes), source)


@contextmanager
def _head_bypassed(causal_lm: Any, head: Any) -> Iterator[None]:
    """`causal_lm`'s output head replaced by an identity for the duration, then restored."""
    import torch

    causal_lm.set_output_embeddings(torch.nn.Identity())
    try:
        yield
    finally:
        causal_lm.set_output_embeddings(head)
