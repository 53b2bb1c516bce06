"""Bodies no route can store answer 4xx naming the field, on every JSON operation of both APIs, never a 500.

A lone surrogate in any string, objects nested hundreds of levels deep and integers beyond 64 bits
used to reach routes and fail there as server errors; the operations are read from the OpenAPI
documents, so a route added later is covered too.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness
from tunedeck.api.json_guards import INT_LIMIT, MAX_DEPTH, body_problem
from tunedeck.api.openai.app import OPENAI_PREFIX

SURROGATE = b'{"name": "caf\\ud800", "messages": []}'
DEEP = ('{"output_schema": ' + '{"a": ' * 400 + "1" + "}" * 400 + "}").encode()
HUGE = b'{"init_from_checkpoint": 1180591620717411303424}'  # 2**70


def _json_operations(api: AppHarness) -> list[tuple[str, str]]:
    """(method, path) of every operation of both documents whose body is JSON, path ids filled with 'x'."""
    found = []
    documents = [
        ("", api.client.get("/openapi.json").json()),
        (OPENAI_PREFIX, api.client.get(f"{OPENAI_PREFIX}/openapi.json").json()),
    ]
    for prefix, document in documents:
        for path, item in document["paths"].items():
            for method, operation in item.items():
                content = (operation.get("requestBody") or {}).get("content", {})
                if method in ("post", "put", "patch") and "application/json" in content:
                    found.append((method.upper(), prefix + re.sub(r"\{[^}]+\}", "x", path)))
    return found


@pytest.mark.parametrize(
    ("body", "field"), [(SURROGATE, "name"), (DEEP, "output_schema"), (HUGE, "init_from_checkpoint")]
)
def test_every_json_operation_refuses_what_no_route_can_store(api: AppHarness, body: bytes, field: str) -> None:
    operations = _json_operations(api)
    assert len(operations) > 20 and any(path.startswith(OPENAI_PREFIX) for _, path in operations)
    headers = {**api.auth("alice"), "Content-Type": "application/json"}
    for method, path in operations:
        answer = api.client.request(method, path, content=body, headers=headers)
        assert answer.status_code in (400, 422), f"{method} {path}: {answer.status_code} {answer.text[:200]}"
        if path.startswith(OPENAI_PREFIX):
            assert answer.json()["error"]["param"].startswith(field), path
        else:
            assert answer.json()["issues"][0]["field"].startswith(field), path


def test_the_checks_name_the_field_and_pass_what_is_storable() -> None:
    assert body_problem({"a": [{"b": "ok\ud83d"}]}) == ("a[0].b", body_problem("\ud83d")[1])  # type: ignore[index]
    assert body_problem({"n": INT_LIMIT}) is None and body_problem({"n": -INT_LIMIT - 2}) is not None
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]  # MAX_DEPTH arrays inside each other: allowed
    assert body_problem(deep) is None and body_problem([deep]) is not None
    assert body_problem({"flag": True, "x": 1.5e300, "emoji": "☕ 👍"}) is None


def test_a_model_name_with_a_step_no_database_holds_is_not_found(api: AppHarness) -> None:
    name = "ft:tiny:demo:job_123:ckpt-step-99999999999999999999"
    answer = api.client.post(
        f"{OPENAI_PREFIX}/chat/completions",
        headers=api.auth("alice"),
        json={"model": name, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 404 and answer.json()["error"]["param"] == "model"
    assert api.client.get(f"{OPENAI_PREFIX}/models/{name}", headers=api.auth("alice")).status_code == 404
    assert api.client.get(f"{API}/version").status_code == 200
