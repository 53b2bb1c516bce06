"""What every request needs: settings, the job store, the artifact store, the authenticators.

Built once by `create_app` and kept on `app.state.tunedeck`; routes reach it
through the `get_context` dependency, never through globals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

from tunedeck.core.settings import Settings
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.store import JobStore

if TYPE_CHECKING:
    from tunedeck.api.auth import Principal

# Returns the signed-in user, None to let the next authenticator try, or raises HTTPException.
Authenticator = Callable[[Request, "ApiContext"], "Principal | None"]


@dataclass
class ApiContext:
    """The long-lived collaborators of one app instance."""

    settings: Settings
    jobs: JobStore
    artifacts: ArtifactStore
    authenticators: list[Authenticator] = field(default_factory=list)
    # How often an event stream polls the store; tests shorten it.
    stream_poll_seconds: float = 1.0
    # How often an open stream checks that its credential still signs its user in (revoked tokens, disabled users).
    stream_recheck_seconds: float = 5.0

    @property
    def uploads_dir(self) -> Path:
        """Where uploads stream to before validation (generated names only)."""
        return self.settings.resolved_uploads_dir()

    @property
    def scratch_dir(self) -> Path:
        """Where archives are assembled before streaming."""
        return (self.settings.data_dir / "scratch").resolve()

    def add_authenticator(self, authenticator: Authenticator, *, first: bool = False) -> None:
        """Plug in another way to sign in (the dashboard adds its session cookie here)."""
        if first:
            self.authenticators.insert(0, authenticator)
        else:
            self.authenticators.append(authenticator)


def get_context(request: Request) -> ApiContext:
    """Dependency: the app's ApiContext."""
    context: ApiContext = request.app.state.tunedeck
    return context


Context = Annotated[ApiContext, Depends(get_context)]
