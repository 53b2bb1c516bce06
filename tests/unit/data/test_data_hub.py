"""`tunedeck data register hub:owner/name`: a hub dataset split, read from a local git mirror, pinned to its commit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import CHAT_ROWS, PROMPT_COMPLETION_ROWS, write_jsonl
from tunedeck.cli.main import app
from tunedeck.core.errors import HubDatasetError
from tunedeck.data.hub import MIRROR_ENV, HubDatasetRef, LocalDatasetMirror
from tunedeck.data.registry import DatasetRegistry

runner = CliRunner()
# Messages with differing fields (tool calls on some): Arrow fills the missing ones with nulls,
# which canonical rows drop again, so the registered content still equals the file's.
TINY_CHAT = CHAT_ROWS


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True, text=True, check=True,
    )
    return done.stdout.strip()


def _commit(repo: Path) -> str:
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "data")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "mirror"
    monkeypatch.setenv(MIRROR_ENV, str(folder))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return folder


def _tiny_chat(mirror: Path) -> tuple[Path, str]:
    repo = mirror / "acme" / "tiny-chat"
    write_jsonl(repo / "train.jsonl", TINY_CHAT)
    write_jsonl(repo / "test.jsonl", TINY_CHAT[:1])
    return repo, _commit(repo)


def _register(root: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["data", "register", *args, "--name", "tiny", "--root", str(root), "--json"])
    return result.exit_code, result.stdout, result.stderr


def test_hub_split_registers_the_files_rows_pinned_to_the_commit(tmp_path: Path, mirror: Path) -> None:
    repo, commit = _tiny_chat(mirror)
    code, out, _ = _register(tmp_path / "reg", "hub:acme/tiny-chat", "--split", "train")
    assert code == 0, out
    manifest = json.loads(out)["manifest"]
    assert manifest["notes"]["source"] == "hub:acme/tiny-chat"
    assert manifest["notes"]["hub"] == {
        "id": "acme/tiny-chat", "split": "train", "subset": None, "revision": None, "commit": commit,
    }
    assert manifest["rows"] == 4 and manifest["format"] == "chat"
    # The same rows as registering the file itself: the same canonical content.
    direct = DatasetRegistry(tmp_path / "direct").register(repo / "train.jsonl", "tiny")
    assert manifest["sha256"] == direct.manifest.sha256
    assert DatasetRegistry(tmp_path / "reg").get("tiny").data_path.read_text() == direct.data_path.read_text()
    assert not any((tmp_path / "reg" / ".staging").iterdir())  # scratch files are removed


def test_revision_is_recorded_with_the_commit_it_resolves_to(tmp_path: Path, mirror: Path) -> None:
    _, commit = _tiny_chat(mirror)
    code, out, _ = _register(tmp_path / "reg", "hub:acme/tiny-chat", "--split", "test", "--revision", "HEAD")
    assert code == 0, out
    hub = json.loads(out)["manifest"]["notes"]["hub"]
    assert (hub["split"], hub["revision"], hub["commit"]) == ("test", "HEAD", commit)
    code, out, _ = _register(tmp_path / "reg", "hub:acme/tiny-chat", "--split", "train", "--revision", "v9")
    assert code == 1 and "unknown revision 'v9'" in json.loads(out)["error"]


def test_subset_chooses_its_folder(tmp_path: Path, mirror: Path) -> None:
    repo = mirror / "acme" / "multi"
    write_jsonl(repo / "en" / "train.jsonl", PROMPT_COMPLETION_ROWS[:2])
    write_jsonl(repo / "fr" / "train.jsonl", PROMPT_COMPLETION_ROWS[2:5])
    _commit(repo)
    code, out, _ = _register(tmp_path / "reg", "hub:acme/multi", "--split", "train", "--subset", "fr")
    assert code == 0, out
    manifest = json.loads(out)["manifest"]
    assert manifest["rows"] == 3 and manifest["notes"]["hub"]["subset"] == "fr"
    rows = list(DatasetRegistry(tmp_path / "reg").get("tiny").iter_rows())
    assert [r["prompt"] for r in rows] == [r["prompt"] for r in PROMPT_COMPLETION_ROWS[2:5]]
    result = runner.invoke(
        app, ["data", "register", "hub:acme/multi", "--split", "train", "--subset", "de",
              "--name", "x", "--root", str(tmp_path / "reg")],
    )
    assert result.exit_code == 1 and "unknown subset 'de' (expected one of: en, fr)" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["hub:acme/tiny-chat", "--split", "validation"], "cannot read split 'validation'"),
        (["hub:acme/nothing", "--split", "train"], "hub:acme/nothing: unknown dataset"),
        (["hub:acme", "--split", "train"], "not a hub dataset id (expected hub:owner/name)"),
        (["hub:acme/tiny-chat"], "--split is required"),
        (["hub:acme/tiny-chat", "--split", "train", "--subset", "../x"], "not a subset name"),
    ],
)
def test_bad_hub_requests_are_one_line_errors(
    tmp_path: Path, mirror: Path, args: list[str], message: str
) -> None:
    _tiny_chat(mirror)
    result = runner.invoke(app, ["data", "register", *args, "--name", "x", "--root", str(tmp_path / "reg")])
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_loading_script_is_refused(tmp_path: Path, mirror: Path) -> None:
    repo = mirror / "acme" / "scripted"
    write_jsonl(repo / "train.jsonl", TINY_CHAT)
    (repo / "scripted.py").write_text("raise SystemExit('never run')\n")
    _commit(repo)
    code, out, _ = _register(tmp_path / "reg", "hub:acme/scripted", "--split", "train")
    assert code == 1
    assert "loading script (scripted.py)" in json.loads(out)["error"]
    assert DatasetRegistry(tmp_path / "reg").names() == []


def test_hub_options_need_a_hub_id(tmp_path: Path, chat_file: Path) -> None:
    result = runner.invoke(
        app, ["data", "register", str(chat_file), "--split", "train", "--name", "x", "--root", str(tmp_path)]
    )
    assert result.exit_code == 1 and "apply to hub:owner/name datasets only" in result.stderr


def test_mirror_refuses_uncommitted_changes_and_escapes(tmp_path: Path) -> None:
    repo = tmp_path / "m" / "acme" / "tiny-chat"
    write_jsonl(repo / "train.jsonl", TINY_CHAT)
    commit = _commit(repo)
    mirror = LocalDatasetMirror(tmp_path / "m")
    assert mirror.resolve("acme/tiny-chat", None) == (commit, repo.resolve())
    (repo / "extra.jsonl").write_text("{}\n")
    with pytest.raises(HubDatasetError, match="uncommitted changes"):
        mirror.resolve("acme/tiny-chat", None)
    with pytest.raises(HubDatasetError, match="not a hub dataset id"):
        HubDatasetRef.parse("hub:../etc", "train")


def test_register_adds_notes_to_a_streamed_file(tmp_path: Path, chat_file: Path) -> None:
    version = DatasetRegistry(tmp_path).register(chat_file, "chat", notes={"hub": {"id": "acme/x"}})
    assert version.manifest.notes["source"] == chat_file.name
    assert version.manifest.notes["hub"] == {"id": "acme/x"}
