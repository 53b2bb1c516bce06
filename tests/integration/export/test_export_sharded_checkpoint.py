"""A checkpoint saved as shards (as FSDP saves one) exports like any other: consolidated into safetensors first."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from tunedeck.engine.distributed.sharded_checkpoint import find_sharded_model, save_sharded
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.source import locate_model_folder

from .conftest import MID_RUN_STEP


def test_a_sharded_adapter_checkpoint_exports_the_same_adapter(
    lora_run: Path, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    run = shutil.copytree(lora_run, tmp_path / "run")
    checkpoint = run / "checkpoints" / f"checkpoint-{MID_RUN_STEP}"
    expected = load_file(checkpoint / "adapter_model.safetensors")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir)), str(checkpoint))
    save_sharded(checkpoint / "sharded", model)  # one process: one shard, the layout FSDP writes per rank
    (checkpoint / "adapter_model.safetensors").unlink()
    assert find_sharded_model(checkpoint) == checkpoint / "sharded"

    result = export_model(locate_model_folder(run, MID_RUN_STEP), "adapter", tmp_path / "export")
    assert result.contents == "adapter" and "adapter_model.safetensors" in result.files
    assert not any(name.endswith(".distcp") for name in result.files)  # no shard reaches the export
    exported = load_file(tmp_path / "export" / "adapter_model.safetensors")
    assert exported.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(exported[name], tensor), name
    assert not list(checkpoint.parent.glob(".consolidated-*"))  # the scratch copy is gone
