"""Dataset pages: the list with the upload zone, and one dataset with its preview, reports and rights.

Uploading is done by the browser against the API's multipart endpoint (with a
progress bar); the dataset page's one form records the dataset's licence and rights note.
"""

from __future__ import annotations

from typing import get_args

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.api.access_records import record_read
from tunedeck.api.schemas.common import SQL_INT_MAX
from tunedeck.config.training import Truncation
from tunedeck.core.column_map import format_column_map
from tunedeck.core.dataset_rights import (
    LICENCE_MAX_LENGTH,
    RIGHTS_NOTE_MAX_LENGTH,
    check_licence,
    check_rights_note,
)
from tunedeck.core.dataset_vocabulary import (
    HUB_ID_PATTERN,
    HUB_PART_PATTERN,
    HUB_REVISION_PATTERN,
    NAME_PATTERN,
    SOURCE_FORMATS,
    format_signatures,
    html_pattern,
    mappable_fields,
)
from tunedeck.core.errors import StorageError
from tunedeck.service.datasets.dataset_store import read_preview
from tunedeck.service.datasets.dataset_versions import PREVIEW_FILE, PREVIEW_ROWS, version_prefix
from tunedeck.service.privacy.retention_dates import retention_bounds, version_schedule
from tunedeck.store.models import DatasetVersion
from tunedeck.web.dataset_view import (
    Preview,
    histogram_bars,
    inspections,
    refusal_warning,
    shape_preview,
    shown_tokens,
)
from tunedeck.web.locales.catalogue import Message, marked
from tunedeck.web.page_deps import CheckedForm, DashboardDep, PageNotFound, SessionDep, page_lookup
from tunedeck.web.retention_view import retention_line
from tunedeck.web.routes_retention import FIELD_LABELS

router = APIRouter(include_in_schema=False)


def column_map_text(version: DatasetVersion) -> str:
    """How a version's file fields were renamed, as `target=source` pairs; empty when they were not."""
    notes = (version.manifest or {}).get("notes") or {}
    return format_column_map(notes.get("column_map") or {})


def hub_source(version: DatasetVersion) -> dict[str, str] | None:
    """Where a version registered from the hub came from: its id, split, subset and resolved commit."""
    notes = (version.manifest or {}).get("notes") or {}
    hub = notes.get("hub")
    if not isinstance(hub, dict) or not hub.get("id"):
        return None
    return {key: str(hub[key]) for key in ("id", "split", "subset", "revision", "commit") if hub.get(key)}


@router.get("/datasets")
def datasets_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """Every dataset of the user, newest version's facts, and the upload form."""
    repo = dashboard.context.jobs.datasets
    rows = []
    existing: dict[str, dict[str, str | int]] = {}  # the upload form offers a new version when a name is taken
    for dataset in repo.list_datasets(session.user):
        versions = repo.list_versions(session.user, dataset.id)
        rows.append({"dataset": dataset, "latest": versions[-1] if versions else None, "versions": len(versions)})
        existing[dataset.name] = {"id": dataset.id, "versions": len(versions)}
    return dashboard.renderer.page(
        request,
        "datasets.html",
        title=marked("Datasets"),
        nav="datasets",
        user=session.user,
        csrf_token=session.csrf,
        datasets=rows,
        max_upload_bytes=dashboard.context.settings.max_upload_bytes,
        formats=SOURCE_FORMATS,
        # For the column mapping the browser offers once it has read the file's first rows.
        format_fields={"fields": mappable_fields(), "signatures": format_signatures()},
        licence_max=LICENCE_MAX_LENGTH,
        rights_note_max=RIGHTS_NOTE_MAX_LENGTH,
        existing=existing,
        patterns={
            "name": html_pattern(NAME_PATTERN),
            "hub": html_pattern(HUB_ID_PATTERN),
            "part": html_pattern(HUB_PART_PATTERN),
            "revision": html_pattern(HUB_REVISION_PATTERN),
        },
    )


@router.get("/datasets/{dataset_id}")
def dataset_page(
    request: Request,
    dataset_id: str,
    session: SessionDep,
    dashboard: DashboardDep,
    version: int | None = Query(None, ge=1, le=SQL_INT_MAX),
    model: str | None = Query(None, max_length=100),
    retention: str | None = Query(None, max_length=10),
    rights: str | None = Query(None, max_length=10),
    rows_page: int = Query(1, ge=1, le=PREVIEW_ROWS),
) -> Response:
    """One dataset version: facts, rights, when its raw data goes, preview rows, reports, inspection, retention."""
    notice = marked("This dataset's licence and rights note were saved.") if rights == "saved" else None
    return _dataset_view(
        request, dataset_id, session, dashboard, version=version, model=model, retention=retention,
        rights_notice=notice, rows_page=rows_page,
    )  # fmt: skip


@router.post("/datasets/{dataset_id}/rights")
def save_dataset_rights(
    dataset_id: str, request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm
) -> Response:
    """Record the dataset's licence and rights note (empty clears one); a bad value re-renders the page (422)."""
    repo = dashboard.context.jobs.datasets
    with page_lookup():
        repo.get_dataset(session.user, dataset_id)
    sent = {"licence": str(form.get("licence") or ""), "rights_note": str(form.get("rights_note") or "")}
    changes: dict[str, str | None] = {}
    for name, check in (("licence", check_licence), ("rights_note", check_rights_note)):
        try:
            changes[name] = check(sent[name])
        except ValueError as refused:
            return _dataset_view(
                request, dataset_id, session, dashboard, rights_sent=sent, status=422,
                rights_error=Message(marked("{field}: {problem}"), {"field": name, "problem": str(refused)}),
            )  # fmt: skip
    with page_lookup():
        repo.set_rights(session.user, dataset_id, changes)
    return RedirectResponse(f"/datasets/{dataset_id}?rights=saved", status_code=303)


def _dataset_view(
    request: Request,
    dataset_id: str,
    session: SessionDep,
    dashboard: DashboardDep,
    *,
    version: int | None = None,
    model: str | None = None,
    retention: str | None = None,
    rights_notice: str | None = None,
    rights_error: Message | None = None,
    rights_sent: dict[str, str] | None = None,
    rows_page: int = 1,
    status: int = 200,
) -> Response:
    context = dashboard.context
    with page_lookup():
        dataset = context.jobs.datasets.get_dataset(session.user, dataset_id)
        versions = context.jobs.datasets.list_versions(session.user, dataset_id)
    picked = _picked_version(versions, version)
    preview, preview_error = _version_preview(request, session, dashboard, dataset.name, picked, rows_page)
    reports = (picked.reports or {}) if picked is not None else {}
    by_model = inspections(reports)
    model_key = model if model in by_model else next(iter(by_model), None)
    inspection = by_model.get(model_key) if model_key is not None else None
    registered = context.jobs.base_models.list(session.user)
    schedule = version_schedule(context, picked.id) if picked is not None else []
    base_models = {m.id: m.name for m in registered}
    unnamed = Message(marked("(unnamed model)"))
    return dashboard.renderer.page(
        request,
        "dataset.html",
        status_code=status,
        title=Message(marked("Dataset {name}"), {"name": dataset.name}),
        nav="datasets",
        user=session.user,
        csrf_token=session.csrf,
        dataset=dataset,
        versions=versions,
        picked=picked,
        preview=preview,
        preview_error=preview_error,
        validation=reports.get("validation"),
        dedup=reports.get("dedup"),
        scan=reports.get("scan"),
        inspection=inspection,
        inspection_models=[(key, base_models.get(key, key or unnamed)) for key in by_model],
        inspection_model=model_key,
        histogram=histogram_bars(inspection) if inspection else [],
        shown_tokens=shown_tokens,
        refusal_warning=refusal_warning,
        truncation_modes=get_args(Truncation),
        mapping_of=column_map_text,
        hub_of=hub_source,
        base_models=registered,
        retention_entries=schedule,
        retention_line=retention_line,
        retention_policy=context.jobs.retention.dataset_policy(session.user, dataset.id),
        retention_bounds=retention_bounds(context),
        retention_labels=FIELD_LABELS,
        retention_notice=marked("This dataset's retention policy was saved.") if retention == "saved" else None,
        licence_max=LICENCE_MAX_LENGTH,
        rights_note_max=RIGHTS_NOTE_MAX_LENGTH,
        rights_notice=rights_notice,
        rights_error=rights_error,
        # The form shows what was sent when it was refused, else what is recorded.
        rights_values=rights_sent or {"licence": dataset.licence or "", "rights_note": dataset.rights_note or ""},
    )


def _picked_version(versions: list[DatasetVersion], version: int | None) -> DatasetVersion | None:
    """The version asked for (not found: 404), else the latest; None for a dataset with no version."""
    if version is not None:
        picked = next((v for v in versions if v.version == version), None)
        if picked is None:
            raise PageNotFound()
        return picked
    return versions[-1] if versions else None


def _version_preview(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    dataset_name: str,
    picked: DatasetVersion | None,
    rows_page: int,
) -> tuple[Preview | None, Message | None]:
    """The picked version's page of preview rows, or the message saying storage could not be read.

    Rows shown are a read that the owner's access log records.
    """
    context = dashboard.context
    preview: Preview | None = None
    preview_error: Message | None = None
    if picked is not None:
        try:
            stored = read_preview(context, picked, PREVIEW_ROWS)
            preview = shape_preview(stored, picked.rows, rows_page) if stored else None
        except StorageError:
            preview_error = Message(
                marked("the preview ({path}) could not be read from storage"),
                {"path": f"{version_prefix(picked)}/{PREVIEW_FILE}"},
            )
    if preview and picked is not None:  # rows shown (never a sealed test set's): a read for the owner's log
        record_read(
            context, request, session.user, owner_id=picked.owner_id, object_kind="dataset_version",
            object_id=picked.id, object_label=f"{dataset_name} v{picked.version}", action="preview",
        )  # fmt: skip
    return preview, preview_error
