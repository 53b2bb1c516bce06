"""Exports load in plain peft / transformers and give tunedeck's own logits (fp32, within 1e-5)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.engine.export.exporter import FULL_MODEL_NOTE, export_model
from tunedeck.engine.export.merge import QLORA_WARNING, write_merged
from tunedeck.engine.export.source import RunDocuments, locate_model_folder
from tunedeck.engine.models.model_source import ModelRef, fingerprint_model_dir, resolve_model
from tunedeck.engine.models.pinning import PIN_FILE, load_adapter_onto, tokenizer_sha256
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

TOLERANCE = 1e-5


def _logits(model: Any, tokenizer: Any) -> torch.Tensor:
    batch = tokenizer(["What is two plus two?", "Name a colour of the sky. Blue."], return_tensors="pt", padding=True)
    with torch.no_grad():
        return model(**batch).logits.float()


def test_training_final_adapter_is_pinned_to_its_base(lora_run: Path, tiny_llama_dir: Path) -> None:
    pin = json.loads((lora_run / "final" / PIN_FILE).read_text())
    assert pin["source"] == "local" and pin["model_id"] == str(tiny_llama_dir.resolve())
    assert pin["fingerprint"] == fingerprint_model_dir(tiny_llama_dir)
    assert pin["tokenizer_sha256"] == tokenizer_sha256(tiny_llama_dir)


def test_adapter_export_loads_in_plain_peft_with_the_same_logits(
    lora_run: Path, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "adapter"
    result = export_model(locate_model_folder(lora_run), "adapter", out)
    assert result.contents == "adapter"
    assert {"adapter_model.safetensors", "adapter_config.json", PIN_FILE, "README.md"} <= set(result.files)
    assert not any(name.endswith((".pt", ".pth", ".bin")) for name in result.files)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = LoraConfig.from_pretrained(str(out))  # peft's own fields intact, no unknown keys
    assert config.r == 8 and config.lora_alpha == 16
    assert not [w for w in caught if "Unexpected keyword" in str(w.message)]

    ours = load_adapter_onto(tiny_llama_dir, out)
    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir))
    plain = PeftModel.from_pretrained(base, str(out)).eval()
    assert next(plain.parameters()).dtype == torch.float32
    expected = _logits(ours.model, ours.tokenizer)
    assert torch.allclose(_logits(plain, ours.tokenizer), expected, atol=TOLERANCE, rtol=0)
    with plain.disable_adapter():
        untrained = _logits(plain, ours.tokenizer)
    assert (untrained - expected).abs().max() > 1e-2  # the adapter changes the model: the check has teeth


def test_merged_export_loads_in_plain_transformers_sharded(
    lora_run: Path, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "merged"
    result = export_model(locate_model_folder(lora_run), "merged", out, max_shard_size="300KB")
    assert result.contents == "merged_model" and result.warnings == []
    shards = sorted(out.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and (out / "model.safetensors.index.json").is_file()
    assert not (out / "adapter_config.json").exists()

    ours = load_adapter_onto(tiny_llama_dir, lora_run / "final")
    plain = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    assert next(plain.parameters()).dtype == torch.float32  # the base's dtype
    assert torch.allclose(_logits(plain, ours.tokenizer), _logits(ours.model, ours.tokenizer), atol=TOLERANCE, rtol=0)


def test_qlora_adapter_merge_carries_the_quality_warning(lora_run: Path, tiny_llama_dir: Path, tmp_path: Path) -> None:
    # QLoRA needs CUDA to train; the merge path only differs by the recorded method, so a LoRA adapter stands in.
    documents = RunDocuments(config={"config": {"use_peft": True, "peft_method": "qlora"}})
    base = resolve_model(ModelRef(str(tiny_llama_dir)))
    files, warnings_out = write_merged(
        locate_model_folder(lora_run), documents, base, tmp_path / "merged", max_shard_size="5GB"
    )
    assert warnings_out == [QLORA_WARNING] and "model.safetensors" in files


def test_full_fine_tune_exports_the_full_model_for_adapter_and_merged(tiny_llama_dir: Path, tmp_path: Path) -> None:
    config = fast_config(use_peft=False, learning_rate=1e-3)
    run = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), write_chat(tmp_path, 16), tmp_path / "run"))
    assert run.status == "succeeded" and run.global_step == 2
    folder = locate_model_folder(tmp_path / "run")
    assert not folder.is_adapter
    adapter = export_model(folder, "adapter", tmp_path / "adapter")
    merged = export_model(folder, "merged", tmp_path / "merged")
    for result in (adapter, merged):
        assert result.contents == "full_model" and result.warnings == [FULL_MODEL_NOTE]
        assert "both hold the full model" in (result.out / "README.md").read_text()
        assert result.pin is not None and result.pin["fingerprint"] == fingerprint_model_dir(tiny_llama_dir)
    trained = AutoModelForCausalLM.from_pretrained(str(tmp_path / "run" / "final")).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "run" / "final"))
    for out in (adapter.out, merged.out):
        plain = AutoModelForCausalLM.from_pretrained(str(out)).eval()
        assert torch.allclose(_logits(plain, tokenizer), _logits(trained, tokenizer), atol=TOLERANCE, rtol=0)
