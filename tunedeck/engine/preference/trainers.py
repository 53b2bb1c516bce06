"""TRL's DPO, ORPO and KTO trainers, fed with rows the data layer already tokenized.

Each subclass replaces only the trainer's own dataset preparation: tokenization, truncation
and the rows it leaves out are the data layer's (`tunedeck.data.preference_tokens`), which
renders exactly as these trainers do and names every row it cuts or drops — where the
trainers' own preparation would drop fully truncated rows without a word. Everything else
(losses, reference handling, metrics, checkpoints) is TRL's.

Importing this module imports TRL: callers import it inside the function that builds a trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datasets import Dataset
from trl import DPOTrainer, KTOTrainer
from trl.experimental.orpo import ORPOTrainer

from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.engine.models.init_from import save_only_trained_adapter
from tunedeck.engine.preference.reference import REFERENCE_ADAPTER

REFERENCE_LOGPS = ("ref_chosen_logps", "ref_rejected_logps")


def as_dataset(features: Sequence[dict[str, Any]] | None) -> Dataset | None:
    """Tokenized examples as the `datasets.Dataset` the trainers take (None stays None)."""
    if features is None:
        return None
    return Dataset.from_list([dict(feature) for feature in features])


class KeptReferenceAdapter:
    """The model's frozen "ref" adapter, kept across the trainers built on the same model.

    With an adapter and no reference model, TRL's dpo and kto trainers add a "ref" adapter
    copied from the trained one, and refuse a model that has one already: a second trainer
    on the same model (an out-of-memory retry, the checks before training) would fail, and
    a continued adapter's starting weights would be lost. So an existing "ref" adapter is set
    aside before the trainer adds its own, and its weights are put back after: the reference
    stays the adapter the run started from.
    """

    def __init__(self, model: Any) -> None:
        import torch

        self.saved: dict[str, Any] = {}
        peft_config = getattr(model, "peft_config", None)
        if not isinstance(peft_config, dict) or REFERENCE_ADAPTER not in peft_config:
            return
        marker = f".{REFERENCE_ADAPTER}."
        with torch.no_grad():
            self.saved = {
                name: parameter.detach().clone() for name, parameter in model.named_parameters() if marker in name
            }
        model.delete_adapter(REFERENCE_ADAPTER)

    def restore(self, model: Any) -> None:
        """Copy the kept weights into the "ref" adapter the trainer added; saves then skip that adapter.

        The reference is where the run started, not what it trained: checkpoints and final/ hold
        the trained adapter alone (an export is one adapter that loads with plain peft), and a
        resumed run rebuilds the reference from the same start.
        """
        peft_config = getattr(model, "peft_config", None)
        if isinstance(peft_config, dict) and REFERENCE_ADAPTER in peft_config:
            save_only_trained_adapter(model)
        if not self.saved:
            return
        import torch

        parameters = dict(model.named_parameters())
        with torch.no_grad():
            for name, tensor in self.saved.items():
                parameters[name].copy_(tensor)
        self.saved = {}


class TunedeckDPOTrainer(DPOTrainer):
    """DPO on pre-tokenized pairs; `reference_free` runs take the reference log-probabilities as zero."""

    def __init__(self, *args: Any, reference_free: bool = False, **kwargs: Any) -> None:
        self.reference_free = reference_free
        kept = KeptReferenceAdapter(kwargs["model"])
        super().__init__(*args, **kwargs)
        kept.restore(self.model)

    def _prepare_dataset(self, dataset: Any, processing_class: Any, args: Any, dataset_name: str) -> Any:
        return dataset

    def _precompute_ref_logps(self, dataset: Any, name: str, batch_size: int) -> Any:
        if not self.reference_free:
            return super()._precompute_ref_logps(dataset, name, batch_size)
        zeros = [0.0] * len(dataset)
        for column in REFERENCE_LOGPS:
            if column not in dataset.column_names:
                dataset = dataset.add_column(column, zeros)
        return dataset


class TunedeckKTOTrainer(KTOTrainer):
    """KTO on pre-tokenized (prompt, completion, desirable) rows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kept = KeptReferenceAdapter(kwargs["model"])
        super().__init__(*args, **kwargs)
        kept.restore(self.model)

    def _prepare_dataset(self, dataset: Any, processing_class: Any, args: Any, dataset_name: str) -> Any:
        if not self.calculate_KL:
            return dataset

        # As the trainer's own preparation: the KL term pairs each prompt with its batch neighbour's
        # completion, the completions rotated by one within each training micro-batch.
        def add_kl_completion_ids(examples: dict[str, list[Any]]) -> dict[str, list[Any]]:
            examples["KL_completion_ids"] = [examples["completion_ids"][-1], *examples["completion_ids"][:-1]]
            return examples

        return dataset.map(add_kl_completion_ids, batched=True, batch_size=args.per_device_train_batch_size)


class TunedeckORPOTrainer(ORPOTrainer):
    """ORPO on pre-tokenized pairs: each row's ids become the trainer's padded-answer columns."""

    def tokenize_row(self, feature: dict[str, Any], model: Any = None) -> dict[str, Any]:
        prompt, chosen, rejected = feature["prompt_ids"], feature["chosen_ids"], feature["rejected_ids"]
        out: dict[str, Any] = {"prompt_input_ids": list(prompt), "prompt_attention_mask": [1] * len(prompt)}
        for side, answer in (("chosen", chosen), ("rejected", rejected)):
            ids = list(prompt) + list(answer)
            out[f"{side}_input_ids"] = ids
            out[f"{side}_attention_mask"] = [1] * len(ids)
            out[f"{side}_labels"] = [IGNORE_INDEX] * len(prompt) + list(answer)
        return out

    def _track_num_input_tokens(self, inputs: Any) -> None:
        # The batch has no input_ids of its own: its tokens are those of both padded answers.
        if self.args.include_num_input_tokens_seen == "no":
            return
        import torch

        count = sum(inputs[f"{side}_attention_mask"].sum() for side in ("chosen", "rejected"))
        seen = self.accelerator.gather(torch.as_tensor(count, device=self.args.device, dtype=torch.int64))
        self.state.num_input_tokens_seen += int(seen.sum().item())


def build_preference_trainer(
    task: str,
    *,
    model: Any,
    reference: Any,
    args: Any,
    train: Sequence[dict[str, Any]],
    validation: Sequence[dict[str, Any]] | None,
    tokenizer: Any,
    callbacks: list[Any],
    reference_free: bool = False,
) -> Any:
    """The trainer of preference `task` on tokenized examples (`reference`: a frozen model, or None).

    With None and an adapter, the reference is a frozen copy of the starting adapter (the "ref"
    adapter, see `KeptReferenceAdapter`): no second copy of the model in memory.
    """
    kwargs: dict[str, Any] = {
        "model": model,
        "args": args,
        "train_dataset": as_dataset(train),
        "eval_dataset": as_dataset(validation),
        "processing_class": tokenizer,
        "callbacks": callbacks,
    }
    if task == "dpo":
        return TunedeckDPOTrainer(ref_model=reference, reference_free=reference_free, **kwargs)
    if task == "kto":
        return TunedeckKTOTrainer(ref_model=reference, **kwargs)
    if task == "orpo":
        return TunedeckORPOTrainer(**kwargs)
    raise ValueError(f"task {task!r} is not a preference task")
