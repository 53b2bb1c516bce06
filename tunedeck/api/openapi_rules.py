"""Rules every route shares, written into the OpenAPI document once instead of on each route.

- Shared error responses. Some refusals come from the layers around the routes rather than
  from their code: the NUL guard on URLs and the body parser (400), sign-in (401), the admin
  role (403) and request validation (422, in the ErrorOut shape like every other error; see
  errors.py). Which of them an operation can answer follows from its dependencies and
  inputs; what a route declares itself wins over the shared entry.
- No NUL in request text. Every string a request carries (path, query, header, body) is
  refused when it holds NUL (input_guards.py, RequestBody), so each one says so with a pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute

from tunedeck.api.auth import current_user, require_admin
from tunedeck.api.schemas.common import ErrorOut

SCHEMAS_REF = "#/components/schemas/{model}"
ERROR_REF = SCHEMAS_REF.format(model=ErrorOut.__name__)
# The framework's own shape for request validation errors, which ours replaces.
FRAMEWORK_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")
MALFORMED_URL = "A NUL character in the URL."
MALFORMED = "A NUL character in the URL, or a body that is not JSON text."
UNAUTHORIZED = "No valid API token or session."
ADMINS_ONLY = "Admins only."
INVALID = "Invalid parameters or body: every issue with its field."
NUL_FREE = r"^[^\x00]*$"
# Strings that need no pattern: values already enumerated, and file contents (bytes, not text).
_NOT_TEXT = ("enum", "const")
_BINARY_FORMATS = ("binary", "byte")


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for child in dependant.dependencies:
        yield from _dependants(child)


def shared_errors(dependant: Dependant, has_body: bool) -> dict[int, str]:
    """The shared error statuses (with their descriptions) of an operation with this dependency tree."""
    dependants = list(_dependants(dependant))
    calls: set[Callable[..., Any] | None] = {node.call for node in dependants}
    takes_input = has_body or any(
        node.path_params or node.query_params or node.header_params or node.cookie_params for node in dependants
    )
    errors = {400: MALFORMED if has_body else MALFORMED_URL}
    if current_user in calls:
        errors[401] = UNAUTHORIZED
    if require_admin in calls:
        errors[403] = ADMINS_ONLY
    if takes_input:
        errors[422] = INVALID
    return errors


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": ERROR_REF}}}}


def _is_framework_validation(response: dict[str, Any]) -> bool:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref") == SCHEMAS_REF.format(model=FRAMEWORK_VALIDATION_SCHEMAS[0]))


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def add_shared_errors(document: dict[str, Any], routes: Sequence[BaseRoute]) -> None:
    """List the shared errors on every operation of `document` served by `routes` (idempotent)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    if ErrorOut.__name__ not in schemas:
        error_schema = ErrorOut.model_json_schema(ref_template=SCHEMAS_REF)
        schemas.update(error_schema.pop("$defs", {}))
        schemas[ErrorOut.__name__] = error_schema
    for route in iter_route_contexts(routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        operations = document.get("paths", {}).get(route.path_format, {})
        errors = shared_errors(route.dependant, route.body_field is not None)
        for method in route.methods or ():
            responses = operations.get(method.lower(), {}).get("responses")
            if responses is None:
                continue
            for status, description in errors.items():
                declared = responses.get(str(status))
                if declared is None or _is_framework_validation(declared):
                    responses[str(status)] = _error_response(description)
    used = set(_refs(document.get("paths", {})))
    for name in FRAMEWORK_VALIDATION_SCHEMAS:
        if SCHEMAS_REF.format(model=name) not in used:
            schemas.pop(name, None)


def _refuse_nul(schema: Any, schemas: dict[str, Any], seen: set[str]) -> None:
    """Give every text string in `schema` (and the components it refers to) the NUL-free pattern."""
    if isinstance(schema, list):
        for item in schema:
            _refuse_nul(item, schemas, seen)
        return
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(SCHEMAS_REF.format(model="")):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            _refuse_nul(schemas.get(name), schemas, seen)
    types = schema.get("type")
    is_text = (types == "string" or (isinstance(types, list) and "string" in types)) and not (
        any(key in schema for key in _NOT_TEXT) or schema.get("format") in _BINARY_FORMATS
    )
    if is_text and schema.get("pattern") != NUL_FREE:
        if "pattern" in schema:
            # One schema holds one pattern: the route's own goes beside ours, both apply.
            schema.setdefault("allOf", []).append({"pattern": schema["pattern"]})
        schema["pattern"] = NUL_FREE
    for key, value in schema.items():
        # A `not` names what is refused: giving it our pattern would narrow the refusal, not the value.
        if key not in ("$ref", "pattern", "enum", "const", "default", "examples", "example", "not"):
            _refuse_nul(value, schemas, seen)


def refuse_nul_in_requests(document: dict[str, Any]) -> None:
    """State on every request string of `document` that it holds no NUL (idempotent)."""
    schemas = document.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                _refuse_nul(parameter.get("schema"), schemas, seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _refuse_nul(media.get("schema"), schemas, seen)


def document_shared_rules(app: FastAPI) -> None:
    """Make `app`'s OpenAPI document state the shared errors of each operation and the NUL rule."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        document = build()
        add_shared_errors(document, app.routes)
        refuse_nul_in_requests(document)
        return document

    app.openapi = openapi  # type: ignore[method-assign]
