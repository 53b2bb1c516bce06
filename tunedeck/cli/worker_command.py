"""`tunedeck worker`: a training worker that claims jobs from the shared database."""

from __future__ import annotations

import logging

import typer
from rich.console import Console

from tunedeck.cli.errors import reported_errors
from tunedeck.core.settings import Settings

console = Console()


def worker(
    database_url: str | None = typer.Option(None, "--database-url", help="[default: TUNEDECK_DATABASE_URL]"),
    storage_url: str | None = typer.Option(None, "--storage-url", help="[default: TUNEDECK_STORAGE_URL]"),
    s3_endpoint_url: str | None = typer.Option(None, "--s3-endpoint-url", help="S3-compatible endpoint."),
    max_jobs: int = typer.Option(1, "--max-jobs", min=1, help="Jobs run at once on this machine."),
    lease_seconds: float | None = typer.Option(None, "--lease-seconds", help="Lease length between heartbeats."),
    worker_id: str | None = typer.Option(None, "--worker-id", help="Name in the fencing log [default: host-pid]."),
    devices: str | None = typer.Option(
        None,
        "--devices",
        help="Accelerators jobs may use: a count (2) or ids (0,1; one id as 3,). Each job gets its own "
        "[default: TUNEDECK_WORKER_DEVICES, else CUDA_VISIBLE_DEVICES, else every NVIDIA device].",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="A Ray cluster (its head's host:port, or auto) to run jobs across several machines on, "
        "with Ray Train; needs `make install-ray` here and on every node [default: TUNEDECK_RAY_ADDRESS].",
    ),
) -> None:
    """Claim and run training jobs until stopped; SIGTERM checkpoints running jobs and requeues them."""
    from tunedeck.worker.supervisor import Worker, build_context, install_drain_on_sigterm

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with reported_errors():
        settings = Settings()
        updates = {
            key: value
            for key, value in (
                ("database_url", database_url),
                ("storage_url", storage_url),
                ("s3_endpoint_url", s3_endpoint_url),
                ("lease_seconds", lease_seconds),
            )
            if value is not None
        }
        settings = settings.model_copy(update=updates)
        try:
            ctx = build_context(
                settings, max_concurrent_jobs=max_jobs, worker_id=worker_id, devices=devices,
                ray_address=ray_address or settings.ray_address,
            )
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--devices") from error
    install_drain_on_sigterm(ctx)
    shown = ",".join(ctx.devices) or "none"
    console.print(f"worker [bold]{ctx.worker_id}[/bold]: devices [{shown}], up to {max_jobs} job(s) at once")
    if ctx.ray_cluster is not None:
        console.print(f"jobs across machines on the {ctx.ray_cluster.describe()}")
    try:
        Worker(ctx).run_forever()
    except KeyboardInterrupt:
        ctx.drain.set()
        ctx.stop.set()
    finally:
        ctx.store.close()
