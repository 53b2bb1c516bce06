"""A merged model: the adapter folded into its pinned base, in the base's dtype, saved as safetensors.

The result loads with plain `AutoModelForCausalLM.from_pretrained(folder)`. A QLoRA adapter
was trained against 4-bit NF4 weights; it is merged onto the full-precision base (the
de-quantised weights), which is not exactly what it learned to correct, so the merge
carries a warning and should be evaluated before use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunedeck.engine.export.model_files import copy_tokenizer
from tunedeck.engine.export.source import ModelFolder, RunDocuments
from tunedeck.engine.models.model_source import ResolvedModel
from tunedeck.engine.models.pinning import check_base, read_pin

QLORA_WARNING = (
    "this QLoRA adapter was trained against the 4-bit quantised base; it is merged onto the de-quantised "
    "base in its own dtype, so the merged model can behave differently from the adapter on the quantised "
    "base: evaluate the merged model before relying on it"
)


def write_merged(
    folder: ModelFolder,
    documents: RunDocuments,
    base: ResolvedModel | None,
    target: Path,
    *,
    max_shard_size: str,
    allow_base_mismatch: bool = False,
) -> tuple[list[str], list[str]]:
    """Write the merged (or, for a full fine-tune, re-saved) model into `target`; (file names, warnings)."""
    from tunedeck.eval.trained_model import load_trained_model

    trust = bool(documents.training_config.get("trust_remote_code", False))
    warnings_out: list[str] = []
    if folder.is_adapter:
        if base is None:
            raise ValueError("merging an adapter needs its base model")
        # The pin check of `load_adapter_onto`, keeping its findings to report with the export.
        warnings_out += check_base(
            read_pin(folder.path),
            base,
            what=f"the adapter in {folder.path}",
            allow_mismatch=allow_base_mismatch,
            trust_remote_code=trust,
        )
        trained = load_trained_model(folder.path, base_model_dir=base.path, trust_remote_code=trust)
        model: Any = trained.model.merge_and_unload()
        if documents.training_config.get("peft_method") == "qlora":
            warnings_out.append(QLORA_WARNING)
    else:
        model = load_trained_model(folder.path, trust_remote_code=trust).model
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target), max_shard_size=max_shard_size)  # safetensors: the only format saved
    copy_tokenizer(folder.path, target)
    return sorted(path.name for path in target.iterdir()), warnings_out
