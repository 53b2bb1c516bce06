"""Errors of the job store that the API turns into HTTP statuses."""

from __future__ import annotations

from tunedeck.core.errors import TunedeckError


class AlreadyExistsError(TunedeckError):
    """A name that must be unique (user, dataset, experiment) is taken (HTTP 409)."""
