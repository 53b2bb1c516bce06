"""Local base models come only from the operator's model roots, resolved, and never link out of their folder."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.app import API, AppHarness, make_settings, start_harness
from tunedeck.core.errors import ModelLoadError
from tunedeck.engine.models.model_source import ModelRef, resolve_model


def _copy_model(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.fixture
def rooted(tmp_path: Path, sqlite_url: str) -> Iterator[AppHarness]:
    """The API with one model root, `tmp_path/models`."""
    settings = make_settings(tmp_path, sqlite_url).model_copy(update={"model_roots": str(tmp_path / "models")})
    yield from start_harness(settings)


def _register(api: AppHarness, user: str, path: str) -> tuple[int, dict]:
    answer = api.client.post(f"{API}/base-models", headers=api.auth(user), json={"local_path": path})
    return answer.status_code, answer.json()


def test_only_folders_inside_the_roots_register(rooted: AppHarness, tmp_path: Path, tiny_llama_dir: Path) -> None:
    inside = _copy_model(tiny_llama_dir, tmp_path / "models" / "alice-llama")
    outside = _copy_model(tiny_llama_dir, tmp_path / "elsewhere" / "llama")
    assert _register(rooted, "alice", str(inside))[0] == 201
    status, body = _register(rooted, "bob", str(outside))
    assert status == 404 and body["issues"][0]["field"] == "local_path"
    assert str(tmp_path / "models") in body["issues"][0]["expected"]  # the message says where models may come from
    # `..` and links are resolved before the check: a path that only looks inside is outside.
    sneaky = f"{tmp_path}/models/../elsewhere/llama"
    assert _register(rooted, "bob", sneaky)[0] == 404
    (tmp_path / "models" / "shortcut").symlink_to(tmp_path / "elsewhere" / "llama")
    assert _register(rooted, "bob", str(tmp_path / "models" / "shortcut"))[0] == 404
    # A missing folder and a folder outside answer alike: the reply reveals nothing of the server.
    missing = _register(rooted, "bob", str(tmp_path / "models" / "missing"))[1]
    assert missing["issues"][0]["message"] == body["issues"][0]["message"]


def test_a_model_folder_linking_outside_is_refused_at_registration_and_at_load(
    rooted: AppHarness, tmp_path: Path, tiny_llama_dir: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    folder = _copy_model(tiny_llama_dir, tmp_path / "models" / "linked")
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    (folder / "chat_template.jinja").symlink_to(secret)
    status, body = _register(rooted, "alice", str(folder))
    assert status == 422 and "chat_template.jinja" in body["issues"][0]["message"]
    with pytest.raises(ModelLoadError, match="outside the model folder"):
        resolve_model(ModelRef(str(folder)))  # the worker checks again when it loads the model
    # A link that stays inside the folder is fine.
    (folder / "chat_template.jinja").unlink()
    (folder / "tokenizer-copy.json").symlink_to(folder / "tokenizer.json")
    assert _register(rooted, "alice", str(folder))[0] == 201
