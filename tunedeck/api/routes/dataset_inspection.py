"""Inspecting a dataset with a base model's tokenizer: tokens trained or masked, truncation, lengths.

The tokenizer lives in the engine's world (transformers), so the API queues an `inspect`
work item; the worker that runs it keeps the report on the version, under
`reports["inspection"][<base model id>]`, where the dashboard's loss-mask view reads it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.dataset_reads import refuse_purged_read, refuse_sealed_read
from tunedeck.api.schemas.datasets import InspectionIn
from tunedeck.api.schemas.work import WAIT_MAX_S
from tunedeck.api.work_answers import WORK_RESPONSES, waited_answer
from tunedeck.service.datasets.dataset_store import pick_version
from tunedeck.service.exports.work_requests import queue_work

router = APIRouter(prefix="/datasets", tags=["datasets"])


@router.post("/{dataset_id}/inspection", status_code=202, response_model=None, responses=WORK_RESPONSES)
async def inspect_dataset(
    dataset_id: str,
    body: InspectionIn,
    request: Request,
    user: CurrentUser,
    context: Context,
    wait: float = Query(0, ge=0, le=WAIT_MAX_S, description="Seconds to wait for the report before 202."),
) -> Any:
    """Tokenize a version exactly as training would for `base_model_id`; the report is kept on the version.

    The item's result is `{dataset_id, version, base_model_id, report}`.
    """
    version = pick_version(context, user, dataset_id, body.version)
    refuse_sealed_read(version)
    refuse_purged_read(context, user, version)
    base = context.jobs.base_models.get(user, body.base_model_id)
    inputs = {
        "version_id": version.id,
        "base_model_id": base.id,
        "max_length": body.max_length,
        "examples": body.examples,
        "train_on_inputs": body.train_on_inputs,
    }
    if body.max_prompt_length is not None:  # only preference rows read it; absent, earlier requests keep their identity
        inputs["max_prompt_length"] = body.max_prompt_length
    if body.truncation != "refuse":  # as above: the default is left out, so earlier requests keep their identity
        inputs["truncation"] = body.truncation
    identity = {**inputs}
    item = queue_work(context, user, "inspect", inputs, identity=identity)
    return await waited_answer(request, context, user, item, wait)
