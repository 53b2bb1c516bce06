"""Base models: register a hub id (+ revision) or a local folder with weights; list, get, delete.

A registration is recorded as given; the worker resolves it and pins the
commit (hub) or content fingerprint (local folder) the first time it loads it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import APIRouter, Response, status

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.base_models import BaseModelCreate, BaseModelFactsOut, BaseModelOut, RemoteCodeIn
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.core.errors import Issue, IssueListError, MissingReferenceError
from tunedeck.core.model_code import foreign_code_references
from tunedeck.core.paths import inside_any, links_leaving, roots_text
from tunedeck.service.models.base_model_facts import base_model_facts
from tunedeck.store.models import BaseModelRecord

router = APIRouter(prefix="/base-models", tags=["base models"])
logger = logging.getLogger(__name__)
WEIGHT_PATTERNS = ("*.safetensors",)


def check_local_model(path_text: str, roots: list[Path]) -> None:
    """Raise unless `path_text` is a model folder inside `roots` with no link leading out of it.

    A model folder holds config.json and safetensors weights. One answer for every path that is
    not such a folder inside the roots (MissingReferenceError, a 404 like an unknown id), so it
    does not reveal which other server paths exist; a model folder that breaks a rule is an
    IssueListError (422).
    """

    def issue(message: str, expected: str) -> list[Issue]:
        return [Issue(message, field="local_path", expected=expected, found=path_text)]

    def refuse(message: str, expected: str) -> IssueListError:
        return IssueListError(issue(message, expected), title="invalid base model")

    not_a_model = MissingReferenceError(
        issue(
            "not a model folder inside the model roots",
            f"an absolute path to a folder with config.json and *.safetensors under {roots_text(roots)}",
        ),
        title="no such base model folder",
    )
    path = Path(path_text)
    if not path.is_absolute():  # against the documented pattern, and says nothing about the server
        raise refuse("not an absolute path", f"an absolute path to a model folder under {roots_text(roots)}")
    try:
        folder = path.resolve()
        ok = (
            inside_any(folder, roots)
            and folder.is_dir()
            and (folder / "config.json").is_file()
            and any(next(folder.glob(pattern), None) is not None for pattern in WEIGHT_PATTERNS)
        )
    except OSError:
        ok = False
    if not ok:
        raise not_a_model
    foreign = foreign_code_references(folder)
    if foreign:
        raise refuse(
            f"the model's auto_map refers to code in another repository: {'; '.join(foreign[:3])}",
            "a model whose code, if any, is in its own folder",
        )
    leaving = links_leaving(folder)
    if leaving:
        raise refuse(
            f"the model folder links to files outside it: {', '.join(leaving[:5])}",
            "a folder whose files are all inside it (copy linked files in)",
        )


def base_model_out(row: BaseModelRecord) -> BaseModelOut:
    """The wire form of a base-model row."""
    return BaseModelOut(
        id=row.id,
        name=row.name,
        source="hub" if row.hub_id else "local",
        hub_id=row.hub_id,
        revision=row.revision,
        local_path=row.local_path,
        resolved=row.resolved,
        created_at=row.created_at,
        remote_code_allowed=row.remote_code_allowed_at is not None,
        remote_code_allowed_at=row.remote_code_allowed_at,
    )


@router.post(
    "",
    response_model=BaseModelOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        404: {"model": ErrorOut, "description": "`local_path` is not a model folder inside the model roots."},
        422: {"model": ErrorOut},
    },
)
def register_base_model(body: BaseModelCreate, user: CurrentUser, context: Context) -> BaseModelOut:
    """Register a base model from a hub id (revision defaults to main) or a local folder."""
    if body.local_path is not None:
        check_local_model(body.local_path, context.settings.resolved_model_roots())
    source = body.hub_id or body.local_path or ""
    row = context.jobs.base_models.register(
        user,
        name=body.name or source.rstrip("/").rsplit("/", 1)[-1] or "model",
        hub_id=body.hub_id,
        local_path=body.local_path,
        revision=(body.revision or "main") if body.hub_id else None,
    )
    return base_model_out(row)


@router.get("", response_model=list[BaseModelOut])
def list_base_models(user: CurrentUser, context: Context) -> list[BaseModelOut]:
    """The caller's base models, oldest first."""
    return [base_model_out(row) for row in context.jobs.base_models.list(user)]


@router.get("/{base_model_id}", response_model=BaseModelOut, responses={404: {"model": ErrorOut}})
def get_base_model(base_model_id: str, user: CurrentUser, context: Context) -> BaseModelOut:
    """One base model."""
    return base_model_out(context.jobs.base_models.get(user, base_model_id))


@router.get("/{base_model_id}/facts", response_model=BaseModelFactsOut, responses={404: {"model": ErrorOut}})
def get_base_model_facts(base_model_id: str, user: CurrentUser, context: Context) -> BaseModelFactsOut:
    """Parameter count, size on disk, architecture, licence and chat template, read from the model's files.

    Only headers and configs are read, never the weights, and no model code runs. A hub model's
    facts are known once a worker on this server has fetched it (`known` false until then).
    """
    row = context.jobs.base_models.get(user, base_model_id)
    facts, summary = base_model_facts(row, context.settings.resolved_model_roots())
    if facts is None:
        return BaseModelFactsOut(id=row.id, known=False, summary=summary)
    return BaseModelFactsOut(id=row.id, known=True, summary=summary, **facts.to_dict())


@router.put(
    "/{base_model_id}/remote-code",
    response_model=BaseModelOut,
    responses={403: {"model": ErrorOut}, 404: {"model": ErrorOut}},
)
def set_remote_code(base_model_id: str, body: RemoteCodeIn, user: CurrentUser, context: Context) -> BaseModelOut:
    """Admins: allow (or withdraw) running this model's own code for jobs that set trust_remote_code.

    Another user's model answers 404 as everywhere; the owner, if not an admin, gets 403.
    References in the model's auto_map to code in another hub repository stay refused.
    """
    context.jobs.base_models.get(user, base_model_id)
    row = context.jobs.base_models.set_remote_code(user, base_model_id, allowed=body.allowed)
    logger.warning(
        "base model %s: running its own code %s by admin %s",
        row.id, "allowed" if body.allowed else "withdrawn", user.id,
    )
    return base_model_out(row)


@router.delete("/{base_model_id}", status_code=status.HTTP_204_NO_CONTENT, responses={404: {"model": ErrorOut}})
def delete_base_model(base_model_id: str, user: CurrentUser, context: Context) -> Response:
    """Forget a registration (jobs that used it keep their config; their link becomes empty)."""
    context.jobs.base_models.delete(user, base_model_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
