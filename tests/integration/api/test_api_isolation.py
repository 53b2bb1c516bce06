"""Isolation: every endpoint that names an object answers 404 to another user; tokens stay secret."""

from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.api_objects import EXPORT_NAME, alice_world
from tests.fixtures.app import API, AppHarness, jsonl_rows
from tunedeck.store.fencing import token_sha256

PARAM = re.compile(r"{(\w+)(?::path)?}")


def _routes_with_ids(api: AppHarness) -> list[tuple[str, str, list[str]]]:
    """Every (method, path template) of the OpenAPI document naming an owned object (recipes are shared)."""
    paths = api.client.get("/openapi.json").json()["paths"]
    return [
        (method.upper(), path, PARAM.findall(path))
        for path, operations in sorted(paths.items())
        # Recipes are shared; users are managed by admins (a member gets 403 there, tested below).
        if PARAM.search(path) and not path.startswith((f"{API}/config/", f"{API}/users/"))
        for method in sorted(operations)
    ]


def _request(api: AppHarness, user: str, method: str, path: str, values: dict[str, str]) -> Any:
    if "/exports/" in path:
        values = {**values, "name": EXPORT_NAME}
    url = PARAM.sub(lambda m: values[m.group(1)], path)
    kwargs: dict[str, Any] = {"headers": api.auth(user)}
    if path.endswith("/versions") and method == "POST":
        kwargs["files"] = {"file": ("x.jsonl", jsonl_rows(2))}
    elif path.endswith("/clone"):
        kwargs["json"] = {"config": {}}
    elif path.endswith("/exports") and method == "POST":
        kwargs["json"] = {"format": "adapter"}
    elif path.endswith("/generate"):
        kwargs["json"] = {"prompt": "hello"}
    elif path.endswith("/remote-code"):
        kwargs["json"] = {"allowed": True}
    elif path.endswith("/inspection"):
        kwargs["json"] = {"base_model_id": values["base_model_id"]}
    elif path.endswith("/note"):
        kwargs["json"] = {"note": "why"}
    elif path.endswith("/tags"):
        kwargs["json"] = {"tags": ["mine"]}
    elif path.endswith("/datasets/{dataset_id}") and method == "PATCH":
        kwargs["json"] = {"licence": "cc-by-4.0"}
    elif path.endswith("/retention") and method == "PUT":
        kwargs["json"] = {"raw_data_days": 30}
    return api.client.request(method, url, **kwargs)


def test_every_endpoint_with_an_id_is_404_for_another_user(api: AppHarness, tmp_path: Path) -> None:
    values = alice_world(api, tmp_path)
    routes = _routes_with_ids(api)
    assert len(routes) >= 20  # the matrix really covers the API
    for method, path, params in routes:
        assert set(params) <= set(values), f"no test value for {params} in {path}"
        response = _request(api, "bob", method, path, values)
        assert response.status_code == 404, f"{method} {path}: {response.status_code} {response.text}"
        assert "private" not in response.text and "secret" not in response.text
    # The owner still sees everything, so the 404s above are about ownership, not bad ids.
    for method, path, _ in routes:
        if method == "GET" and "{token_id}" not in path:
            response = _request(api, "alice", method, path, values)
            assert response.status_code == 200, f"{method} {path}: {response.status_code} {response.text}"
    # An admin sees every user's objects.
    assert api.client.get(f"{API}/jobs/{values['job_id']}", headers=api.auth("root")).status_code == 200


def test_unknown_ids_are_404_and_listings_are_scoped(api: AppHarness, tmp_path: Path) -> None:
    names = (
        "job_id", "dataset_id", "base_model_id", "path", "name", "report", "experiment_id", "item_id", "deletion_id",
        "plan_id",
    )  # fmt: skip
    values = {k: "nope" for k in names}
    values |= {"step": "1", "report": "validation"}
    for method, path, _ in _routes_with_ids(api):
        if method == "GET":
            response = _request(api, "alice", method, path, values)
            assert response.status_code == 404, f"{method} {path}: {response.status_code}"
    alice_world(api, tmp_path)
    for listing in ("/datasets", "/base-models"):
        assert api.client.get(f"{API}{listing}", headers=api.auth("bob")).json() == []
    assert api.client.get(f"{API}/jobs", headers=api.auth("bob")).json()["items"] == []
    assert api.client.get(f"{API}/work", headers=api.auth("bob")).json() == []


def test_requests_without_a_valid_token_are_401(api: AppHarness) -> None:
    assert api.client.get(f"{API}/jobs").status_code == 401
    wrong = api.client.get(f"{API}/jobs", headers={"Authorization": "Bearer tdk_not-a-token"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert api.client.get(f"{API}/jobs", headers={"Authorization": "Basic abc"}).status_code == 401
    assert api.client.get(f"{API}/me", headers=api.auth("bob")).json()["name"] == "bob"


def test_tokens_are_stored_hashed_and_never_logged(api: AppHarness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    created = api.client.post(f"{API}/users", headers=api.auth("root"), json={"name": "carol"})
    assert created.status_code == 201
    carol_token = created.json()["token"]
    mine = api.client.post(f"{API}/me/tokens", headers=api.auth("alice")).json()["token"]
    assert api.client.get(f"{API}/me", headers={"Authorization": f"Bearer {carol_token}"}).json()["name"] == "carol"
    assert api.client.get(f"{API}/me", headers={"Authorization": f"Bearer {mine}"}).json()["name"] == "alice"
    api.client.get(f"{API}/jobs", headers={"Authorization": f"Bearer {carol_token}x"})  # a failed attempt
    # Plain users may not create users.
    assert api.client.post(f"{API}/users", headers=api.auth("bob"), json={"name": "eve"}).status_code == 403

    secrets = [*api.tokens.values(), carol_token, mine]
    database = Path(api.settings.resolved_database_url().removeprefix("sqlite:///"))
    with sqlite3.connect(database) as connection:
        stored = {row[0] for row in connection.execute("SELECT token_sha256 FROM api_tokens")}
    assert {token_sha256(secret) for secret in secrets} <= stored
    raw = b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*"))  # db, -wal, -shm
    for secret in secrets:
        assert secret.encode() not in raw
        assert secret not in caplog.text
        assert secret[4:20] not in caplog.text


def test_ids_in_request_bodies_are_404_when_they_are_another_users(api: AppHarness, tmp_path: Path) -> None:
    # The same answer as an unknown id (`_check_references` and the dataset lookups raise NotFound),
    # so a body id never tells bob whether alice's object exists.
    alice = alice_world(api, tmp_path)
    alice_version = api.client.get(f"{API}/jobs/{alice['job_id']}", headers=api.auth("alice")).json()[
        "train_dataset_version_id"
    ]
    own_dataset = api.dataset("bob", name="bobs")
    own = {"base_model_id": api.base_model("bob")["id"], "train_dataset_id": own_dataset["id"]}
    foreign = {
        "base_model_id": alice["base_model_id"],
        "train_dataset_id": alice["dataset_id"],
        "validation_dataset_id": alice_version,
        "experiment_id": alice["experiment_id"],
    }
    for field, value in [*foreign.items(), ("train_dataset_id", alice_version)]:
        body = {"name": "steal", **own, field: value}
        response = api.client.post(f"{API}/jobs", headers=api.auth("bob"), json=body)
        assert response.status_code == 404, f"{field}: {response.status_code} {response.text}"
        assert "private" not in response.text
        unknown = api.client.post(f"{API}/jobs", headers=api.auth("bob"), json={**body, field: "ds_nope"})
        assert unknown.status_code == 404, f"{field} unknown: {unknown.status_code}"
    assert api.client.get(f"{API}/jobs", headers=api.auth("bob")).json()["items"] == []
    # Other endpoints that take ids in their body.
    preflight = api.client.post(f"{API}/preflight", headers=api.auth("bob"),
                                json={**own, "base_model_id": alice["base_model_id"]})  # fmt: skip
    assert preflight.status_code == 404
    preflight = api.client.post(f"{API}/preflight", headers=api.auth("bob"),
                                json={**own, "train_dataset_id": alice["dataset_id"]})  # fmt: skip
    assert preflight.status_code == 404
    inspection = api.client.post(f"{API}/datasets/{own_dataset['id']}/inspection", headers=api.auth("bob"),
                                 json={"base_model_id": alice["base_model_id"]})  # fmt: skip
    assert inspection.status_code == 404
    # Alice's own request with the same ids works, so the 404s are about ownership.
    body = {"name": "mine", "base_model_id": alice["base_model_id"], "train_dataset_id": alice["dataset_id"],
            "validation_dataset_id": alice_version, "experiment_id": alice["experiment_id"]}  # fmt: skip
    assert api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body).status_code == 201
