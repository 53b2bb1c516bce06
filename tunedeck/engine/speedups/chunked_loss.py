"""Chunked cross-entropy for sft: the causal-LM loss over labelled positions only, a chunk at a time.

The stock loss runs the output head on every position of the batch and upcasts the whole
`(batch, T, vocab)` logits to fp32; their gradient is as large again. With a real vocabulary
those tensors dominate a step's memory, and most of the positions are prompt or padding
whose label is -100 anyway. `chunked_causal_lm_loss` runs the decoder body as the model's
own forward would, shifts hidden states and labels by one, keeps the labelled positions, and
computes the head and a summed fp32 cross-entropy a chunk of them at a time. No chunk's
logits outlive it: while they exist, the chunk's gradients with respect to its hidden states
and to the head's weight are computed too (the softmax minus the one-hot target, through the
head's two matrix products), and the backward only scales them. That is the work the stock
backward does, without keeping the logits until the backward and without running the head
twice (recomputing the logits in the backward costs a third more head work; keeping them
costs memory in proportion to the step's tokens). At most `chunk_logits` logits exist at once
(`chunk_logits_limit` derives it from the memory the device has left). The chunk size changes
the memory, never the loss or the gradients. The sum
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
from functools import cache
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.token_labels import IGNORE_INDEX

DEFAULT_CHUNK_TOKENS = 4096
# The most logits a chunk holds at once: 2**24 fp32 logits, 64 MiB. Past that the head's matrix
# products are large enough that bigger chunks buy no speed, only memory; it is also what a chunk
# holds when nothing is known of the memory left (a direct call, a trial step).
MAX_CHUNK_LOGITS = 2**24
# Bytes one logit of the chunk in flight holds: the head's output (up to 4), its fp32 copy (4)
# and the fp32 softmax that becomes its gradient (4).
BYTES_PER_CHUNK_LOGIT = 12
# The share of the headroom the chunk in flight may take. The preflight's headroom is measured on
# the whole step and has the memory fit's margin taken off already; free memory read before the
# first step does not yet hold the step's activations and optimizer state, so it gets a smaller share.
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
    chunk_logits: int = MAX_CHUNK_LOGITS,
    select_labelled: bool | None = None,
    wrapper: Any = None,
) -> Any:
    """The causal-LM loss of `model` on `inputs` (with `labels`), equal to `model(**inputs).loss`.

    `num_items_in_batch` (an int or a tensor) divides the summed loss, as the trainer asks
    under gradient accumulation; without it the loss is the mean over labelled tokens.
    `select_labelled` drops unlabelled positions before the head (default: on CPU only, see
    the module's docstring). A chunk is at most `chunk_tokens` positions and `chunk_logits`
    logits (the memory budget, from `chunk_logits_limit`), and at least one position.
    `wrapper` is the module wrapping `model` for several processes
    (DistributedDataParallel): the body then runs through its forward.
    """
    import torch

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
    chunk_rows = max(1, min(chunk_tokens, chunk_logits // max(1, int(head.out_features))))
    if num_items_in_batch is None:
        divisor = labelled.sum()  # the mean over labelled tokens (NaN without any, as the stock loss)
    elif torch.is_tensor(num_items_in_batch):
        divisor = num_items_in_batch.to(hidden.device)
    else:
        divisor = torch.tensor(num_items_in_batch, device=hidden.device)
    return _head_cross_entropy_class().apply(rows, head.weight, wanted, chunk_rows, divisor)


@cache
def _head_cross_entropy_class() -> Any:
    """The autograd function behind the chunked loss (built once, on first use: this module loads torch lazily)."""
    import torch
    from torch.nn import functional

    class HeadCrossEntropy(torch.autograd.Function):
        """fp32 cross-entropy of `rows @ weight.T` against `targets`, summed and divided by `divisor`.

        The forward computes each chunk's gradients while its logits exist and frees them; the
        backward scales the stored gradients by the incoming one. Under autocast the head's
        products run in the autocast dtype, as `head(rows)` would; the gradient of the logits is
        divided before it is cast to that dtype, as the stock backward divides it, so the two
        round alike; in fp32 it divides the two products instead, which are smaller.
        """

        @staticmethod
        def forward(ctx: Any, rows: Any, weight: Any, targets: Any, chunk_rows: int, divisor: Any) -> Any:  # type: ignore[override]
            needs_rows, needs_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
            total = torch.zeros((), dtype=torch.float32, device=rows.device)
            grad_rows = torch.empty_like(rows) if needs_rows else None
            grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if needs_weight else None
            # At least one chunk, even empty, so a batch without labels still has a loss tied to the graph.
            for start in range(0, max(int(rows.shape[0]), 1), chunk_rows):
                piece, piece_targets = rows[start:start + chunk_rows], targets[start:start + chunk_rows]
                logits = functional.linear(piece, weight)
                half = logits.dtype != torch.float32
                # fp32 as the stock loss upcasts: log-softmax, then the negative log-likelihood of each target.
                log_probs = functional.log_softmax(logits.float(), dim=-1)
                trained = piece_targets != IGNORE_INDEX
                safe = piece_targets.clamp(min=0).unsqueeze(1)  # ignored positions point at id 0, weighted 0
                picked = log_probs.gather(1, safe).squeeze(1)
                total -= torch.where(trained, picked, torch.zeros_like(picked)).sum()
                if not (needs_rows or needs_weight):
                    continue
                # d(sum of cross-entropies)/d(logits): the softmax minus the one-hot target, 0 on ignored
                # positions; made in place of the log-probabilities, so a chunk holds one fp32 copy.
                gradient = log_probs.exp_()
                del log_probs
                gradient.scatter_add_(1, safe, -trained.to(gradient.dtype).unsqueeze(1))
                if rows.device.type != "cpu" or not bool(trained.all()):  # a CPU check costs no device sync
                    gradient.mul_(trained.unsqueeze(1))
                if half:
                    # Divided before it is rounded to the head's dtype, as the stock backward does.
                    gradient = gradient.div_(divisor).to(logits.dtype)
                del logits
                scale = 1 if half else divisor
                if grad_rows is not None:
                    grad_rows[start:start + chunk_rows] = (torch.matmul(gradient, weight) / scale).to(rows.dtype)
                if grad_weight is not None:
                    grad_weight += (torch.matmul(gradient.t(), piece) / scale).float()
            ctx.save_for_backward(grad_rows, grad_weight)
            ctx.weight_dtype = weight.dtype
            return total / divisor

        @staticmethod
        def backward(ctx: Any, grad_total: Any) -> Any:  # type: ignore[override]
            grad_rows, grad_weight = ctx.saved_tensors
            rows_out = grad_rows * grad_total.to(grad_rows.dtype) if grad_rows is not None else None
            weight_out = (grad_weight * grad_total).to(ctx.weight_dtype) if grad_weight is not None else None
            return rows_out, weight_out, None, None, None

    return HeadCrossEntropy


@dataclass(frozen=True)
class LogitsBudget:
    """How many logits a chunk of the loss may hold at once, and the headroom behind it (recorded in the run)."""

    chunk_logits: int
    headroom_bytes: int | None
    headroom_source: str  # "preflight", "accelerator", "host", or "unknown"

    def describe(self, vocab: int | None = None) -> str:
        """One line for the run's events: the budget, in logits and in positions of `vocab` when known."""
        positions = f" ({max(1, self.chunk_logits // vocab):,} positions)" if vocab else ""
        where = ("no headroom measured" if self.headroom_bytes is None
                 else f"from {self.headroom_bytes / 2**30:.2f} GiB of {self.headroom_source} headroom")
        return (f"at most {self.chunk_logits:,} logits at a time{positions}, their gradients computed as they "
                f"are made; {where}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"chunk_logits": self.chunk_logits, "headroom_bytes": self.headroom_bytes,
                "headroom_source": self.headroom_source}


def chunk_logits_limit(headroom_bytes: int | None, source: str) -> LogitsBudget:
    """How many logits a chunk of the loss may hold at once, given the memory the step leaves free.

    A chunk's logits exist only while the chunk is computed, holding `BYTES_PER_CHUNK_LOGIT`
    each; bigger chunks than `MAX_CHUNK_LOGITS` buy no speed. So the limit is the smaller of
    that and a share of the headroom: `MEASURED_HEADROOM_SHARE` of the preflight's (its measured
    step peak against the usable memory, `source` "preflight"), `FREE_MEMORY_SHARE` of free
    memory read before training (the step is not allocated yet). Without a figure
    (`headroom_bytes` None) it is `MAX_CHUNK_LOGITS`. The loss and gradients are the same
    whatever the chunk; only memory and time change.
    """
    if headroom_bytes is None:
        return LogitsBudget(MAX_CHUNK_LOGITS, None, "unknown")
    share = MEASURED_HEADROOM_SHARE if source == "preflight" else FREE_MEMORY_SHARE
    fits = int(max(0, headroom_bytes) * share) // BYTES_PER_CHUNK_LOGIT
    return LogitsBudget(min(MAX_CHUNK_LOGITS, fits), int(headroom_bytes), source)


@contextmanager
def _head_bypassed(causal_lm: Any, head: Any) -> Iterator[None]:
    """`causal_lm`'s output head replaced by an identity for the duration, then restored."""
    import torch

    causal_lm.set_output_embeddings(torch.nn.Identity())
    try:
        yield
    finally:
        causal_lm.set_output_embeddings(head)
