"""`tunedeck data register --licence --rights-note`: the rights kept with the version, read back for a run."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.fixtures.data import PROMPT_COMPLETION_ROWS, write_jsonl
from tunedeck.cli.main import app
from tunedeck.data.registry import registered_rights

runner = CliRunner()


def _register(source: Path, root: Path, *options: str) -> dict[str, object]:
    result = runner.invoke(app, ["data", "register", str(source), "--name", "qa", "--root", str(root), *options])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout)["manifest"]) if "--json" in options else {}


def test_register_keeps_the_licence_and_rights_note_in_the_manifest(tmp_path: Path) -> None:
    source, root = write_jsonl(tmp_path / "qa.jsonl", PROMPT_COMPLETION_ROWS), tmp_path / "registry"
    manifest = _register(source, root, "--licence", "cc-by-4.0", "--rights-note", "Written by our staff.", "--json")
    notes = manifest["notes"]
    assert isinstance(notes, dict)
    assert (notes["licence"], notes["rights_note"]) == ("cc-by-4.0", "Written by our staff.")
    data = root / "qa" / "v1" / "data.jsonl"
    assert registered_rights(data, str(manifest["sha256"])) == {
        "licence": "cc-by-4.0",
        "rights_note": "Written by our staff.",
    }
    assert registered_rights(data, "0" * 64) == {}  # another content: not this version's rights

    # The same rows under the same terms are the same version; under other terms, a new one.
    assert (
        _register(source, root, "--licence", "cc-by-4.0", "--rights-note", "Written by our staff.", "--json")["version"]
        == 1
    )
    assert _register(source, root, "--licence", "mit", "--json")["version"] == 2

    shown = runner.invoke(app, ["data", "register", str(source), "--name", "qa", "--root", str(root)])
    assert shown.exit_code == 0 and "licence" not in shown.stdout  # none given: nothing recorded, nothing said
    licensed = runner.invoke(
        app, ["data", "register", str(source), "--name", "qa", "--root", str(root), "--licence", "cc0-1.0"]
    )
    assert "licence: cc0-1.0" in licensed.stdout


def test_a_bad_licence_is_refused_naming_the_option_and_registers_nothing(tmp_path: Path) -> None:
    source, root = write_jsonl(tmp_path / "qa.jsonl", PROMPT_COMPLETION_ROWS), tmp_path / "registry"
    refused = runner.invoke(
        app, ["data", "register", str(source), "--name", "qa", "--root", str(root), "--licence", "x" * 201, "--json"]
    )
    assert refused.exit_code == 1
    issue = json.loads(refused.stdout)["issues"][0]
    assert issue["field"] == "--licence" and "at most 200 characters" in issue["message"]
    note = runner.invoke(
        app, ["data", "register", str(source), "--name", "qa", "--root", str(root), "--rights-note", "a\x07b"]
    )
    assert note.exit_code == 1 and "--rights-note" in note.output and "U+0007" in note.output
    assert not (root / "qa").exists()
