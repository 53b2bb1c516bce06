"""Fine-tuned model names in the client's form: `ft:<base model>:<suffix>:<job id>`.

The job id is always the last part, so a base model name holding `:` still parses; a
job without a suffix is `ft:<base>::<job id>`, as the client's API writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "ft:"


@dataclass(frozen=True)
class FineTunedName:
    """The parts of a fine-tuned model name."""

    base: str
    suffix: str
    job_id: str


def fine_tuned_model_name(base: str, suffix: str | None, job_id: str) -> str:
    """The name a job's final model is known by under `/v1`."""
    return f"{PREFIX}{base}:{suffix or ''}:{job_id}"


def parse_fine_tuned_name(name: str) -> FineTunedName | None:
    """The parts of `name`, or None when it is not a fine-tuned model name (a base model's, say)."""
    if not name.startswith(PREFIX):
        return None
    rest, _, job_id = name[len(PREFIX):].rpartition(":")
    base, _, suffix = rest.rpartition(":")
    if not base or not job_id:
        return None
    return FineTunedName(base=base, suffix=suffix, job_id=job_id)
