"""Job tags and list sorting through the API: tags at creation and by PUT, filters by tag, dataset and model."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from tests.fixtures.app import API, AppHarness
from tunedeck.store.models import Job, JobTag
from tunedeck.store.types import utcnow


def _create(api: AppHarness, user: str, name: str, **fields: object) -> dict[str, object]:
    dataset = api.dataset(user, name=f"data-{name}")
    model = api.base_model(user)
    body = {"name": name, "base_model_id": model["id"], "train_dataset_id": dataset["id"], **fields}
    answer = api.client.post(f"{API}/jobs", headers=api.auth(user), json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _names(api: AppHarness, **params: object) -> list[str]:
    answer = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params=params)
    assert answer.status_code == 200, answer.text
    return [job["name"] for job in answer.json()["items"]]


def test_tags_set_at_creation_replaced_by_put_and_filtered_on(api: AppHarness) -> None:
    job = _create(api, "alice", "tagged", tags=["sweep", "baseline", "sweep"])
    assert job["tags"] == ["baseline", "sweep"]
    assert "tags" not in job["config"]  # metadata, not training config
    _create(api, "alice", "untagged")
    assert _names(api, tag="baseline") == ["tagged"]
    put = api.client.put(f"{API}/jobs/{job['id']}/tags", headers=api.auth("alice"), json={"tags": ["v2", "sweep"]})
    assert put.status_code == 200, put.text
    assert put.json()["tags"] == ["sweep", "v2"]
    assert api.client.get(f"{API}/jobs/{job['id']}", headers=api.auth("alice")).json()["tags"] == ["sweep", "v2"]
    assert _names(api, tag="baseline") == []
    assert _names(api, tag="v2") == ["tagged"]
    cleared = api.client.put(f"{API}/jobs/{job['id']}/tags", headers=api.auth("alice"), json={"tags": []})
    assert cleared.json()["tags"] == []


def test_bad_tags_are_422_naming_the_tag_and_nothing_is_queued(api: AppHarness) -> None:
    dataset = api.dataset("alice", name="data-bad")
    model = api.base_model("alice")
    body = {"name": "bad", "base_model_id": model["id"], "train_dataset_id": dataset["id"], "tags": ["ok", "no spaces"]}
    answer = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert answer.status_code == 422, answer.text
    issue = answer.json()["issues"][0]
    assert issue["field"] == "tags[1]" and "letters, digits" in issue["expected"]
    assert _names(api) == []
    job = _create(api, "alice", "fine")
    too_many = {"tags": [f"t{i}" for i in range(17)]}
    refused = api.client.put(f"{API}/jobs/{job['id']}/tags", headers=api.auth("alice"), json=too_many)
    assert refused.status_code == 422 and refused.json()["issues"][0]["field"] == "tags"
    long_tag = api.client.put(f"{API}/jobs/{job['id']}/tags", headers=api.auth("alice"), json={"tags": ["x" * 33]})
    assert long_tag.status_code == 422 and long_tag.json()["issues"][0]["field"] == "tags[0]"


def test_another_users_job_tags_are_404(api: AppHarness) -> None:
    job = _create(api, "bob", "bobs", tags=["private"])
    answer = api.client.put(f"{API}/jobs/{job['id']}/tags", headers=api.auth("alice"), json={"tags": ["mine"]})
    assert answer.status_code == 404
    assert api.client.get(f"{API}/jobs/{job['id']}", headers=api.auth("bob")).json()["tags"] == ["private"]
    assert _names(api, tag="private") == []


def test_filters_by_dataset_and_base_model(api: AppHarness) -> None:
    first = _create(api, "alice", "first")
    _create(api, "alice", "second")
    datasets = api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()
    dataset_id = next(d["id"] for d in datasets if d["name"] == "data-first")
    assert _names(api, dataset_id=dataset_id) == ["first"]
    assert _names(api, base_model_id=first["base_model_id"]) == ["first"]
    assert _names(api, dataset_id="ds_nope") == []


def test_sorting_by_name_state_and_duration_pages_through_every_job(api: AppHarness) -> None:
    names = ["delta", "alpha", "charlie", "bravo", "echo"]
    ids = {name: _create(api, "alice", name)["id"] for name in names}
    now = utcnow()
    # charlie ran 50 minutes, alpha 10, bravo still runs (5 so far); delta and echo never started.
    timings = {"charlie": (60, 10), "alpha": (30, 20), "bravo": (5, None)}
    with api.store.db.write() as session:
        for name, (started, finished) in timings.items():
            job = session.get(Job, ids[name])
            assert job is not None
            job.started_at = now - timedelta(minutes=started)
            job.finished_at = None if finished is None else now - timedelta(minutes=finished)
            job.state = "succeeded" if finished is not None else "running"
    assert _names(api, sort="name", order="asc") == sorted(names)
    assert _names(api, sort="name", order="desc") == sorted(names, reverse=True)
    assert _names(api, sort="duration", order="desc")[:3] == ["charlie", "alpha", "bravo"]
    assert _names(api, sort="duration", order="asc")[:3] == ["bravo", "alpha", "charlie"]
    assert set(_names(api, sort="duration")[3:]) == {"delta", "echo"}  # never started: last either way
    states = [job["state"] for job in api.client.get(
        f"{API}/jobs", headers=api.auth("alice"), params={"sort": "state"}
    ).json()["items"]]  # fmt: skip
    assert states == sorted(states, reverse=True)
    assert _names(api, sort="created", order="asc") == names
    seen: list[str] = []
    cursor = None
    while True:
        params = {"sort": "name", "order": "asc", "limit": 2} | ({"cursor": cursor} if cursor else {})
        page = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params=params).json()
        seen += [job["name"] for job in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(names)
    bad = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params={"sort": "colour"})
    assert bad.status_code == 422


def test_a_clone_keeps_its_sources_tags(api: AppHarness) -> None:
    job = _create(api, "alice", "source", tags=["baseline"])
    for body in ({"config": {"epochs": 2}}, {"config": {"epochs": 2}, "replace_config": True}):
        clone = api.client.post(f"{API}/jobs/{job['id']}/clone", headers=api.auth("alice"), json=body)
        assert clone.status_code == 201, clone.text
        assert clone.json()["tags"] == ["baseline"]


def test_a_cursor_of_another_order_starts_from_the_first_page(api: AppHarness) -> None:
    for name in ("b", "a", "c"):
        _create(api, "alice", name)
    by_created = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params={"limit": 1}).json()
    keyset = by_created["next_cursor"]
    assert _names(api, sort="name", order="asc", cursor=keyset) == ["a", "b", "c"]
    assert _names(api, sort="created", order="asc", cursor="@1") == ["a", "c"]  # an offset in creation order


def test_deleting_a_job_deletes_its_tags(api: AppHarness) -> None:
    job = _create(api, "alice", "doomed", tags=["gone"])
    kept = _create(api, "alice", "kept", tags=["gone"])
    assert api.client.delete(f"{API}/jobs/{job['id']}", headers=api.auth("alice")).status_code == 202
    with api.store.db.read() as session:
        rows = session.execute(select(JobTag.job_id, JobTag.tag)).all()
    assert [tuple(row) for row in rows] == [(kept["id"], "gone")]
    assert _names(api, tag="gone") == ["kept"]
