"""`tunedeck serve`: migrate the database, bootstrap an admin, start the API (and embedded workers).

Listening rule (the server never listens beyond loopback without auth): every API route except
health and version needs a token, so auth is always on; still, a non-loopback address is refused unless `--allow-remote`
is given *and* at least one user existed before this start. A first start
therefore happens on loopback (or after `tunedeck users create`), so the
bootstrap admin token is printed on a local terminal before anything is exposed.
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console

from tunedeck.cli.errors import reported_errors
from tunedeck.core.errors import TunedeckError
from tunedeck.core.settings import Settings

console = Console()

BOOTSTRAP_ADMIN = "admin"


class ListenRefused(TunedeckError):
    """The requested address would expose the server in a way the listening rule forbids."""


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (127.0.0.0/8, ::1 or localhost)."""
    if host.lower() in {"localhost", "localhost.localdomain"}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        # A host name other than localhost may resolve anywhere: treat it as remote.
        return False


def check_listen_address(host: str, *, allow_remote: bool, users_before_start: int) -> None:
    """Raise ListenRefused unless the listening rule above allows `host`."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise ListenRefused(
            f"refusing to listen on {host}, beyond loopback: pass --allow-remote to expose the API "
            "(every route but health and version then needs an API token)"
        )
    if users_before_start == 0:
        raise ListenRefused(
            f"refusing to listen on {host} on a first start: start once on 127.0.0.1 (an admin token is "
            "printed) or create a user with `tunedeck users create NAME --admin`, then retry"
        )


@dataclass
class EmbeddedWorkers:
    """Training workers running in threads of the API process, stopped with the server."""

    stop_event: threading.Event
    thread: threading.Thread | None

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the workers to checkpoint and requeue, then wait for them."""
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout)


def start_embedded_workers(settings: Settings, count: int) -> EmbeddedWorkers:
    """Start `count` workers in a background thread; none when `count` is 0."""
    stop_event = threading.Event()
    if count <= 0:
        return EmbeddedWorkers(stop_event, None)
    # --- embedded worker hook: the worker package's claim loop, `count` job slots, in one thread;
    # it uses the same database and artifact store as the API and drains when stop_event is set.
    from tunedeck.worker.embedded import run_embedded_workers

    thread = threading.Thread(
        target=run_embedded_workers,
        args=(settings, count, stop_event),
        name="tunedeck-embedded-workers",
        daemon=True,
    )
    thread.start()
    # --- end of embedded worker hook
    return EmbeddedWorkers(stop_event, thread)


def serve(
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on (default: TUNEDECK_HOST, else 127.0.0.1)."
    ),
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help="TCP port (default: TUNEDECK_PORT, else 8000)."
    ),
    workers: int = typer.Option(
        1, "--workers", min=0, help="Jobs the embedded worker runs at once (0: no embedded worker)."
    ),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Allow a non-loopback --host (needs at least one user)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="Server log level."),
) -> None:
    """Start the API (OpenAPI at /docs) with embedded workers; the first start prints an admin token."""
    import uvicorn

    from tunedeck.api.app import create_app
    from tunedeck.service.users.bootstrap import bootstrap_admin, prepare_database

    with reported_errors():
        settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
        settings = settings.model_copy(update={"host": host or settings.host, "port": port or settings.port})
        host, port = settings.host, settings.port
        users_before = prepare_database(settings)
        check_listen_address(host, allow_remote=allow_remote, users_before_start=users_before)
        token = bootstrap_admin(settings, BOOTSTRAP_ADMIN) if users_before == 0 else None
        app = create_app(settings)
        embedded = start_embedded_workers(settings, workers)
    if token is not None:
        # Printed once, to the terminal only; it is stored as a SHA-256 hash and never logged.
        console.print(f"[bold]First start:[/bold] created admin user [bold]{BOOTSTRAP_ADMIN}[/bold].")
        console.print(
            f"API token (shown once, keep it): [bold green]{token}[/bold green]", highlight=False, soft_wrap=True
        )
    console.print(f"tunedeck API on http://{host}:{port} (docs at /docs), {workers} embedded worker(s)")
    try:
        uvicorn.Server(server_config(app, settings, host=host, port=port, log_level=log_level)).run()
    finally:
        embedded.stop()


def server_config(app: Any, settings: Settings, *, host: str, port: int, log_level: str) -> Any:
    """The HTTP server's configuration: X-Forwarded-For believed only from `settings.trusted_proxies`.

    uvicorn believes the header from 127.0.0.1 by default, which on a server bound to loopback
    is every client; an address a client can forge would end up in the access log.
    """
    import uvicorn

    proxies = [address.strip() for address in (settings.trusted_proxies or "").split(",") if address.strip()]
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
    )
