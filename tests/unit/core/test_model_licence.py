"""The base model's licence, read from its own files: model card front matter, config.json, a licence file."""

from __future__ import annotations

import json
from pathlib import Path

from tunedeck.core.model_licence import (
    NOT_FOUND,
    NOT_RECORDED,
    ModelLicence,
    describe_recorded,
    front_matter_fields,
    read_model_licence,
)


def _model(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_the_model_cards_front_matter_names_the_licence(tmp_path: Path) -> None:
    card = (
        "---\nlanguage: en\nlicense: apache-2.0  # the code and weights\ntags: [chat]\n---\n\n# A model\nlicense: mit\n"
    )
    found = read_model_licence(_model(tmp_path, {"README.md": card, "LICENSE": "MIT License\n"}))
    assert found == ModelLicence(licence="apache-2.0", source="README.md front matter")
    assert found.describe() == "apache-2.0 (from the base model's README.md front matter)"


def test_an_other_licence_keeps_its_name_and_link(tmp_path: Path) -> None:
    card = (
        "---\nlicense: other\nlicense_name: 'llama3'\n"
        'license_link: "https://example.org/LICENSE"\nbase_model:\n  - org/base\n---\n'
    )
    found = read_model_licence(_model(tmp_path, {"README.md": card}))
    assert (found.licence, found.name, found.link) == ("other", "llama3", "https://example.org/LICENSE")
    assert (
        found.describe() == "other / llama3, https://example.org/LICENSE (from the base model's README.md front matter)"
    )


def test_a_licence_list_in_either_yaml_form_is_joined() -> None:
    assert front_matter_fields("---\nlicense: [mit, 'apache-2.0']\n---\n", ("license",)) == {
        "license": "mit, apache-2.0"
    }
    block = "---\nlicense:\n  - cc-by-4.0\n  - mit\nlanguage: en\n---\n"
    assert front_matter_fields(block, ("license",)) == {"license": "cc-by-4.0, mit"}
    assert front_matter_fields("no front matter\nlicense: mit\n", ("license",)) == {}


def test_config_json_is_read_when_the_card_names_none(tmp_path: Path) -> None:
    folder = _model(tmp_path, {"README.md": "---\nlanguage: en\n---\n# Card without a licence\n"})
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "license": "openrail"}))
    assert read_model_licence(folder) == ModelLicence(licence="openrail", source="config.json")


def test_a_licence_file_is_named_by_its_first_line(tmp_path: Path) -> None:
    folder = _model(tmp_path, {"LICENSE.txt": "\n\n   Apache License\n   Version 2.0, January 2004\n"})
    assert read_model_licence(folder) == ModelLicence(licence="Apache License", source="LICENSE.txt file")


def test_nothing_is_guessed_when_no_file_names_a_licence(tmp_path: Path) -> None:
    found = read_model_licence(_model(tmp_path, {"README.md": "# A model card with no front matter\n"}))
    assert not found.found
    assert found.describe() == NOT_FOUND == "licence not found in the base model's files"
    assert describe_recorded(found.to_dict()) == NOT_FOUND


def test_a_run_that_recorded_nothing_says_so() -> None:
    assert describe_recorded(None) == NOT_RECORDED
    recorded = ModelLicence(licence="mit", source="LICENSE file").to_dict()
    assert describe_recorded(recorded) == "mit (from the base model's LICENSE file)"


def test_odd_text_in_a_file_becomes_one_short_printable_line(tmp_path: Path) -> None:
    card = '---\nlicense: "mit\u0007 ' + "x" * 400 + '"\n---\n'
    found = read_model_licence(_model(tmp_path, {"README.md": card}))
    assert found.licence is not None and found.licence.startswith("mit x") and len(found.licence) == 300
