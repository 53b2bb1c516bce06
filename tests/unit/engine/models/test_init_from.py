"""Starting a run from another job's model: adapter continued (with a frozen `ref` copy), merged, or full weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError, ModelLoadError
from tunedeck.engine.host.hardware import detect_hardware
from tunedeck.engine.models.init_from import REFERENCE_ADAPTER, require_starting_model
from tunedeck.engine.models.model_loading import LoadedModel, load_model, load_tokenizer
from tunedeck.engine.models.model_source import ModelRef, resolve_model
from tunedeck.engine.models.pinning import read_pin

TINY = {"max_length": 64, "mixed_precision": "fp32", "lora_dropout": 0.0}


def _load(base_dir: Path, init_from: Path | None, **config: Any) -> LoadedModel:
    resolved = resolve_model(ModelRef(str(base_dir)))
    settings = validate_config({**TINY, **config})
    tokenizer = load_tokenizer(resolved, settings)
    return load_model(resolved, settings, detect_hardware(), "fp32", tokenizer, None, init_from)


def _lora_weights(model: Any, adapter: str) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if f".{adapter}." in name}


@pytest.fixture(scope="module")
def parent_adapter(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An adapter (rank 4) with non-zero weights, as a parent job's final/ holds it."""
    loaded = _load(tiny_llama_dir, None, lora_r=4, lora_alpha=8)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in loaded.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.05)
    folder = tmp_path_factory.mktemp("parent") / "final"
    loaded.model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def parent_weights(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Full weights of the same architecture, shifted from the base's, as a full fine-tune's final/ holds them."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir))
    with torch.no_grad():
        model.lm_head.weight.add_(0.5)
    folder = tmp_path_factory.mktemp("parent-full") / "final"
    model.save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_llama_dir / name).is_file():
            shutil.copyfile(tiny_llama_dir / name, folder / name)
    return folder


def test_an_adapter_parent_is_continued_with_its_own_rank(tiny_llama_dir: Path, parent_adapter: Path) -> None:
    loaded = _load(tiny_llama_dir, parent_adapter, lora_r=8)
    model = loaded.model
    assert model.peft_config["default"].r == 4  # the parent's rank, not the 8 asked for
    assert loaded.start is not None and loaded.start.how == "adapter"
    assert any("lora_r 8 is not applied" in note for note in loaded.start.notes)
    assert REFERENCE_ADAPTER not in model.peft_config  # sft compares with no reference
    saved = {k.replace(".default", ""): v for k, v in _lora_weights(model, "default").items()}
    assert saved and all(torch.count_nonzero(v) for k, v in saved.items() if "lora_B" in k)
    assert loaded.trainable_parameters == sum(v.numel() for v in saved.values())


def test_a_reference_task_gets_a_frozen_ref_adapter_that_is_never_saved(
    tiny_llama_dir: Path, parent_adapter: Path, tmp_path: Path
) -> None:
    loaded = _load(tiny_llama_dir, parent_adapter, task="dpo")
    model = loaded.model
    assert set(model.peft_config) == {"default", REFERENCE_ADAPTER}
    assert model.active_adapter == "default"
    ref = {n: p for n, p in model.named_parameters() if f".{REFERENCE_ADAPTER}." in n}
    trained = {n: p for n, p in model.named_parameters() if ".default." in n}
    assert ref and not any(p.requires_grad for p in ref.values())
    assert trained and all(p.requires_grad for p in trained.values())
    for name, parameter in trained.items():  # both start as the parent's adapter
        assert torch.equal(parameter, ref[name.replace(".default.", f".{REFERENCE_ADAPTER}.")])

    with torch.no_grad():  # a training step moves the trained adapter only
        for parameter in trained.values():
            parameter.add_(0.01)
    checkpoint = tmp_path / "checkpoint-2"
    model.save_pretrained(str(checkpoint))
    assert (checkpoint / "adapter_model.safetensors").is_file()
    assert not (checkpoint / REFERENCE_ADAPTER).exists()

    # A resumed run rebuilds the model from the parent, then the Trainer loads the checkpoint's adapter.
    resumed = _load(tiny_llama_dir, parent_adapter, task="dpo").model
    resumed.load_adapter(str(checkpoint), resumed.active_adapter, is_trainable=True)
    assert set(resumed.peft_config) == {"default", REFERENCE_ADAPTER}
    for name, parameter in resumed.named_parameters():
        if ".default." in name:
            assert torch.equal(parameter, trained[name]) and parameter.requires_grad
        elif f".{REFERENCE_ADAPTER}." in name:
            assert torch.equal(parameter, ref[name]) and not parameter.requires_grad


def test_reference_free_loads_no_ref_adapter(tiny_llama_dir: Path, parent_adapter: Path) -> None:
    loaded = _load(tiny_llama_dir, parent_adapter, task="dpo", reference_free=True)
    assert REFERENCE_ADAPTER not in loaded.model.peft_config


def test_a_full_fine_tune_merges_the_parent_adapter_first(tiny_llama_dir: Path, parent_adapter: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    loaded = _load(tiny_llama_dir, parent_adapter, use_peft=False)
    assert loaded.start is not None and loaded.start.how == "merged_adapter"
    assert not hasattr(loaded.model, "peft_config")
    assert loaded.trainable_parameters == loaded.total_parameters
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir)), str(parent_adapter)
    )
    tokens = torch.tensor([[1, 5, 9, 13]])
    with torch.no_grad():
        assert torch.allclose(loaded.model(tokens).logits, reference(tokens).logits, atol=1e-5)


def test_parent_full_weights_are_the_starting_model(tiny_llama_dir: Path, parent_weights: Path) -> None:
    from transformers import AutoModelForCausalLM

    loaded = _load(tiny_llama_dir, parent_weights)
    assert loaded.start is not None and loaded.start.how == "weights"
    assert loaded.start.parent_weights_fingerprint
    expected = AutoModelForCausalLM.from_pretrained(str(parent_weights)).lm_head.weight
    assert torch.equal(loaded.model.base_model.model.lm_head.weight, expected)  # under a new adapter
    full = _load(tiny_llama_dir, parent_weights, use_peft=False)
    assert torch.equal(full.model.lm_head.weight, expected)


def test_parent_weights_of_another_architecture_are_refused(
    tiny_llama_dir: Path, parent_weights: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(parent_weights, other)
    config = json.loads((other / "config.json").read_text())
    config["hidden_size"] = config["hidden_size"] * 2
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="not the base model's architecture: hidden_size"):
        _load(tiny_llama_dir, other)


def test_a_folder_with_no_model_is_refused(tiny_llama_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="neither an adapter"):
        _load(tiny_llama_dir, tmp_path)


def _run_config(base_dir: Path, how: str) -> dict[str, Any]:
    resolved = resolve_model(ModelRef(str(base_dir)))
    return {
        "config": {},
        "model": resolved.to_dict(),
        "job_id": "job-child",
        "lineage": [
            {"name": str(resolved.path), "source": "local", "revision": None, "fingerprint": resolved.fingerprint},
            {"job_id": "job-parent", "checkpoint": "final", "model_form": "merged", "weights_sha256": "a" * 64},
        ],
        "init_from": {"how": how, "parent_form": "merged", "parent_weights_fingerprint": "b" * 64, "notes": []},
    }


def _final_folder(tiny_llama_dir: Path, parent_adapter: Path, tmp_path: Path) -> Path:
    """A final/ folder holding the parent's adapter and the base's tokenizer files."""
    folder = tmp_path / "final"
    shutil.copytree(parent_adapter, folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_llama_dir / name).is_file():
            shutil.copyfile(tiny_llama_dir / name, folder / name)
    return folder


def test_the_pin_names_the_chain_and_which_base_is_right(
    tiny_llama_dir: Path, parent_adapter: Path, tmp_path: Path
) -> None:
    folder = _final_folder(tiny_llama_dir, parent_adapter, tmp_path)
    (folder / "tunedeck_config.json").write_text(json.dumps(_run_config(tiny_llama_dir, "weights")))
    pin = read_pin(folder)
    assert pin is not None and pin.base_kind == "parent_weights"
    assert pin.fingerprint == "b" * 64 and pin.model_id == "job job-parent final weights"
    assert pin.chain is not None and [entry.get("job_id") for entry in pin.chain] == [None, "job-parent", "job-child"]
    assert "job job-parent (final, merged) → job job-child (adapter)" in (pin.describe_chain() or "")

    (folder / "tunedeck_config.json").write_text(json.dumps(_run_config(tiny_llama_dir, "adapter")))
    continued = read_pin(folder)
    assert continued is not None and continued.base_kind == "base_model"
    assert continued.fingerprint == resolve_model(ModelRef(str(tiny_llama_dir))).fingerprint
    assert continued.to_dict()["chain"][-1] == {"job_id": "job-child", "model_form": "adapter"}


def test_a_run_started_by_hand_from_full_weights_is_pinned_to_them(
    tiny_llama_dir: Path, parent_adapter: Path, tmp_path: Path
) -> None:
    folder = _final_folder(tiny_llama_dir, parent_adapter, tmp_path)
    run_config = {**_run_config(tiny_llama_dir, "weights"), "lineage": None, "job_id": None}
    (folder / "tunedeck_config.json").write_text(json.dumps(run_config))
    pin = read_pin(folder)
    assert pin is not None and pin.base_kind == "parent_weights" and pin.chain is None
    assert pin.model_id == "the starting weights" and pin.to_dict()["base_kind"] == "parent_weights"
    assert "the full weights of the model it started from" in pin.describe()


def test_a_config_naming_a_job_needs_its_model() -> None:
    config = validate_config({**TINY, "init_from_job": "job_abc"})
    with pytest.raises(ConfigError, match="this run was not given that job's model"):
        require_starting_model(config, None)
    require_starting_model(config, Path("/runs/parent/final"))


def test_an_adapter_on_parent_weights_loads_only_onto_those_weights(tiny_llama_dir: Path, parent_weights: Path) -> None:
    from tunedeck.engine.models.model_source import fingerprint_model_dir
    from tunedeck.engine.models.pinning import BasePin, base_mismatches

    pin = BasePin("job job-parent final weights", "local", None, fingerprint_model_dir(parent_weights), None,
                  base_kind="parent_weights")  # fmt: skip
    assert base_mismatches(pin, resolve_model(ModelRef(str(parent_weights))), what="the adapter") == []
    [problem] = base_mismatches(pin, resolve_model(ModelRef(str(tiny_llama_dir))), what="the adapter")
    assert "the full weights of the model it started from" in problem


def test_the_run_spec_carries_the_starting_model_and_its_chain(tmp_path: Path) -> None:
    from tunedeck.engine.training.run_spec import RunSpec

    lineage = [{"name": "/models/base", "revision": None}, {"job_id": "job_a", "checkpoint": "final"}]
    data = {"model": {"name": "/models/base"}, "train": "t.jsonl", "out": str(tmp_path / "run"),
            "init_from": "/inputs/init_from/model", "lineage": lineage, "job_id": "job_b"}  # fmt: skip
    spec = RunSpec.from_dict(data)
    assert spec.init_from == Path("/inputs/init_from/model") and spec.lineage == lineage and spec.job_id == "job_b"
    assert RunSpec.from_dict(spec.to_dict()).lineage == lineage
    with pytest.raises(ConfigError, match="lineage"):
        RunSpec.from_dict({**data, "lineage": {"job_id": "job_a"}})


def test_an_adapter_that_was_trained_on_full_weights_is_not_continued(
    tiny_llama_dir: Path, parent_adapter: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint-4"
    shutil.copytree(parent_adapter, checkpoint)
    (checkpoint / "tunedeck_config.json").write_text(json.dumps({"init_from": {"how": "weights"}}))
    with pytest.raises(ModelLoadError, match="trained on another job's full weights"):
        _load(tiny_llama_dir, checkpoint)
