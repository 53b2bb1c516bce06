"""The OpenAPI document states what the API answers: shared errors, the NUL rule, JSON types, `Allow` on 405."""

from __future__ import annotations

from typing import Any

from tests.fixtures.app import API, AppHarness

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}


def _error_schema(document: dict[str, Any], method: str, path: str, status: int) -> Any:
    response = document["paths"][f"{API}{path}"][method]["responses"][str(status)]
    return response["content"]["application/json"]["schema"]


def test_every_operation_lists_the_errors_its_layers_answer(api: AppHarness) -> None:
    document = api.client.get("/openapi.json").json()
    assert _error_schema(document, "get", "/version", 400) == ERROR_REF  # a NUL in any URL
    for status in (400, 401, 403):
        assert _error_schema(document, "get", "/users", status) == ERROR_REF  # signed in, admins only
    for status in (400, 401, 422):
        assert _error_schema(document, "post", "/config/validate", status) == ERROR_REF
    assert "401" not in document["paths"][f"{API}/health"]["get"]["responses"]  # open to all
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_every_request_string_refuses_nul(api: AppHarness) -> None:
    document = api.client.get("/openapi.json").json()
    parameters = {p["name"]: p["schema"] for p in document["paths"][f"{API}/jobs"]["get"]["parameters"]}
    assert parameters["name"]["anyOf"][0]["pattern"] == r"^[^\x00]*$"
    hub_id = document["components"]["schemas"]["BaseModelCreate"]["properties"]["hub_id"]
    assert hub_id["anyOf"][0]["pattern"] == r"^[^\x00]*$"  # beside the hub id's own pattern
    assert hub_id["pattern"].startswith("^[A-Za-z0-9]")


def test_invalid_requests_answer_in_the_error_shape_naming_the_field(api: AppHarness) -> None:
    answer = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json={"name": 5, "guards": [1]})
    assert answer.status_code == 422
    fields = {issue["field"] for issue in answer.json()["issues"]}
    assert {"name", "base_model_id", "train_dataset_id"} <= fields and answer.json()["detail"]
    not_json = api.client.post(
        f"{API}/config/validate", headers={**api.auth("alice"), "Content-Type": "application/json"}, content=b"{"
    )
    assert not_json.status_code == 422 and not_json.json()["issues"][0]["field"] == "body"


def test_json_types_are_taken_as_they_are(api: AppHarness) -> None:
    model = api.base_model("alice")
    url = f"{API}/base-models/{model['id']}/remote-code"
    assert api.client.put(url, headers=api.auth("root"), json={"allowed": 1}).status_code == 422  # 1 is not true
    assert api.client.post(f"{API}/config/validate", headers=api.auth("alice"), json={"use_peft": 0}).status_code == 422
    # 3.0 is the integer 3, as JSON Schema reads it.
    whole = api.client.post(f"{API}/config/validate", headers=api.auth("alice"), json={"epochs": 3.0})
    assert whole.status_code == 200 and whole.json()["config"]["epochs"] == 3


def test_a_405_names_every_method_of_the_path(api: AppHarness) -> None:
    answer = api.client.put(f"{API}/jobs", headers=api.auth("alice"))
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, POST"
    assert answer.json()["detail"]
    assert api.client.patch(f"{API}/jobs/job_x", headers=api.auth("alice")).headers["allow"] == "DELETE, GET"
