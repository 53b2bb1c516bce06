"""Guards a job declares ("what must not degrade", in the experiment method).

They are kept in the job's row (`jobs.guards`), written in the transaction that queues the
job, as compact strings readable back by `tunedeck.eval.guards.parse_guards`. Jobs queued
before the column existed kept them in `<job prefix>/guards.json`; that file is still read
for them. They judge the finished run in the job report; the worker also hands the row's guards
to the engine, which warns on the job (a `guard_regression` diagnosis) when the final model breaks
one or falls below the baseline on its metric.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tunedeck.eval.guards import parse_guards
from tunedeck.storage.base import ArtifactStore, job_prefix
from tunedeck.store.models import Job

LEGACY_GUARDS_FILE = "guards.json"


def normalized_guards(specs: Sequence[str | Mapping[str, Any]]) -> list[str]:
    """The guards in compact form; ConfigError naming `guards[i]` for each bad entry."""
    return [str(guard) for guard in parse_guards(specs)]


def read_job_guards(artifacts: ArtifactStore, job: Job) -> list[str]:
    """The guards a job declared at creation (empty when it declared none)."""
    if job.guards is not None:
        return [str(guard) for guard in job.guards]
    key = f"{job_prefix(job.owner_id, job.id)}/{LEGACY_GUARDS_FILE}"
    if not artifacts.exists(key):
        return []
    stored = json.loads(artifacts.read_bytes(key).decode("utf-8"))
    return [str(guard) for guard in (stored.get("guards") or [])] if isinstance(stored, dict) else []
