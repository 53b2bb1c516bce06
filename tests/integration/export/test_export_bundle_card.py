"""The bundle: model card with every section and no raw rows; its config re-validates and re-runs."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

from tests.integration.engine.engine_data import QUESTIONS, write_chat
from tunedeck.config.loading import validate_config
from tunedeck.engine.export.card import SECTIONS
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.source import locate_model_folder
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

from .conftest import MID_RUN_STEP


def _unpack(archive: Path, dest: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    (top,) = list(dest.iterdir())
    return top


def test_bundle_holds_the_run_record_and_a_complete_card(lora_run: Path, tmp_path: Path) -> None:
    result = export_model(locate_model_folder(lora_run), "bundle", tmp_path / "bundle", title="tiny chat")
    (archive,) = [tmp_path / "bundle" / name for name in result.files if name.endswith(".tar.gz")]
    top = _unpack(archive, tmp_path / "unpacked")
    assert top.name == "tiny-chat-final"
    names = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
    assert {"MODEL_CARD.md", "config.json", "training_config.json", "env.json", "data_manifest.json",
            "results.json", "model/adapter_model.safetensors", "model/adapter_config.json",
            "model/tunedeck_pin.json"} <= names
    assert not any(name.endswith((".pt", ".pth", ".bin")) for name in names)  # no optimizer or RNG pickles

    card = (top / "MODEL_CARD.md").read_text()
    headings = [line[3:] for line in card.splitlines() if line.startswith("## ")]
    assert headings == list(SECTIONS)
    pin = json.loads((top / "model" / "tunedeck_pin.json").read_text())
    manifest = json.loads((top / "data_manifest.json").read_text())["datasets"][0]
    for expected in (pin["fingerprint"], pin["tokenizer_sha256"], manifest["sha256"], "| train | chat |", "| 160 |",
                     "LORA: rank 8", "transformers", "_to fill in_", "first training loss"):
        assert expected in card, expected
    every_text = "\n".join(p.read_text(errors="replace") for p in top.rglob("*") if p.suffix in (".md", ".json")
                           and not p.name.startswith("tokenizer"))
    for question, answer in QUESTIONS:  # no training row reaches the card or the documents
        assert question not in every_text and answer not in every_text
    # Nor the training machine's folders: paths in the run record are relative to the run.
    results = json.loads((top / "results.json").read_text())
    assert "run_dir" not in results and str(lora_run) not in every_text
    assert results["final_path"] == "final"


def test_bundle_config_revalidates_and_reruns(lora_run: Path, tiny_llama_dir: Path, tmp_path: Path) -> None:
    result = export_model(locate_model_folder(lora_run, MID_RUN_STEP), "bundle", tmp_path / "bundle")
    top = _unpack(tmp_path / "bundle" / result.files[0], tmp_path / "unpacked")
    assert top.name.endswith(f"-step-{MID_RUN_STEP}")
    config = validate_config(json.loads((top / "training_config.json").read_text()))
    assert config.to_json_dict() == json.loads((top / "config.json").read_text())["config"]
    pin = json.loads((top / "model" / "tunedeck_pin.json").read_text())
    rerun = run_training(RunSpec(config, ModelRef(pin["model_id"]), write_chat(tmp_path, 16), tmp_path / "rerun"))
    assert rerun.status == "succeeded" and rerun.global_step == 2  # 16 rows, batch 8, one epoch
    assert (tmp_path / "rerun" / "final" / "adapter_model.safetensors").is_file()


def test_exporting_twice_gives_identical_bytes(lora_run: Path, tmp_path: Path) -> None:
    folder = locate_model_folder(lora_run, MID_RUN_STEP)
    digests = []
    for name in ("one", "two"):
        result = export_model(folder, "bundle", tmp_path / name)
        digests.append(hashlib.sha256((tmp_path / name / result.files[0]).read_bytes()).hexdigest())
    assert digests[0] == digests[1]  # a storage commit of the same export is idempotent
