"""Experiments as every front end shows them: the response form of a row, and a reference config's pinned datasets."""

from __future__ import annotations

from typing import Any

from tunedeck.api.schemas.experiments import ExperimentOut
from tunedeck.eval.experiment_report import GUARDS_KEY, NOTES_KEY, variant_notes
from tunedeck.service.context import ServiceContext
from tunedeck.service.datasets.dataset_store import resolve_training_version_id
from tunedeck.service.plans.experiment_sources import pin_dataset_versions
from tunedeck.store.access import Actor
from tunedeck.store.models import Experiment


def experiment_out(row: Experiment) -> ExperimentOut:
    """The response form of an experiment row."""
    reference = dict(row.reference_config or {})
    guards = [str(guard) for guard in reference.pop(GUARDS_KEY, [])]
    notes = variant_notes(reference)
    reference.pop(NOTES_KEY, None)
    return ExperimentOut(
        id=row.id,
        name=row.name,
        hypothesis=row.hypothesis,
        reference_config=reference,
        guards=guards,
        variant_notes=notes,
        created_at=row.created_at,
    )


def pinned_reference(context: ServiceContext, user: Actor, reference: dict[str, Any]) -> dict[str, Any]:
    """`reference` with its validation dataset pinned to a version, resolved as a job's would be."""
    field = "reference_config.validation_dataset_id"
    return pin_dataset_versions(
        reference, lambda dataset_id: resolve_training_version_id(context, user, dataset_id, field)
    )
