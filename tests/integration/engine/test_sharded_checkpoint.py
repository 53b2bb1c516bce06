"""Sharded checkpoints: FSDP2 over 4 gloo processes, resumed on 2 and on 1, consolidated for export.

The multi-process runs happen once per module (the `runs` fixture): 4 processes train 2 steps,
save sharded and take a third step; 2 processes load that checkpoint, save it again as 2
shards, take the same third step, and train a LoRA adapter. The tests compare what they wrote,
and do the single-process parts (2 -> 1, consolidation) here, without a process group.
"""

from __future__ import annotations

import json
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from tests.integration.engine import sharded_ranks
from tunedeck.core.errors import ModelLoadError
from tunedeck.engine.distributed.sharded_checkpoint import (
    ADAPTER_WEIGHTS_FILE,
    INFO_FILE,
    MODEL_WEIGHTS_FILE,
    TRAINER_MODEL_DIR,
    consolidate_to_safetensors,
    find_sharded_model,
    load_sharded,
    read_checkpoint_info,
    save_sharded,
)

TOLERANCE = 1e-5


@dataclass(frozen=True)
class Runs:
    """Where the multi-process runs left their checkpoints and results."""

    root: Path
    model_dir: Path

    def tensors(self, name: str) -> dict[str, torch.Tensor]:
        return load_file(str(self.root / f"{name}.safetensors"))

    def numbers(self, name: str) -> dict[str, Any]:
        return dict(json.loads((self.root / f"{name}.json").read_text(encoding="utf-8")))


def _untrained(arch: str, folder: Path) -> Path:
    from tunedeck.demo.tiny_models import create_tiny_model

    # Checkpoints need weights, not a model that learned anything: the factory's pretraining
    # would cost more CPU than everything else here.
    return create_tiny_model(arch, folder, pretrain_steps=0).path


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama from the factory, untrained (random weights of range 0.1)."""
    return _untrained("llama", tmp_path_factory.mktemp("tiny-llama") / "model")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, llama_dir: Path) -> Runs:
    root = tmp_path_factory.mktemp("sharded")
    sharded_ranks.spawn(sharded_ranks.train_and_save, 4, root / "store-4", str(root), str(llama_dir))
    sharded_ranks.spawn(sharded_ranks.resume, 2, root / "store-2", str(root), str(llama_dir))
    return Runs(root, llama_dir)


def _assert_same(expected: dict[str, torch.Tensor], actual: dict[str, torch.Tensor], *, atol: float = 0.0) -> None:
    assert sorted(actual) == sorted(expected)
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, atol=atol, rtol=0.0, msg=lambda text, key=key: f"{key}: {text}")


@pytest.mark.slow
def test_four_processes_write_four_shards_and_the_info_file(runs: Runs) -> None:
    folder = runs.root / "sharded-4"
    info = read_checkpoint_info(folder)
    assert len(list(folder.glob("*.distcp"))) == 4
    assert (info.world_size, info.has_optimizer, info.adapter, info.extra) == (4, True, False, {"step": 2})
    assert "lm_head.weight" in info.model_keys and "model.layers.1.mlp.up_proj.weight" in info.model_keys
    assert find_sharded_model(folder) == folder


@pytest.mark.slow
def test_two_processes_load_the_four_process_checkpoint_exactly(runs: Runs) -> None:
    saved, loaded = runs.tensors("saved"), runs.tensors("loaded")
    saved.pop("logits")
    _assert_same(saved, loaded)
    assert runs.numbers("loaded")["param_groups"] == runs.numbers("saved")["param_groups"]
    assert runs.numbers("loaded")["world_size"] == 4
    assert runs.numbers("loaded")["extra"] == {"step": 2}
    assert len(list((runs.root / "sharded-2").glob("*.distcp"))) == 2


@pytest.mark.slow
def test_a_step_after_resuming_on_two_processes_continues_the_four_process_run(runs: Runs) -> None:
    continued, resumed = runs.numbers("continued"), runs.numbers("resumed")
    assert abs(resumed["loss"] - continued["loss"]) <= TOLERANCE
    _assert_same(runs.tensors("continued"), runs.tensors("resumed"), atol=TOLERANCE)


@pytest.mark.slow
def test_one_plain_process_loads_the_two_process_checkpoint_and_continues(runs: Runs) -> None:
    model = sharded_ranks.load_model(str(runs.model_dir))
    optimizer = sharded_ranks.new_optimizer(model)
    info = load_sharded(runs.root / "sharded-2", model, optimizer)
    assert info.world_size == 2

    state, settings = sharded_ranks.full_state(model, optimizer)
    _assert_same(runs.tensors("loaded"), state)
    assert json.loads(json.dumps(settings))["param_groups"] == runs.numbers("loaded")["param_groups"]

    loss = sharded_ranks.train_step(model, optimizer, 2)
    assert abs(loss - runs.numbers("continued")["loss"]) <= TOLERANCE
    _assert_same(runs.tensors("continued"), sharded_ranks.full_state(model, optimizer)[0], atol=TOLERANCE)


@pytest.mark.slow
def test_consolidated_weights_load_with_transformers_and_give_the_trained_logits(runs: Runs, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = tmp_path / "export"
    weights = consolidate_to_safetensors(runs.root / "sharded-4", out)
    assert weights == out / MODEL_WEIGHTS_FILE
    shutil.copy(runs.model_dir / "config.json", out / "config.json")

    saved = runs.tensors("saved")
    written = load_file(str(weights))
    _assert_same(
        {key.removeprefix("model/"): value for key, value in saved.items() if key.startswith("model/")}, written
    )
    assert all(value.dtype == torch.float32 and value.is_contiguous() for value in written.values())

    model = AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        logits = model(input_ids=sharded_ranks.probe()).logits
    # Same weights; only the thread count of the matrix products differs from the trained model's.
    torch.testing.assert_close(logits, saved["logits"], atol=1e-6, rtol=0.0)


@pytest.mark.slow
def test_a_consolidated_lora_adapter_loads_with_peft_and_gives_the_trained_logits(runs: Runs) -> None:
    from peft import PeftModel, get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    info = read_checkpoint_info(runs.root / "sharded-lora")
    assert (info.adapter, info.adapter_name, info.world_size) == (True, "default", 2)
    # The adapter alone is saved: the frozen base comes back from the base model.
    assert info.model_keys and all(".lora_" in key for key in info.model_keys)
    assert len(list((runs.root / "sharded-lora").glob("*.distcp"))) == 2

    out = runs.root / "lora-export"
    weights = consolidate_to_safetensors(runs.root / "sharded-lora", out)
    assert weights == out / ADAPTER_WEIGHTS_FILE

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(runs.model_dir), out).eval()
    assert sorted(load_file(str(weights))) == sorted(get_peft_model_state_dict(model))
    with torch.no_grad():
        logits = model(input_ids=sharded_ranks.probe()).logits
    torch.testing.assert_close(logits, runs.tensors("lora")["logits"], atol=1e-6, rtol=0.0)
    # The step moved lora_B away from its zero start, so the adapter really is the trained one.
    assert any(value.abs().sum() > 0 for key, value in load_file(str(weights)).items() if "lora_B" in key)


# Single process, no process group: the layouts, names and refusals.


def _trained_llama(model_dir: Path) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = sharded_ranks.load_model(str(model_dir))
    optimizer = sharded_ranks.new_optimizer(model)
    sharded_ranks.train_step(model, optimizer, 0)
    return model, optimizer


def test_a_plain_model_round_trips_without_a_process_group(llama_dir: Path, tmp_path: Path) -> None:
    model, optimizer = _trained_llama(llama_dir)
    # Saved through torch.compile's wrapper, whose `_orig_mod.` must not reach the names.
    info = save_sharded(tmp_path / "ck", torch.compile(model), optimizer, extra={"step": 1})
    assert info.world_size == 1 and (tmp_path / "ck" / INFO_FILE).is_file()
    assert sorted(info.model_keys) == sorted(model.state_dict())

    fresh = sharded_ranks.load_model(str(llama_dir))
    fresh_optimizer = sharded_ranks.new_optimizer(fresh)
    assert load_sharded(tmp_path / "ck", fresh, fresh_optimizer).extra == {"step": 1}
    _assert_same(sharded_ranks.full_state(model, optimizer)[0], sharded_ranks.full_state(fresh, fresh_optimizer)[0])


def test_consolidated_names_match_save_pretrained_with_tied_weights(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(_untrained("gpt2", tmp_path / "gpt2"))
    assert model.lm_head.weight is model.transformer.wte.weight
    save_sharded(tmp_path / "ck", model)
    written = load_file(str(consolidate_to_safetensors(tmp_path / "ck", tmp_path / "out")))
    model.save_pretrained(tmp_path / "reference")
    _assert_same(load_file(str(tmp_path / "reference" / MODEL_WEIGHTS_FILE)), written)


def test_the_trainer_layout_is_found_and_consolidated(llama_dir: Path, tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    # As accelerate's save_fsdp_model (which the Trainer calls under FSDP with a sharded state
    # dict) writes them: the model's state, or a PEFT model's adapter state as peft names it,
    # under "model", in pytorch_model_fsdp_0/ of the checkpoint folder; the optimizer beside.
    model, optimizer = _trained_llama(llama_dir)
    full = tmp_path / "checkpoint-1"
    reference = {key: value.clone() for key, value in get_model_state_dict(model).items()}
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=full / TRAINER_MODEL_DIR)
    dcp.save({"optimizer": optimizer.state_dict()}, checkpoint_id=full / "optimizer_0")
    config = LoraConfig(r=4, lora_alpha=8, target_modules=sharded_ranks.LORA_TARGETS, lora_dropout=0.0)
    lora = get_peft_model(model, config)
    adapter = tmp_path / "checkpoint-2"
    dcp.save({"model": get_peft_model_state_dict(lora)}, checkpoint_id=adapter / TRAINER_MODEL_DIR)

    assert find_sharded_model(full) == full / TRAINER_MODEL_DIR
    assert find_sharded_model(full / TRAINER_MODEL_DIR) == full / TRAINER_MODEL_DIR
    assert find_sharded_model(full / "optimizer_0") is None
    assert find_sharded_model(tmp_path) is None

    written = load_file(str(consolidate_to_safetensors(full, tmp_path / "out", adapter=False)))
    _assert_same(reference, written)
    adapter_weights = consolidate_to_safetensors(adapter, tmp_path / "adapter")
    assert adapter_weights.name == ADAPTER_WEIGHTS_FILE
    _assert_same(get_peft_model_state_dict(lora), load_file(str(adapter_weights)))

    with pytest.raises(ModelLoadError, match="PEFT adapter"):
        consolidate_to_safetensors(adapter, tmp_path / "wrong", adapter=False)
    with pytest.raises(ModelLoadError, match="full model"):
        consolidate_to_safetensors(full, tmp_path / "wrong", adapter=True)


def test_wrapper_prefixes_are_stripped(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    weight = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    state = {"module._orig_mod.layers.0._checkpoint_wrapped_module.weight": weight, "module.head.bias": torch.ones(2)}
    dcp.save({"model": state}, checkpoint_id=tmp_path / "ck" / TRAINER_MODEL_DIR)
    written = load_file(str(consolidate_to_safetensors(tmp_path / "ck", tmp_path / "out")))
    assert sorted(written) == ["head.bias", "layers.0.weight"]
    assert written["layers.0.weight"].dtype == torch.bfloat16 and torch.equal(written["layers.0.weight"], weight)


def test_an_unfinished_save_and_a_crafted_metadata_file_are_refused(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    save_sharded(tmp_path / "ck", model)
    (tmp_path / "ck" / INFO_FILE).unlink()
    assert find_sharded_model(tmp_path / "ck") is None
    with pytest.raises(ModelLoadError, match="did not finish"):
        load_sharded(tmp_path / "ck", model)

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (print, ("code ran",))

    crafted = tmp_path / "crafted" / TRAINER_MODEL_DIR
    crafted.mkdir(parents=True)
    (crafted / ".metadata").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ModelLoadError, match="not allowed"):
        consolidate_to_safetensors(crafted, tmp_path / "out")
