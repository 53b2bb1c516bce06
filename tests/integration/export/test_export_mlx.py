"""MLX exports open in mlx-lm with tunedeck's own logits (fp32, within 1e-4) and greedy answers.

A tiny Llama and a tiny Qwen2-style model, each trained with LoRA, are exported merged and
as base + adapter; mlx-lm loads each export and its logits on fixed prompts are compared with
the adapter on its base in transformers + peft, merged. Skipped without mlx (make install-mlx).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.fixtures.mlx import require_mlx
from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.core.errors import ConfigError
from tunedeck.core.mlx_export import MlxExportOptions
from tunedeck.engine.export import exporter
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.source import ModelFolder, locate_model_folder
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.models.pinning import PIN_FILE, load_adapter_onto
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

TOLERANCE = 1e-4
PROMPTS = ("What is two plus two? (0)", "Name a colour of the sky.", "<|user|>\nHello<|end|>\n<|assistant|>\n")
NEW_TOKENS = 12


@pytest.fixture(autouse=True)
def _mlx_installed() -> None:
    require_mlx()


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen2-style model (biased q/k/v projections) sharing the tiny Llama's tokenizer, briefly pretrained."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama_dir))
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=96, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, initializer_range=0.1,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # q/k/v biases as a trained Qwen2 has them, so the export must carry them
        for layer in model.model.layers:
            for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                projection.bias.normal_(0, 0.1)
    folder = tmp_path_factory.mktemp("tiny-qwen2") / "model"
    model.save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def qwen2_lora_run(tiny_qwen2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short LoRA run on the tiny Qwen2 (every linear layer adapted)."""
    folder = tmp_path_factory.mktemp("qwen2-run")
    train = write_chat(folder, 32)
    config = fast_config(learning_rate=1e-2, lora_target_modules="all-linear")
    result = run_training(RunSpec(config, ModelRef(str(tiny_qwen2_dir)), train, folder / "run"))
    assert result.status == "succeeded"
    return folder / "run"


def _reference(run: Path, base: Path) -> Any:
    loaded = load_adapter_onto(base, run / "final")
    return loaded.model.merge_and_unload().eval(), loaded.tokenizer


def _mlx_load(folder: Path, adapter: Path | None = None) -> tuple[Any, Any]:
    """mlx-lm's model and tokenizer from an export folder (with the adapter folder, when given)."""
    import mlx_lm

    loaded = mlx_lm.load(str(folder), adapter_path=str(adapter) if adapter is not None else None)
    return loaded[0], loaded[1]


def _torch_logits(model: Any, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def _mlx_logits(model: Any, ids: list[int]) -> np.ndarray:
    import mlx.core as mx

    return np.array(model(mx.array([ids]))[0].astype(mx.float32))


def _greedy_torch(model: Any, tokenizer: Any, ids: list[int]) -> list[int]:
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return [int(token) for token in out[0, len(ids):]]


def _greedy_mlx(model: Any, tokenizer: Any, ids: list[int]) -> list[int]:
    from mlx_lm.generate import stream_generate
    from mlx_lm.sample_utils import make_sampler

    steps = stream_generate(model, tokenizer, ids, max_tokens=NEW_TOKENS, sampler=make_sampler(temp=0.0))
    return [int(step.token) for step in steps]


def _assert_same_model(reference: Any, tokenizer: Any, loaded: Any, mlx_tokenizer: Any) -> None:
    differences = []
    for prompt in PROMPTS:
        ids = tokenizer(prompt)["input_ids"]
        assert mlx_tokenizer.encode(prompt) == ids  # the export carries the run's tokenizer
        expected = _torch_logits(reference, ids)
        differences.append(float(np.abs(_mlx_logits(loaded, ids) - expected).max()))
        assert _greedy_mlx(loaded, mlx_tokenizer, ids) == _greedy_torch(reference, tokenizer, ids), prompt
    assert max(differences) <= TOLERANCE, differences


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_merged_fp32_export_loads_in_mlx_lm_with_tunedeck_logits(
    arch: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run, base = _run_and_base(arch, request)
    out = tmp_path / "mlx"
    result = export_model(locate_model_folder(run), "mlx", out, mlx=MlxExportOptions(dtype="float32"))
    assert result.contents == "merged_model" and result.mlx == {"contents": "merged", "dtype": "float32",
                                                                  "quantize_bits": None}
    assert {PIN_FILE, "README.md", "config.json"} <= set(result.files) and (out / "export.json").is_file()
    assert "mlx_lm" in (out / "README.md").read_text() and "adapter_config.json" not in result.files
    model, mlx_tokenizer = _mlx_load(out)
    reference, tokenizer = _reference(run, base)
    _assert_same_model(reference, tokenizer, model, mlx_tokenizer)
    # The adapter changed the model: the comparison would catch an export of the base alone.
    untrained = AutoModelForCausalLM.from_pretrained(str(base)).eval()
    ids = tokenizer(PROMPTS[0])["input_ids"]
    assert np.abs(_torch_logits(untrained, ids) - _mlx_logits(model, ids)).max() > 1e-3


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_adapter_layout_loads_base_plus_adapter_with_the_same_logits(
    arch: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run, base = _run_and_base(arch, request)
    out = tmp_path / "mlx-adapter"
    result = export_model(locate_model_folder(run), "mlx", out,
                          mlx=MlxExportOptions(contents="adapter", dtype="float32"))
    assert result.contents == "base_and_adapter"
    assert {"adapter/adapters.safetensors", "adapter/adapter_config.json", PIN_FILE} <= set(result.files)
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["fine_tune_type"] == "lora" and config["lora_parameters"]["rank"] == 8
    model, mlx_tokenizer = _mlx_load(out, out / "adapter")
    reference, tokenizer = _reference(run, base)
    _assert_same_model(reference, tokenizer, model, mlx_tokenizer)
    base_only, _ = _mlx_load(out)  # without the adapter: the base, which answers differently
    ids = tokenizer(PROMPTS[0])["input_ids"]
    assert np.abs(_mlx_logits(base_only, ids) - _torch_logits(reference, ids)).max() > 1e-3


def test_quantised_export_is_smaller_and_close(lora_run: Path, tiny_llama_dir: Path, tmp_path: Path) -> None:
    folder = locate_model_folder(lora_run)
    full = export_model(folder, "mlx", tmp_path / "fp16", mlx=MlxExportOptions(dtype="float16"))
    quantised = export_model(folder, "mlx", tmp_path / "q8", mlx=MlxExportOptions(quantize_bits=8))
    assert json.loads((quantised.out / "config.json").read_text())["quantization"]["bits"] == 8
    size = {"fp16": (full.out / "model.safetensors").stat().st_size,
            "q8": (quantised.out / "model.safetensors").stat().st_size}
    assert size["q8"] < size["fp16"]
    model, _ = _mlx_load(quantised.out)
    reference, tokenizer = _reference(lora_run, tiny_llama_dir)
    ids = tokenizer(PROMPTS[0])["input_ids"]
    expected = _torch_logits(reference, ids)
    got = _mlx_logits(model, ids)
    assert np.isfinite(got).all()
    # 8-bit weights stay close: the top token agrees at most positions.
    assert (got.argmax(-1) == expected.argmax(-1)).mean() >= 0.8


def test_unsupported_architecture_is_refused_before_any_work(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []

    def convert(*args: Any, **kwargs: Any) -> list[str]:
        started.append("convert")
        return []

    monkeypatch.setattr(exporter, "write_mlx", convert)
    out = tmp_path / "mlx"
    with pytest.raises(ConfigError) as refused:
        export_model(ModelFolder(tiny_bert_dir, "final"), "mlx", out, base=tiny_bert_dir)
    (issue,) = refused.value.issues
    assert issue.field == "architecture" and "'bert'" in issue.message and "export this model" in issue.message
    assert started == [] and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_memory_that_cannot_hold_the_model_refuses_with_figures(lora_run: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        export_model(locate_model_folder(lora_run), "mlx", tmp_path / "mlx", unified_memory_gb=0.0001)
    (issue,) = refused.value.issues
    assert issue.field == "unified_memory" and "does not fit" in issue.message and "4 bits" in issue.message


def _run_and_base(arch: str, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    if arch == "llama":
        return request.getfixturevalue("lora_run"), request.getfixturevalue("tiny_llama_dir")
    return request.getfixturevalue("qwen2_lora_run"), request.getfixturevalue("tiny_qwen2_dir")


def test_the_export_folder_holds_no_leftovers(lora_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "mlx"
    export_model(locate_model_folder(lora_run), "mlx", out, mlx=MlxExportOptions(contents="adapter"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlx"]
    shutil.rmtree(out)


def test_cli_preflight_and_export_for_mlx(lora_run: Path, tiny_bert_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tunedeck.cli.main import app

    runner = CliRunner()
    checked = runner.invoke(app, ["preflight", "--target", "mlx", "--model", str(lora_run), "--mlx-contents",
                                  "adapter", "--unified-memory-gb", "16", "--json"])
    assert checked.exit_code == 0, checked.output
    report = json.loads(checked.output)
    assert report["status"] == "pass" and [c["status"] for c in report["checks"]] == ["pass"] * 4
    refused = runner.invoke(app, ["preflight", "--target", "mlx", "--model", str(tiny_bert_dir)])
    assert refused.exit_code == 1 and "bert" in refused.output and "fail" in refused.output
    bad = runner.invoke(app, ["preflight", "--target", "mlx", "--model", str(lora_run), "--dtype", "float64"])
    assert bad.exit_code != 0 and "--dtype" in bad.output and "float64" in bad.output

    out = tmp_path / "cli-mlx"
    exported = runner.invoke(app, ["export", "--run-dir", str(lora_run), "--format", "mlx", "--quantize-bits", "4",
                                   "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    assert json.loads((out / "config.json").read_text())["quantization"]["bits"] == 4
    assert json.loads((out / "export.json").read_text())["mlx"]["quantize_bits"] == 4
