"""The redesign keeps the API's contract: the OpenAPI documents' paths, parameters and schemas stay as they were.

`snapshots/openapi_before_redesign.json` holds both documents (tunedeck's `/api/v1` and the
OpenAI-compatible `/v1`) as they were before the code was reorganised. Descriptions may be
added or reworded, so they are left out of the comparison; everything else must be equal.
A deliberate change of the contract updates the snapshot in its own commit, saying why (so far:
`POST /api/v1/me/tokens` gained the pattern that refuses control characters in token names).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunedeck.api.app import create_app
from tunedeck.api.openai.app import OPENAI_PREFIX
from tunedeck.core.settings import Settings

SNAPSHOT = Path(__file__).parent / "snapshots" / "openapi_before_redesign.json"


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _without_descriptions(value) for key, value in node.items() if key != "description"}
    if isinstance(node, list):
        return [_without_descriptions(item) for item in node]
    return node


def _contract(document: dict[str, Any]) -> dict[str, Any]:
    return _without_descriptions({"paths": document["paths"], "components": document.get("components", {})})


def _documents(root: Path) -> dict[str, dict[str, Any]]:
    app = create_app(Settings(data_dir=root / "data", model_roots=str(root)))
    mounted = next(route for route in app.routes if getattr(route, "path", None) == OPENAI_PREFIX)
    return {"api": app.openapi(), "openai": mounted.app.openapi()}  # type: ignore[attr-defined]


def test_the_openapi_documents_keep_their_paths_parameters_and_schemas(tmp_path: Path) -> None:
    before = json.loads(SNAPSHOT.read_text())
    now = _documents(tmp_path)
    for name in ("api", "openai"):
        expected, actual = _contract(before[name]), _contract(now[name])
        assert sorted(actual["paths"]) == sorted(expected["paths"]), name
        for path in expected["paths"]:
            assert actual["paths"][path] == expected["paths"][path], f"{name} {path}"
        assert actual["components"] == expected["components"], name
