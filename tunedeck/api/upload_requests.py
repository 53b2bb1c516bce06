"""Receiving a dataset upload and queueing its ingestion: what every upload route reads (file, form, limits).

The native routes (`POST /api/v1/datasets`, its versions) and the OpenAI-compatible `POST /v1/files`
share it; neither imports the other's routes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from tunedeck.api.auth import Principal
from tunedeck.api.context import ApiContext
from tunedeck.api.schemas.common import RequestBody
from tunedeck.api.schemas.datasets import (
    Licence,
    RightsNote,
)
from tunedeck.api.uploads import UploadRejected, receive_upload
from tunedeck.core.column_map import (
    COLUMN_MAP_MAX_LENGTH,
    ColumnMapError,
    parse_column_map,
)
from tunedeck.core.dataset_vocabulary import FILE_TYPES, NAME_PATTERN, known_source_format
from tunedeck.core.errors import Issue, IssueListError
from tunedeck.service.datasets.dataset_store import (
    queue_ingestion,
)
from tunedeck.service.datasets.received_upload import ReceivedUpload
from tunedeck.service.exports.work_requests import refuse_if_busy
from tunedeck.store.models import WorkItem


class UploadForm(RequestBody):
    """The text fields sent beside the file."""

    # Form fields are text: "true" is how a form sends a boolean.
    model_config = ConfigDict(extra="forbid", strict=False)

    name: str | None = Field(None, pattern=NAME_PATTERN.pattern)
    format: str = "auto"
    file_type: str | None = None
    label_column: str | None = Field(None, min_length=1, max_length=200)
    column_map: str | None = Field(None, max_length=COLUMN_MAP_MAX_LENGTH)
    drop_invalid: bool = False
    # None: a new dataset warns; a new version keeps the policy of the dataset's latest version.
    scan_policy: Literal["warn", "block", "redact"] | None = None
    licence: Licence = None
    rights_note: RightsNote = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        """A row format the ingestion reads, or `auto`; refused here, before the upload is kept."""
        return known_source_format(value)

    @field_validator("file_type")
    @classmethod
    def _known_file_type(cls, value: str | None) -> str | None:
        """A file type the ingestion reads (none: from the file name's extension)."""
        if value is not None and value not in FILE_TYPES:
            raise ValueError(f"expected one of {', '.join(FILE_TYPES)}")
        return value

    @field_validator("column_map")
    @classmethod
    def _column_map_syntax(cls, value: str | None, info: ValidationInfo) -> str | None:
        """`target=source` pairs, by the one parser the CLI also uses; refused before the upload is kept.

        A label column is the mapping `label=NAME`, so the two may not name the label differently.
        """
        if value is None:
            return value
        try:
            label = parse_column_map(value).get("label")
        except ColumnMapError as error:
            raise ValueError(str(error)) from None
        label_column = info.data.get("label_column")
        if label is not None and label_column is not None and label != label_column:
            raise ValueError(f"the label is named twice: label_column {label_column!r} and label={label}")
        return value

    @field_validator("drop_invalid", mode="before")
    @classmethod
    def _form_boolean(cls, value: object) -> object:
        """`true` or `false`, as the documented boolean is written in a form (not `0`, `yes` or `on`)."""
        if isinstance(value, str):
            if value not in ("true", "false"):
                raise ValueError("expected true or false")
            return value == "true"
        return value


def _form(fields: dict[str, str]) -> UploadForm:
    try:
        return UploadForm.model_validate(fields)
    except ValidationError as error:
        issues = [
            Issue(str(e["msg"]), field=".".join(map(str, e["loc"])) or None, found=str(e.get("input"))[:100])
            for e in error.errors(include_url=False)
        ]
        raise IssueListError(issues, title="invalid upload form") from None


def default_dataset_name(received: ReceivedUpload) -> str:
    """The name a new dataset takes from its uploaded file's name when the form names none."""
    stem = received.client_name.rsplit(".", 1)[0]
    cleaned = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in stem).strip("-._")[:100]
    return cleaned if cleaned and NAME_PATTERN.match(cleaned) else "dataset"


# Reads a received upload's form fields for a route that sends more than the dataset form: it checks its
# own fields and returns the ones the dataset form reads.
FormFields = Callable[[ReceivedUpload], dict[str, str]]


async def receive_and_queue(
    request: Request,
    context: ApiContext,
    user: Principal,
    *,
    dataset_id: str | None = None,
    inherited_policy: str = "warn",
    form_fields: FormFields | None = None,
) -> WorkItem:
    """Receive the upload, keep it in storage for a worker, and queue its ingestion; the scratch file is removed.

    Every upload route reads the file, the form, the limits and the scan policy here; `form_fields`
    lets a route (`POST /v1/files`) take its own fields out of the form first.
    """
    settings = context.settings
    # Refused before the body is read: a user at the work limit does not upload for nothing.
    await run_in_threadpool(refuse_if_busy, context, user)
    try:
        received = await receive_upload(request, context.uploads_dir, settings.max_upload_bytes)
    except UploadRejected as error:
        raise HTTPException(error.status, error.detail) from None
    try:
        form = _form(form_fields(received) if form_fields is not None else received.fields)
        name = None if dataset_id is not None else form.name or default_dataset_name(received)
        inputs = {
            "display_name": received.client_name or "upload",
            "format": form.format,
            "file_type": form.file_type,
            "label_column": form.label_column,
            "column_map": parse_column_map(form.column_map) if form.column_map is not None else {},
            "drop_invalid": form.drop_invalid,
            "scan_policy": form.scan_policy or inherited_policy,
            "max_rows": settings.max_upload_rows,
            "dataset_id": dataset_id,
            "name": name,
            "licence": form.licence,
            "rights_note": form.rights_note,
        }
        return await run_in_threadpool(queue_ingestion, context, user, received, inputs)
    finally:
        received.discard()


