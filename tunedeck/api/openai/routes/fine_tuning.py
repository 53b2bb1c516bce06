"""`/v1/fine_tuning`: see `tunedeck.api.openai`."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
