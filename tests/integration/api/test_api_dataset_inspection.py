"""The loss-mask view's data: a dataset tokenized by a base model on a worker, stored on the version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.app import API, AppHarness, running_worker


@pytest.fixture(autouse=True)
def worker(api: AppHarness) -> Iterator[None]:
    """Inspections run on a worker."""
    with running_worker(api):
        yield


def test_inspection_tags_trained_tokens_and_is_stored_for_the_dashboard(api: AppHarness, tiny_llama_dir: Path) -> None:
    dataset = api.dataset("alice", rows=4, name="qa")
    model = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(tiny_llama_dir)})
    assert model.status_code == 201, model.text
    path = f"{API}/datasets/{dataset['id']}/inspection"

    answer = api.client.post(
        f"{path}?wait=120", headers=api.auth("alice"), json={"base_model_id": model.json()["id"], "max_length": 64}
    )
    assert answer.status_code == 200, answer.text
    report = answer.json()["result"]["report"]
    assert report["kind"] == "prompt_completion" and report["max_length"] == 64
    first = report["examples"][0]
    trained = [tok for tok in first["tokens"] if tok["trained"]]
    masked = [tok for tok in first["tokens"] if not tok["trained"]]
    # Prompt tokens are masked, the completion ("It is 0.") and its end token are trained.
    assert masked and trained
    assert "".join(tok["text"] for tok in trained).strip().startswith("It is 0.")

    stored = api.store.datasets.list_versions(api.users["alice"], dataset["id"])[-1].reports["inspection"]
    assert stored[model.json()["id"]]["examples"][0]["tokens"] == first["tokens"]

    # Another user's dataset is not found; a sealed test set is not inspected.
    assert api.client.post(path, headers=api.auth("bob"), json={"base_model_id": model.json()["id"]}).status_code == 404
    version = api.store.datasets.list_versions(api.users["alice"], dataset["id"])[-1]
    api.store.datasets.seal(api.users["alice"], version.id)
    sealed = api.client.post(path, headers=api.auth("alice"), json={"base_model_id": model.json()["id"]})
    assert sealed.status_code == 409


def test_inspection_with_a_model_without_tokenizer_is_refused(api: AppHarness, tmp_path: Path) -> None:
    dataset = api.dataset("alice", rows=2, name="qa2")
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    (empty / "model.safetensors").write_bytes(b"")
    model = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(empty)})
    assert model.status_code == 201, model.text
    answer = api.client.post(
        f"{API}/datasets/{dataset['id']}/inspection?wait=120",
        headers=api.auth("alice"),
        json={"base_model_id": model.json()["id"]},
    )
    assert answer.status_code == 422, answer.text
    assert "tokenizer" in answer.text


def test_inspection_applies_the_truncation_mode_it_is_given(api: AppHarness, tiny_llama_dir: Path) -> None:
    dataset = api.dataset("alice", rows=3, name="qa3")
    model = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(tiny_llama_dir)})
    assert model.status_code == 201, model.text
    path = f"{API}/datasets/{dataset['id']}/inspection"
    body = {"base_model_id": model.json()["id"], "max_length": 8, "truncation": "truncate_prompt"}
    answer = api.client.post(f"{path}?wait=120", headers=api.auth("alice"), json=body)
    assert answer.status_code == 200, answer.text
    truncation = answer.json()["result"]["report"]["truncation"]
    assert truncation["truncation"] == "truncate_prompt"
    assert truncation["prompt_cut"] > 0  # prompts were cut from the left so the answers keep their tokens
    refused = api.client.post(path, headers=api.auth("alice"), json={**body, "truncation": "sometimes"})
    assert refused.status_code == 422
