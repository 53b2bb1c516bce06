"""`/v1/models`: see `tunedeck.api.openai`."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
