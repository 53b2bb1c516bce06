"""Loading a finished job's model (a `final/` folder) back for evaluation, outside the training run.

`final/` holds either full weights or a LoRA adapter (`adapter_config.json`), the
tokenizer, and `tunedeck_config.json` (the run's resolved config: task, label2id).
An adapter is applied on top of the base model it was trained on, which the
caller passes (pinned by the job's base-model record).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.core.errors import ModelLoadError
from tunedeck.core.rundir import CHECKPOINT_CONFIG

RUN_CONFIG_FILE = CHECKPOINT_CONFIG
ADAPTER_CONFIG_FILE = "adapter_config.json"


@dataclass
class TrainedModel:
    """A trained model ready to evaluate, with what its run recorded about it."""

    model: Any
    tokenizer: Any
    task: str
    data_kind: str | None
    label2id: dict[str, int] | None
    run_config: dict[str, Any]


def read_run_config(final_dir: Path) -> dict[str, Any]:
    """The resolved run config saved beside the final weights (empty when absent)."""
    path = Path(final_dir) / RUN_CONFIG_FILE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def load_trained_model(
    final_dir: Path, *, base_model_dir: Path | None = None, trust_remote_code: bool = False
) -> TrainedModel:
    """Load `final_dir` (full weights, or an adapter over `base_model_dir`) in evaluation mode."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    final_dir = Path(final_dir)
    run_config = read_run_config(final_dir)
    task = str(run_config.get("task") or (run_config.get("config") or {}).get("task") or "sft")
    label2id = run_config.get("label2id") or None
    auto_class: Any = AutoModelForSequenceClassification if task == "classification" else AutoModelForCausalLM
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(final_dir), trust_remote_code=trust_remote_code)
    except Exception as error:  # tokenizer loading raises OSError, ValueError, KeyError...
        raise ModelLoadError(f"{final_dir}: cannot load the tokenizer: {error}") from error
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "use_safetensors": True}
    if label2id:
        kwargs.update(
            num_labels=len(label2id),
            label2id=dict(label2id),
            id2label={int(index): label for label, index in label2id.items()},
            pad_token_id=tokenizer.pad_token_id,
        )
    adapter = (final_dir / ADAPTER_CONFIG_FILE).is_file()
    try:
        if adapter:
            if base_model_dir is None:
                raise ModelLoadError(f"{final_dir} holds an adapter: the base model folder is needed to load it")
            from peft import PeftModel

            base = auto_class.from_pretrained(str(base_model_dir), **kwargs)
            model = PeftModel.from_pretrained(base, str(final_dir))
        else:
            model = auto_class.from_pretrained(str(final_dir), **kwargs)
    except ModelLoadError:
        raise
    except Exception as error:
        raise ModelLoadError(f"{final_dir}: cannot load the trained model: {error}") from error
    model.eval()
    return TrainedModel(
        model=model,
        tokenizer=tokenizer,
        task=task,
        data_kind=run_config.get("data_kind"),
        label2id=dict(label2id) if label2id else None,
        run_config=run_config,
    )
