"""A model's own code runs only where an admin allowed it; code in other repositories never does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.app import API, AppHarness
from tests.fixtures.job_claims import claim_job
from tests.integration.worker.seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from tunedeck.cli.main import app
from tunedeck.core.errors import ForbiddenError, ModelLoadError
from tunedeck.engine.models.model_source import ModelRef, resolve_model
from tunedeck.store.store import JobStore
from tunedeck.worker.inputs import prepare_inputs

EVIL = """
from pathlib import Path
Path(__file__).with_name("RAN").write_text("model code ran")
"""


def _model_with_code(tiny_llama_dir: Path, target: Path, auto_map: dict[str, str]) -> Path:
    """A copy of the tiny model whose config asks for its own Python file (which would leave a RAN file)."""
    shutil.copytree(tiny_llama_dir, target)
    (target / "evil_model.py").write_text(EVIL)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "auto_map": auto_map}))
    return target


@pytest.fixture
def code_model(api: AppHarness, tmp_path: Path, tiny_llama_dir: Path) -> dict:
    folder = _model_with_code(tiny_llama_dir, tmp_path / "code-model", {"AutoConfig": "evil_model.EvilConfig"})
    answer = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(folder)})
    assert answer.status_code == 201, answer.text
    assert answer.json()["remote_code_allowed"] is False
    return answer.json()


def _job_body(api: AppHarness, model_id: str) -> dict:
    dataset = api.dataset("alice", name="code-data")
    return {"name": "code", "base_model_id": model_id, "train_dataset_id": dataset["id"],
            "config": {"epochs": 1, "trust_remote_code": True}}  # fmt: skip


def test_trust_remote_code_is_refused_until_an_admin_allows_the_model(api: AppHarness, code_model: dict) -> None:
    body = _job_body(api, code_model["id"])
    refused = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert refused.status_code == 403
    detail = refused.json()["detail"]
    assert code_model["id"] in detail and f"/base-models/{code_model['id']}/remote-code" in detail
    preflight = api.client.post(
        f"{API}/preflight", headers=api.auth("alice"),
        json={"base_model_id": code_model["id"], "train_dataset_id": body["train_dataset_id"],
              "config": body["config"]},
    )  # fmt: skip
    assert preflight.status_code == 403
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []

    url = f"{API}/base-models/{code_model['id']}/remote-code"
    assert api.client.put(url, headers=api.auth("alice"), json={"allowed": True}).status_code == 403  # members can't
    allowed = api.client.put(url, headers=api.auth("root"), json={"allowed": True})
    assert allowed.status_code == 200 and allowed.json()["remote_code_allowed"] is True
    assert allowed.json()["remote_code_allowed_at"] is not None
    created = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert created.status_code == 201, created.text

    # Withdrawn again: a clone that asks for the model's code is refused as well.
    assert api.client.put(url, headers=api.auth("root"), json={"allowed": False}).json()["remote_code_allowed"] is False
    clone = api.client.post(
        f"{API}/jobs/{created.json()['id']}/clone", headers=api.auth("alice"), json={"name": "again", "config": {}}
    )
    assert clone.status_code == 403


def test_a_job_whose_permission_was_withdrawn_fails_on_the_worker_before_any_code_runs(
    sqlite_url: str, tmp_path: Path, tiny_llama_dir: Path
) -> None:
    from tunedeck.storage.factory import open_store

    folder = _model_with_code(tiny_llama_dir, tmp_path / "code-model", {"AutoConfig": "evil_model.EvilConfig"})
    with JobStore.open(sqlite_url, migrate=False) as store:
        artifacts = open_store((tmp_path / "artifacts").as_uri())
        seeded = seed_job(store, artifacts, folder, chat_rows(4), config={**TINY_JOB_CONFIG, "trust_remote_code": True})
        claimed = claim_job(store, "w", devices=0, lease_s=60)
        assert claimed is not None and claimed.job_id == seeded.job.id
        with pytest.raises(ForbiddenError, match="not allowed to run"):
            prepare_inputs(store, artifacts, claimed, tmp_path / "attempt")
    assert not (folder / "RAN").exists()


def test_code_in_another_repository_is_never_followed(api: AppHarness, tmp_path: Path, tiny_llama_dir: Path) -> None:
    folder = _model_with_code(
        tiny_llama_dir, tmp_path / "foreign", {"AutoModelForCausalLM": "someone/else--modeling.Evil"}
    )
    answer = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(folder)})
    assert answer.status_code == 422 and "someone/else--modeling.Evil" in answer.json()["issues"][0]["message"]
    with pytest.raises(ModelLoadError, match="another repository"):
        resolve_model(ModelRef(str(folder)))
    assert not (folder / "RAN").exists()


def test_the_operator_allows_a_model_from_the_command_line(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path / "data"))
    with JobStore.open(sqlite_url, migrate=False) as store:
        admin = store.users.create_user("boss", admin=True)
        member = store.users.create_user("member")
        model = store.base_models.register(member, name="coded", hub_id="org/coded", revision="main")
    runner = CliRunner()
    refused = runner.invoke(app, ["models", "allow-code", model.id, "--by", "member", "--database-url", sqlite_url])
    assert refused.exit_code != 0 and "only an admin" in refused.output
    done = runner.invoke(app, ["models", "allow-code", model.id, "--by", "boss", "--database-url", sqlite_url])
    assert done.exit_code == 0, done.output
    with JobStore.open(sqlite_url, migrate=False) as store:
        row = store.base_models.get(admin, model.id)
        assert row.remote_code_allowed_by == admin.id and row.remote_code_allowed_at is not None
