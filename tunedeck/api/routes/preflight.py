"""`POST /preflight`: the checks before training on a job's inputs, before anything is queued for training.

Measuring needs the engine (a real forward/backward step, a tiny overfit, a checkpoint
cycle) and the devices the job would train on, so the API queues a `preflight` work item
that needs as many devices as the job would; a worker runs it on copies of the datasets
fetched (and checksum-verified) from storage. The item's result is the report.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.preflight import PreflightIn
from tunedeck.api.schemas.work import WAIT_MAX_S
from tunedeck.api.work_answers import WORK_RESPONSES, waited_answer
from tunedeck.config.loading import validate_config
from tunedeck.service.datasets.dataset_store import resolve_training_version_id
from tunedeck.service.exports.work_requests import queue_work
from tunedeck.store.base_models import refuse_unallowed_remote_code

router = APIRouter(tags=["preflight"])


@router.post("/preflight", status_code=202, response_model=None, responses=WORK_RESPONSES)
async def preflight(
    body: PreflightIn,
    request: Request,
    user: CurrentUser,
    context: Context,
    wait: float = Query(0, ge=0, le=WAIT_MAX_S, description="Seconds to wait for the checks to end before 202."),
) -> Any:
    """Run the preflight checks on this base model, data and config; the result is `{status, ok, report}`."""
    config = validate_config(body.config)
    base = context.jobs.base_models.get(user, body.base_model_id)
    refuse_unallowed_remote_code(config.trust_remote_code, base)
    # Preflight reads the rows a job would train on, so a sealed test set is refused as for a job.
    task = config.task
    versions = {
        "train": resolve_training_version_id(context, user, body.train_dataset_id, "train_dataset_id", task=task)
    }
    if body.validation_dataset_id:
        versions["validation"] = resolve_training_version_id(
            context, user, body.validation_dataset_id, "validation_dataset_id", task=task
        )
    inputs: dict[str, Any] = {
        "config": config.model_dump(mode="json", exclude_unset=True),
        "base_model_id": base.id,
        "versions": versions,
    }
    item = queue_work(context, user, "preflight", inputs, devices_needed=body.devices_needed)
    return await waited_answer(request, context, user, item, wait)
