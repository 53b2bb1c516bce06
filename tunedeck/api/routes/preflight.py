"""`POST /preflight`: the checks before training on a job's inputs, before anything is queued.

Measuring needs the engine (a real forward/backward step, a tiny overfit, a
checkpoint cycle), so the API runs `tunedeck.engine.preflight` in a process, on
copies of the datasets fetched (and checksum-verified) from storage.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.dataset_store import resolve_training_version_id
from tunedeck.api.engine_process import run_engine_module, scratch_folder
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.preflight import PreflightIn, PreflightOut
from tunedeck.config.loading import validate_config
from tunedeck.jobs.base_models import refuse_unallowed_remote_code

router = APIRouter(tags=["preflight"])
PREFLIGHT_TIMEOUT_S = 1800.0


@router.post("/preflight", response_model=PreflightOut, responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}})
def preflight(body: PreflightIn, user: CurrentUser, context: Context) -> PreflightOut:
    """Run the eight preflight checks on this base model, data and config; nothing is queued."""
    config = validate_config(body.config)
    base = context.jobs.base_models.get(user, body.base_model_id)
    refuse_unallowed_remote_code(config.trust_remote_code, base)
    # Preflight reads the rows a job would train on, so a sealed test set is refused as for a job.
    versions = {"train": resolve_training_version_id(context, user, body.train_dataset_id, "train_dataset_id")}
    if body.validation_dataset_id:
        versions["validation"] = resolve_training_version_id(
            context, user, body.validation_dataset_id, "validation_dataset_id"
        )
    with scratch_folder(context.scratch_dir, "preflight-") as folder:
        files = {
            role: context.artifacts.get_file(
                context.jobs.datasets.get_version(user, version_id).storage_key, folder / f"{role}.jsonl"
            )
            for role, version_id in versions.items()
        }
        spec: dict[str, Any] = {
            "config": config.model_dump(mode="json", exclude_unset=True),
            "model": {"name": base.local_path or base.hub_id, "revision": base.revision},
            "train": str(files["train"]),
            "validation": str(files["validation"]) if "validation" in files else None,
            "out": str(folder / "run"),
        }
        with context.engine_slots.hold(user.id, "preflight"):
            report = run_engine_module("preflight", spec, folder, timeout_s=PREFLIGHT_TIMEOUT_S)
    return PreflightOut(status=str(report.get("status")), ok=bool(report.get("ok")), report=report)
