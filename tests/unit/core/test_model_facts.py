"""A model folder's facts come from its configs and safetensors headers; what its files do not give stays unknown."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.fixtures.model_folders import PARAMETERS_PER_SHARD, write_model_folder
from tunedeck.core.model_facts import (
    MAX_HEADER_BYTES,
    ModelFacts,
    format_bytes,
    format_parameters,
    read_model_facts,
)


def test_the_facts_of_a_sharded_model_folder(tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "model", shards=2)
    facts = read_model_facts(folder)
    assert facts.parameters == 2 * PARAMETERS_PER_SHARD
    assert facts.size_bytes == sum(path.stat().st_size for path in folder.iterdir())
    assert facts.architecture == "LlamaForCausalLM" and facts.model_type == "llama"
    assert facts.licence == "apache-2.0"
    assert facts.chat_template is True
    assert facts.summary().startswith(f"{2 * PARAMETERS_PER_SHARD} parameters · ")
    assert "LlamaForCausalLM · licence apache-2.0 · chat template" in facts.summary()


def test_a_chat_template_file_counts_and_a_missing_one_is_said(tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "plain", chat_template=False, licence=None)
    facts = read_model_facts(folder)
    assert facts.chat_template is False and facts.licence is None
    assert facts.summary().endswith("LlamaForCausalLM · no chat template")
    (folder / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    assert read_model_facts(folder).chat_template is True


def test_unreadable_files_leave_their_facts_unknown(tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "broken")
    # A header that claims more than a header may be: the count is not guessed from the other files.
    (folder / "model-00009.safetensors").write_bytes(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}")
    (folder / "config.json").write_text("not json", encoding="utf-8")
    (folder / "tokenizer_config.json").unlink()
    facts = read_model_facts(folder)
    assert facts.parameters is None and facts.architecture is None and facts.chat_template is None
    assert facts.size_bytes is not None and facts.licence == "apache-2.0"
    assert read_model_facts(tmp_path / "missing") == ModelFacts()
    assert ModelFacts().summary() == ""


def test_a_negative_or_malformed_shape_is_not_counted(tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "odd")
    raw = json.dumps({"w": {"dtype": "F32", "shape": [2, "x"], "data_offsets": [0, 8]}}).encode()
    (folder / "model-00000.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 8)
    assert read_model_facts(folder).parameters is None


def test_sizes_read_as_people_name_them() -> None:
    assert format_parameters(7_241_732_096) == "7.2B"
    assert format_parameters(124_439_808) == "124.4M"
    assert format_parameters(999) == "999"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(15 * 1024**3) == "15.0 GiB"
