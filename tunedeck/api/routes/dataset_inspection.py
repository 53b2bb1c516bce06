"""Inspecting a dataset with a base model's tokenizer: tokens trained or masked, truncation, lengths.

The tokenizer lives in the engine's world (transformers), so the API runs
`tunedeck.engine.inspection` as a process and keeps its report on the version, under
`reports["inspection"][<base model id>]`, where the dashboard's loss-mask view reads it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.dataset_store import pick_version, refuse_sealed_read
from tunedeck.api.engine_process import run_engine_module, scratch_folder
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.datasets import InspectionIn, InspectionOut

router = APIRouter(prefix="/datasets", tags=["datasets"])
INSPECTION_TIMEOUT_S = 600.0
REPORT_KEY = "inspection"


@router.post(
    "/{dataset_id}/inspection",
    response_model=InspectionOut,
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def inspect_dataset(dataset_id: str, body: InspectionIn, user: CurrentUser, context: Context) -> InspectionOut:
    """Tokenize a version exactly as training would for `base_model_id`, and keep the report on the version."""
    version = pick_version(context, user, dataset_id, body.version)
    refuse_sealed_read(version)
    base = context.jobs.base_models.get(user, body.base_model_id)
    with scratch_folder(context.scratch_dir, "inspect-") as folder:
        data = context.artifacts.get_file(version.storage_key, folder / "data.jsonl")
        spec: dict[str, Any] = {
            "dataset": str(data),
            "model": {"name": base.local_path or base.hub_id, "revision": base.revision},
            "max_length": body.max_length,
            "examples": body.examples,
            "train_on_inputs": body.train_on_inputs,
        }
        with context.engine_slots.hold(user.id, "inspection"):
            report = run_engine_module("inspection", spec, folder, timeout_s=INSPECTION_TIMEOUT_S)
    stored = (version.reports or {}).get(REPORT_KEY)
    # Older single-report entries (without a model key) are replaced by the per-model map.
    by_model = dict(stored) if isinstance(stored, dict) and "examples" not in stored else {}
    by_model[base.id] = report
    context.jobs.datasets.set_reports(user, version.id, {REPORT_KEY: by_model})
    return InspectionOut(dataset_id=dataset_id, version=version.version, base_model_id=base.id, report=report)
