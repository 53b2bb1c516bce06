"""Guards a job declares ("what must not degrade", in the experiment method), kept beside the job's artifacts.

The job row has no column for them, so they are stored as `<job prefix>/guards.json`
(compact strings, readable back by `tunedeck.eval.guards.parse_guards`). That file
goes with the job: a clone copies it, deleting the job's artifacts deletes it. The
worker never reads it: guards judge the finished run, in the job report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tunedeck.eval.guards import parse_guards
from tunedeck.jobs.models import Job
from tunedeck.storage.base import ArtifactStore, job_prefix

GUARDS_FILE = "guards.json"


def normalized_guards(specs: Sequence[str | Mapping[str, Any]]) -> list[str]:
    """The guards in compact form; ConfigError naming `guards[i]` for each bad entry."""
    return [str(guard) for guard in parse_guards(specs)]


def guards_key(job: Job) -> str:
    """Where a job's declared guards are stored."""
    return f"{job_prefix(job.owner_id, job.id)}/{GUARDS_FILE}"


def store_job_guards(artifacts: ArtifactStore, job: Job, guards: Sequence[str]) -> None:
    """Keep a job's guards (nothing is written for a job that declares none)."""
    if guards:
        artifacts.put_bytes(guards_key(job), json.dumps({"guards": list(guards)}, indent=1).encode("utf-8"))


def read_job_guards(artifacts: ArtifactStore, job: Job) -> list[str]:
    """The guards a job declared at creation (empty when it declared none)."""
    key = guards_key(job)
    if not artifacts.exists(key):
        return []
    stored = json.loads(artifacts.read_bytes(key).decode("utf-8"))
    return [str(guard) for guard in (stored.get("guards") or [])] if isinstance(stored, dict) else []
