"""QLoRA on a real CUDA GPU: 4-bit NF4 base, LoRA adapters train, the adapter merges onto the de-quantised base.

Needs bitsandbytes (`make install` on an NVIDIA machine: the cuda variant); marker-gated like every test in tests/gpu.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, metric_events, write_chat
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.merge import QLORA_WARNING
from tunedeck.engine.export.source import locate_model_folder
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


@pytest.mark.gpu
def test_qlora_trains_adapters_on_a_4bit_base_and_merges(tiny_llama_dir: Path, tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available() or torch.version.hip is not None:
        pytest.skip("QLoRA's 4-bit kernels need a CUDA GPU")
    pytest.importorskip("bitsandbytes", reason="install the cuda variant: make clean install on the NVIDIA machine")
    config = fast_config(epochs=4, use_peft=True, peft_method="qlora", mixed_precision="auto", learning_rate=5e-3)
    run_dir = tmp_path / "run"
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), write_chat(tmp_path, 32), run_dir))
    assert result.status == "succeeded", result
    losses = [event["loss"] for event in metric_events(run_dir)]
    assert losses[-1] < 0.5 * losses[0], losses

    merged = export_model(locate_model_folder(run_dir), "merged", tmp_path / "merged")
    assert any(QLORA_WARNING in warning for warning in merged.warnings), merged.warnings
    assert any(name.endswith(".safetensors") for name in merged.files)
