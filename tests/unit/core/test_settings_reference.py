"""The reference of settings is generated from `Settings`: every field appears, with its variable and default."""

from __future__ import annotations

import pytest

from tunedeck.core.settings import ProcessSettings, Settings, setting_variable
from tunedeck.core.settings_reference import setting_entries, settings_reference


def test_every_setting_has_a_row_with_its_variable_type_and_default() -> None:
    entries = {entry.name: entry for entry in setting_entries()}
    assert list(entries) == list(Settings.model_fields)
    assert all(entry.description for entry in entries.values())  # a setting nobody can look up is a leak too
    port = entries["port"]
    assert (port.variable, port.type, port.default) == ("TUNEDECK_PORT", "int", "`8000`")
    cap = entries["memory_cap"]
    assert (cap.variable, cap.type, cap.default) == ("TUNEDECK_MEMORY_CAP", "str or unset", "unset")
    assert "24GiB" in cap.description
    assert entries["wandb_mode"].type == "offline or online"
    assert entries["data_dir"].type == "path" and entries["data_dir"].default == "`.tunedeck`"
    assert entries["wandb_api_key"].type == "secret or unset"


def test_the_reference_is_a_markdown_table_of_both_kinds_of_setting() -> None:
    text = settings_reference()
    lines = text.splitlines()
    assert lines[0] == "# Settings"
    assert "| Setting | Variable | Type | Default | Description |" in lines
    for name in [*Settings.model_fields, *ProcessSettings.model_fields]:
        assert f"`TUNEDECK_{name.upper()}`" in text
    rows = [line for line in lines if line.startswith("| `")]
    assert len(rows) == len(Settings.model_fields) + len(ProcessSettings.model_fields)
    assert all(row.count(" | ") == 4 for row in rows)  # a "|" in a description is escaped


def test_a_settings_variable_is_named_by_the_settings_module_only() -> None:
    assert setting_variable("memory_cap") == "TUNEDECK_MEMORY_CAP"
    assert setting_variable("dataset_mirror") == "TUNEDECK_DATASET_MIRROR"  # a process setting
    with pytest.raises(KeyError, match="no setting"):
        setting_variable("not_a_setting")
