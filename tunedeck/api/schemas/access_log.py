"""The access log on the wire: one read of a user's raw data, and a page of them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from tunedeck.api.schemas.common import Page


class AccessLogEntryOut(BaseModel):
    """One read: who read which object of the owner, how, from where and when."""

    id: int
    owner_id: str
    reader_id: str
    reader_name: str
    object_kind: Literal["dataset_version", "test_set", "export", "checkpoint", "final_model"]
    object_id: str
    object_label: str
    action: Literal["download", "preview", "read"]
    via: Literal["api", "web", "cli"]
    client_address: str | None
    at: datetime


AccessLogPage = Page[AccessLogEntryOut]
