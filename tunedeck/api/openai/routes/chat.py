"""`/v1/chat`: see `tunedeck.api.openai`."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
