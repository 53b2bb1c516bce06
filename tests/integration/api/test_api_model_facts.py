"""A base model's facts, read from its files without loading it: the API, the models page and the job form's picker."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.fixtures.app import API, AppHarness, sign_in
from tests.fixtures.model_folders import PARAMETERS_PER_SHARD, write_model_folder
from tunedeck.service.models.base_model_facts import NOT_FETCHED

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _register_folder(harness: AppHarness, user: str, folder: Path, name: str) -> str:
    answer = harness.client.post(
        f"{API}/base-models", headers=harness.auth(user), json={"local_path": str(folder), "name": name}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_a_local_models_facts_come_from_its_files(api: AppHarness, tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "facts-llama", shards=2)
    model_id = _register_folder(api, "alice", folder, "facts llama")
    facts = api.client.get(f"{API}/base-models/{model_id}/facts", headers=api.auth("alice"))
    assert facts.status_code == 200, facts.text
    body = facts.json()
    assert body["known"] is True
    assert body["parameters"] == 2 * PARAMETERS_PER_SHARD
    assert body["size_bytes"] == sum(path.stat().st_size for path in folder.iterdir())
    assert (body["architecture"], body["model_type"]) == ("LlamaForCausalLM", "llama")
    assert body["licence"] == "apache-2.0" and body["chat_template"] is True
    assert "LlamaForCausalLM" in body["summary"] and "chat template" in body["summary"]
    # Another user's model answers as an unknown one.
    assert api.client.get(f"{API}/base-models/{model_id}/facts", headers=api.auth("bob")).status_code == 404
    assert api.client.get(f"{API}/base-models/bm_nope/facts", headers=api.auth("alice")).status_code == 404


def test_a_hub_models_facts_are_known_once_its_pinned_snapshot_is_here(
    api: AppHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    model = api.base_model("alice")
    url = f"{API}/base-models/{model['id']}/facts"
    unknown = api.client.get(url, headers=api.auth("alice")).json()
    assert unknown["known"] is False and unknown["parameters"] is None
    assert unknown["summary"] == NOT_FETCHED
    # A worker pinned it and fetched that commit into the hub cache on this machine.
    api.store.base_models.pin(api.users["alice"], model["id"], COMMIT)
    write_model_folder(tmp_path / "hub-cache" / "models--org--tiny-model" / "snapshots" / COMMIT, chat_template=False)
    known = api.client.get(url, headers=api.auth("alice")).json()
    assert known["known"] is True and known["parameters"] == PARAMETERS_PER_SHARD
    assert known["chat_template"] is False and "no chat template" in known["summary"]


def test_a_local_folder_linking_out_or_moved_out_of_the_model_roots_is_not_read(
    api: AppHarness, tmp_path: Path
) -> None:
    folder = write_model_folder(tmp_path / "moved")
    model_id = _register_folder(api, "alice", folder, "moved")
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(tmp_path.parent / "outside.md")
    linked = api.client.get(f"{API}/base-models/{model_id}/facts", headers=api.auth("alice")).json()
    assert linked["known"] is False and linked["licence"] is None
    (folder / "README.md").unlink()
    api.settings.model_roots = str(tmp_path / "elsewhere")
    body = api.client.get(f"{API}/base-models/{model_id}/facts", headers=api.auth("alice")).json()
    assert body["known"] is False and body["parameters"] is None


def test_the_models_page_and_the_job_form_show_the_facts(web: AppHarness, tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "page-llama")
    model_id = _register_folder(web, "alice", folder, "page llama")
    bobs = _register_folder(web, "bob", write_model_folder(tmp_path / "bobs-llama"), "bobs llama")
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/models")
    assert page.status_code == 200
    row = page.text[page.text.index(f'id="model-{model_id}"') :]
    row = row[: row.index("</tr>")]
    assert f">{PARAMETERS_PER_SHARD}<" in row and "LlamaForCausalLM" in row and "apache-2.0" in row
    assert '<td data-fact="chat-template">yes</td>' in row
    assert bobs not in page.text and "bobs llama" not in page.text
    form = web.client.get("/jobs/new")
    assert form.status_code == 200
    option = re.search(rf'<option value="{model_id}" data-facts="([^"]*)"', form.text)
    assert option is not None
    facts = html.unescape(option.group(1))
    assert facts.startswith(f"{PARAMETERS_PER_SHARD} parameters · ") and facts.endswith("chat template")
    assert 'id="base-model-facts"' in form.text
