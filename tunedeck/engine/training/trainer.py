"""`TunedeckTrainer`: the transformers Trainer with tunedeck's two fast paths, each behind an explicit flag.

- `count_tokens_on_host`: tokens seen come from the host-side int that `TokenCountingCollator`
  adds under `TOKEN_COUNT_KEY` (see `tunedeck.engine.speedups.token_counting`), not from a device read
  per micro-batch; the key is removed before the batch reaches the model.
- `chunked_loss`: training steps compute the loss with `chunked_causal_lm_loss` (see
  `tunedeck.engine.speedups.chunked_loss`): same loss and gradients, far less memory for the logits.

With a flag off, or where a fast path does not apply to a call, the override hands the call
to the Trainer's own method unchanged. Both paths override private Trainer hooks, which is why
`pyproject.toml` pins the transformers major version; `OVERRIDDEN_HOOKS` and `READ_ATTRIBUTES`
list what this class relies on, and a unit test checks them against the installed Trainer.

Importing this module imports `transformers.Trainer` (as the callback modules import
`TrainerCallback`): callers that must stay light import it inside the function that builds
the trainer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transformers import Trainer

from tunedeck.engine.speedups import chunked_loss as _chunked_loss
from tunedeck.engine.speedups.token_counting import TOKEN_COUNT_KEY

if TYPE_CHECKING:
    import torch

# The Trainer hooks overridden here, with the parameters this class passes them by name or position.
OVERRIDDEN_HOOKS: dict[str, tuple[str, ...]] = {
    "_prepare_inputs": ("inputs",),
    "_track_num_input_tokens": ("inputs",),
    "log": ("logs", "start_time"),
    "_save_checkpoint": ("model", "trial"),
    "compute_loss": ("model", "inputs", "return_outputs", "num_items_in_batch"),
}
# What the overrides read from the trainer (dotted: an attribute of an attribute).
READ_ATTRIBUTES: tuple[str, ...] = (
    "args.average_tokens_across_devices",
    "accelerator.num_processes",
    "label_smoother",
    "compute_loss_func",
    "model_accepts_loss_kwargs",
    "accelerator",
    "args.n_gpu",
    "args.include_num_input_tokens_seen",
    "args.world_size",
    "args.device",
    "state.num_input_tokens_seen",
)


class TunedeckTrainer(Trainer):
    """The transformers Trainer, with host-side token counting and the chunked loss as explicit options.

    `count_tokens_on_host` must be on exactly when the data collator is wrapped in
    `TokenCountingCollator` (`token_counting(collator, enabled)`). On several processes each
    counts its own batches and the counts are summed across processes when the trainer logs or
    saves (one small all-reduce there, none per step). `chunked_loss` should come from
    `decide_chunked_loss`, and `chunk_logits` (how many logits the loss holds at once) from
    `chunk_logits_limit`.
    Every other argument is the Trainer's.
    """

    def __init__(
        self,
        *args: Any,
        count_tokens_on_host: bool,
        chunked_loss: bool,
        chunk_logits: int = _chunked_loss.MAX_CHUNK_LOGITS,
        **kwargs: Any,
    ) -> None:
        # Set before the Trainer's own setup, in case anything there reaches an overridden hook.
        self.count_tokens_on_host = count_tokens_on_host
        self.chunked_loss = chunked_loss
        self.chunk_logits = chunk_logits
        self._tokens_not_summed = 0  # this process's tokens since the last sum across processes
        super().__init__(*args, **kwargs)
        if self.model_accepts_loss_kwargs and _computes_its_own_mean_loss(self.model):
            # A classification head takes the step's token count in its keyword arguments and ignores
            # it: its loss is the micro-batch's mean. Counted as normalised, it would skip the division
            # by the accumulation steps, and the gradients of an accumulated step would be that many
            # times those of one batch (the accumulation check before training measures it).
            self.model_accepts_loss_kwargs = False

    def _prepare_inputs(self, inputs: dict[str, torch.Tensor | Any]) -> dict[str, torch.Tensor | Any]:
        if self.count_tokens_on_host and isinstance(inputs, dict) and TOKEN_COUNT_KEY in inputs:
            inputs = {key: value for key, value in inputs.items() if key != TOKEN_COUNT_KEY}
        return super()._prepare_inputs(inputs)

    def _track_num_input_tokens(self, inputs: Any) -> None:
        count = inputs.get(TOKEN_COUNT_KEY) if self.count_tokens_on_host and isinstance(inputs, dict) else None
        if count is None:
            super()._track_num_input_tokens(inputs)
        elif self.args.include_num_input_tokens_seen == "no":
            return
        elif self.args.world_size > 1:
            self._tokens_not_summed += int(count)
        else:
            self.state.num_input_tokens_seen += int(count)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        self._sum_token_counts()
        super().log(logs, start_time)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        self._sum_token_counts()  # the saved state counts every token up to its step
        super()._save_checkpoint(model, trial)

    def _sum_token_counts(self) -> None:
        """Add every process's host-side token count since the last call (all processes call it together)."""
        if not self.count_tokens_on_host or self.args.world_size <= 1:
            return
        import torch
        import torch.distributed as dist

        pending = torch.tensor([self._tokens_not_summed], dtype=torch.int64, device=self.args.device)
        dist.all_reduce(pending, op=dist.ReduceOp.SUM)
        self.state.num_input_tokens_seen += int(pending.item())
        self._tokens_not_summed = 0

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor | Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        """The training loss chunk by chunk over labelled tokens when `chunked_loss` is on and applies.

        Evaluation, `return_outputs` (metrics need logits), label smoothing, a custom loss
        function and DataParallel (several GPUs in one process) keep the Trainer's own loss;
        a DistributedDataParallel wrapper runs the body through its own forward.
        """
        if (
            not self.chunked_loss
            or return_outputs
            or not model.training
            or "labels" not in inputs
            or self.label_smoother is not None
            or self.compute_loss_func is not None
            or self.args.n_gpu > 1
        ):
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )
        # The trainer hands num_items_in_batch to the model only when it accepts loss kwargs,
        # and divides the loss by the accumulation steps otherwise: the same choice here keeps
        # the gradients and the logged loss those of the stock path.
        items = num_items_in_batch if self.model_accepts_loss_kwargs else None
        # accelerate puts autocast around the model's forward; the parts called here are
        # outside it, so mixed precision is applied the same way explicitly.
        inner = self.accelerator.unwrap_model(model)
        with self.accelerator.autocast():
            # Under DDP the body runs through the wrapper, whose forward arms the gradient synchronisation.
            # Looked up on the module at call time so tests can count the calls.
            loss: torch.Tensor = _chunked_loss.chunked_causal_lm_loss(
                inner, inputs, items, chunk_logits=self.chunk_logits, wrapper=model if inner is not model else None
            )
        if self.args.average_tokens_across_devices and items is not None:
            # As the stock path: num_items_in_batch counts every process's tokens and DDP averages
            # the gradients over processes, so each process's loss is scaled back up by their number.
            loss = loss * self.accelerator.num_processes
        return loss


def _computes_its_own_mean_loss(model: Any) -> bool:
    """Whether `model` (under its peft wrapper) is a sequence classifier, whose loss ignores the step's token count."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return type(inner).__name__.endswith("ForSequenceClassification")
