"""A clone sent whole (`replace_config`), or on another base model or dataset: queued like a new job."""

from __future__ import annotations

from tests.fixtures.app import API, AppHarness


def test_a_whole_config_clone_leaves_out_what_it_does_not_name(api: AppHarness) -> None:
    source = api.job("alice", name="source", learning_rate=1e-4, weight_decay=0.2)
    merged = api.client.post(f"{API}/jobs/{source['id']}/clone", headers=api.auth("alice"), json={"config": {}})
    assert merged.status_code == 201 and merged.json()["config"]["weight_decay"] == 0.2
    whole = api.client.post(
        f"{API}/jobs/{source['id']}/clone", headers=api.auth("alice"),
        json={"config": {"learning_rate": 1e-4}, "replace_config": True},
    )  # fmt: skip
    assert whole.status_code == 201, whole.text
    config = whole.json()["config"]
    assert config["learning_rate"] == 1e-4 and config["weight_decay"] == 0.01 and config["epochs"] == 3
    assert whole.json()["cloned_from"] == source["id"]
    assert whole.json()["train_dataset_version_id"] == source["train_dataset_version_id"]


def test_a_clone_may_train_another_model_on_other_data_of_its_owner_only(api: AppHarness) -> None:
    source = api.job("alice", name="source")
    other_data = api.dataset("alice", name="other-data")
    other_model = api.base_model("alice")
    clone = api.client.post(
        f"{API}/jobs/{source['id']}/clone", headers=api.auth("alice"),
        json={"base_model_id": other_model["id"], "train_dataset_id": other_data["id"]},
    )  # fmt: skip
    assert clone.status_code == 201, clone.text
    assert clone.json()["base_model_id"] == other_model["id"]
    assert clone.json()["train_dataset_version_id"] == other_data["latest"]["id"]
    assert clone.json()["config"]["epochs"] == 1  # the source's config, merged as before
    bobs = api.dataset("bob", name="bobs")
    refused = api.client.post(
        f"{API}/jobs/{source['id']}/clone", headers=api.auth("alice"), json={"train_dataset_id": bobs["id"]}
    )
    assert refused.status_code == 404
    bad = api.client.post(
        f"{API}/jobs/{source['id']}/clone", headers=api.auth("alice"),
        json={"config": {"lora_r": 0}, "replace_config": True},
    )  # fmt: skip
    assert bad.status_code == 422 and bad.json()["issues"][0]["field"] == "config.lora_r"
