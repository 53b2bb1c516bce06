"""Dataset responses: a dataset, its versions, previews and reports."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

ReportName = Literal["validation", "dedup", "scan"]


class DatasetVersionOut(BaseModel):
    """One immutable version of a dataset: canonical rows in artifact storage."""

    id: str
    version: int
    kind: str
    source_format: str
    rows: int
    sha256: str
    size_bytes: int
    dropped_rows: int = 0
    created_at: datetime


class DatasetOut(BaseModel):
    """A named dataset and its newest version."""

    id: str
    name: str
    created_at: datetime
    latest: DatasetVersionOut | None = None
    versions: int = 0


class DatasetPreviewOut(BaseModel):
    """The first rows of a dataset version, canonical form."""

    dataset_id: str
    version: int
    rows: list[dict[str, Any]]
    total_rows: int


class DatasetReportOut(BaseModel):
    """A report computed at upload: validation, dedup or PII/secret scan."""

    dataset_id: str
    version: int
    name: ReportName
    report: dict[str, Any] = Field(default_factory=dict)
