"""The checks before an MLX export and the adapter's conversion to mlx-lm's format, on configs and tensors alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file as load_numpy
from safetensors.torch import load_file as load_torch
from safetensors.torch import save_file

from tests.fixtures.mlx import require_mlx
from tunedeck.core.mlx_export import MlxExportOptions
from tunedeck.engine.export import mlx_target
from tunedeck.engine.export.mlx_convert import _spell_rope_for_mlx, write_mlx_adapter
from tunedeck.engine.export.mlx_target import AdapterMappingError, adapter_layout, check_mlx_target

LLAMA = {
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}  # fmt: skip
PREFIX = "base_model.model.model.layers"


def _adapter(folder: Path, modules: dict[str, tuple[int, int, int]], **config: Any) -> Path:
    """A saved PEFT LoRA adapter: for each module path, (rank, in, out), random A and B."""
    torch.manual_seed(0)
    tensors = {}
    for module, (rank, fan_in, fan_out) in modules.items():
        tensors[f"base_model.model.{module}.lora_A.weight"] = torch.randn(rank, fan_in)
        tensors[f"base_model.model.{module}.lora_B.weight"] = torch.randn(fan_out, rank)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    document = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "bias": "none", **config}
    (folder / "adapter_config.json").write_text(json.dumps(document))
    return folder


def _skeleton() -> Any:
    skeleton, why = mlx_target._skeleton(LLAMA)
    assert skeleton is not None, why
    return skeleton


def test_without_mlx_the_check_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mlx_target.importlib.util, "find_spec", lambda name: None)
    report = check_mlx_target(LLAMA, MlxExportOptions())
    assert not report.ok and [c.status for c in report.checks] == ["fail", "skip", "skip", "skip"]
    assert "make install-mlx" in report.checks[0].advice[0] and "requirements-mlx.lock" in report.checks[0].advice[0]
    assert report.to_dict()["status"] == "fail"


def test_an_architecture_mlx_lm_lacks_fails_with_what_to_do() -> None:
    require_mlx()
    report = check_mlx_target({**LLAMA, "model_type": "bert"}, MlxExportOptions())
    architecture = report.checks[1]
    assert architecture.status == "fail" and "'bert'" in architecture.message
    assert any("adapter or merged" in advice for advice in architecture.advice)
    assert check_mlx_target({**LLAMA, "model_type": "mistral"}, MlxExportOptions()).ok  # mlx-lm's own renames


def test_memory_follows_dtype_and_quantisation_and_fails_with_advice() -> None:
    require_mlx()
    skeleton = _skeleton()
    from mlx.utils import tree_flatten

    parameters = sum(value.size for value in dict(tree_flatten(skeleton.parameters())).values())
    assert mlx_target.exported_weight_bytes(skeleton, MlxExportOptions(dtype="float32")) == 4 * parameters
    assert mlx_target.exported_weight_bytes(skeleton, MlxExportOptions()) == 2 * parameters
    four = mlx_target.exported_weight_bytes(skeleton, MlxExportOptions(quantize_bits=4))
    eight = mlx_target.exported_weight_bytes(skeleton, MlxExportOptions(quantize_bits=8))
    assert four < eight < 2 * parameters
    needed_gb = 2 * parameters * 1.2 / 1024**3
    tight = check_mlx_target(LLAMA, MlxExportOptions(), unified_memory_gb=needed_gb / 0.75 * 0.9)
    (failure,) = tight.failures()
    assert failure.name == "unified_memory" and "does not fit" in failure.message
    assert "4 bits" in failure.advice[0] and "Mac with at least" in failure.advice[1]
    assert check_mlx_target(LLAMA, MlxExportOptions(), unified_memory_gb=needed_gb / 0.75 * 1.1).ok
    assert check_mlx_target(LLAMA, MlxExportOptions()).checks[3].status == "skip"  # no size given


def test_the_adapter_maps_onto_mlx_lm_layers_with_padding_and_folded_scales(tmp_path: Path) -> None:
    require_mlx()
    modules = {
        "model.layers.1.self_attn.q_proj": (4, 64, 64),
        "model.layers.2.self_attn.v_proj": (8, 64, 32),
        "model.layers.2.mlp.down_proj": (8, 128, 64),
    }
    folder = _adapter(tmp_path / "adapter", modules, alpha_pattern={"q_proj": 2})
    layout = adapter_layout(_skeleton(), folder)
    assert layout.keys == ["mlp.down_proj", "self_attn.q_proj", "self_attn.v_proj"]
    assert layout.num_layers == 2 and layout.rank == 8  # from block 1 to the last; the largest rank
    assert layout.scales["model.layers.1.self_attn.q_proj"] == 2 / 4
    written = write_mlx_adapter(folder, layout, tmp_path / "mlx")
    assert written == ["adapters.safetensors", "adapter_config.json"]
    config = json.loads((tmp_path / "mlx" / "adapter_config.json").read_text())
    scale = config["lora_parameters"]["scale"]
    assert config["lora_parameters"]["rank"] == 8 and scale == 1.0  # the scalings differ: folded into lora_b
    ours = load_numpy(str(tmp_path / "mlx" / "adapters.safetensors"))
    peft = {key: value.numpy() for key, value in load_torch(str(folder / "adapter_model.safetensors")).items()}
    for module in modules:
        # What each adds to the layer's weight (out × in): mlx-lm's `scale · lora_bᵀ · lora_aᵀ`, PEFT's `s · B · A`.
        mlx_delta = scale * ours[f"{module}.lora_b"].T @ ours[f"{module}.lora_a"].T
        a, b = (peft[f"base_model.model.{module}.lora_{which}.weight"] for which in "AB")
        assert np.abs(mlx_delta - layout.scales[module] * b @ a).max() < 1e-5


@pytest.mark.parametrize(
    ("modules", "config", "reason"),
    [
        ({"lm_head": (4, 64, 256)}, {}, "outside the model's blocks"),
        ({"model.layers.0.self_attn.qkv": (4, 64, 64)}, {}, "no linear counterpart"),
        ({"model.layers.0.self_attn.q_proj": (4, 32, 64)}, {}, "is 32 → 64 but"),
        ({"model.layers.0.self_attn.q_proj": (4, 64, 64)}, {"use_dora": True}, "DoRA"),
        ({"model.layers.0.self_attn.q_proj": (4, 64, 64)}, {"modules_to_save": ["lm_head"]}, "lm_head"),
    ],
)
def test_an_adapter_mlx_lm_cannot_hold_is_refused_naming_the_module(
    tmp_path: Path, modules: dict[str, tuple[int, int, int]], config: dict[str, Any], reason: str
) -> None:
    require_mlx()
    folder = _adapter(tmp_path / "adapter", modules, **config)
    with pytest.raises(AdapterMappingError, match=reason):
        adapter_layout(_skeleton(), folder)
    report = check_mlx_target(LLAMA, MlxExportOptions(contents="adapter"), adapter_dir=folder)
    (failure,) = report.failures()
    assert failure.name == "adapter_modules" and "merged" in failure.advice[0]


def test_a_full_fine_tune_has_no_adapter_to_lay_out() -> None:
    require_mlx()
    (failure,) = check_mlx_target(LLAMA, MlxExportOptions(contents="adapter")).failures()
    assert failure.name == "adapter_modules" and "trained in full" in failure.message


def test_the_rope_settings_are_spelled_as_mlx_lm_reads_them(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}}))
    _spell_rope_for_mlx(config)
    assert json.loads(config.read_text())["rope_theta"] == 10000.0 and "rope_scaling" not in config.read_text()
    scaled = {"rope_theta": 5e5, "rope_type": "llama3", "factor": 8.0}
    config.write_text(json.dumps({"rope_parameters": scaled, "rope_theta": 1.0}))
    _spell_rope_for_mlx(config)
    written = json.loads(config.read_text())
    assert written["rope_theta"] == 1.0  # an explicit value stays
    assert written["rope_scaling"] == {"rope_type": "llama3", "factor": 8.0, "type": "llama3"}
