"""Settings from `TUNEDECK_*` environment variables, read once by entry points and passed down.

This is the only module that reads tunedeck's own variables from the environment. Entry points
(the CLI's commands, the server, the worker) read `Settings`; the processes they start get what
they need in their run spec or as arguments. The few variables a process must take from the
environment it was started with (a dataset mirror, the failpoints crash tests arm) are read by
`process_settings`, which that process's entry point calls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tunedeck.core.tracker_destinations import TrackerDestinations, WandbMode

ENV_PREFIX = "TUNEDECK_"


class Settings(BaseSettings):
    """Where tunedeck keeps its state and how it listens."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    data_dir: Path = Field(Path(".tunedeck"), description="Database, uploads, runs and local artifacts.")
    database_url: str | None = Field(None, description="SQLAlchemy URL; SQLite in data_dir when unset.")
    storage_url: str | None = Field(
        None, description="file:///path or s3://bucket/prefix; data_dir/artifacts when unset."
    )
    s3_endpoint_url: str | None = Field(None, description="Endpoint of an S3-compatible server.")
    s3_sse: str | None = Field(
        None, description="Server-side encryption S3 applies to every object: AES256 or aws:kms."
    )
    s3_sse_kms_key_id: str | None = Field(None, description="KMS key for aws:kms server-side encryption.")
    encryption_key_file: Path | None = Field(
        None,
        description=(
            "File of key-encryption keys (one `id:base64key` a line, the last one active, mode 0600); "
            "when set, every stored object is encrypted before it leaves the process."
        ),
    )
    encryption_keys: SecretStr | None = Field(
        None, description="The same keys inline, `id:base64key,id2:base64key` (instead of the key file)."
    )
    cache_dir: Path | None = Field(None, description="Tokenized-dataset cache; data_dir/cache/tokenized when unset.")
    model_roots: str | None = Field(
        None,
        description=(
            "Folders (separated by the path separator, ':' on Linux) that users may register local base "
            "models from; data_dir/models when unset."
        ),
    )
    host: str = Field("127.0.0.1", description="Address the API listens on.")
    port: int = Field(8000, ge=1, le=65535, description="TCP port the API listens on.")
    trusted_proxies: str | None = Field(
        None,
        description="Comma-separated addresses of the reverse proxies whose X-Forwarded-For header is believed "
        "(e.g. 127.0.0.1 for a proxy on this machine); unset: every answer and the access log see the address "
        "that connected, whatever headers a client sends.",
    )
    max_upload_bytes: int = Field(512 * 1024 * 1024, ge=1, description="Largest dataset upload accepted.")
    max_upload_rows: int = Field(5_000_000, ge=1, description="Most rows accepted in one dataset.")
    lease_seconds: float = Field(30.0, gt=0, description="How long a worker's claim on a job lasts between heartbeats.")
    max_attempts: int = Field(3, ge=1, description="Attempts before a job whose lease keeps expiring fails.")
    keep_checkpoints: int = Field(2, ge=1, description="Newest committed checkpoints kept per job (plus the best).")
    retention_max_days: int | None = Field(
        None,
        ge=1,
        description=(
            "Longest retention, in days, an owner may set; when set, it also applies to everything "
            "an owner keeps without a policy (unset: owners may keep things forever)."
        ),
    )
    retention_min_days: int = Field(1, ge=1, description="Shortest retention, in days, an owner may set.")
    work_slots: int = Field(
        2, ge=1, le=64, description="Exports, preflights, inspections and generations a worker runs at once."
    )
    max_pending_work_per_user: int = Field(
        4, ge=1, le=1000, description="Of those, how many one user may have queued or running at once (429 beyond)."
    )
    chat_worker_wait_s: float = Field(
        30.0,
        gt=0,
        description=(
            "Seconds a chat completion (/v1/chat/completions) waits for a worker to take it up; then it is "
            "cancelled and answered 503 (no worker answered)."
        ),
    )
    generation_cache_bytes: int = Field(
        4 * 1024**3,
        ge=0,
        description=(
            "Bytes of model weights each worker's generation process keeps loaded between requests, least "
            "recently used dropped first; a larger model still answers but is not kept (0 keeps none)."
        ),
    )
    engine_fork_server: bool = Field(
        True,
        description=(
            "On a worker without accelerators, fork each run from one process that imported the engine "
            "once, instead of importing torch and transformers again for every job."
        ),
    )
    keep_run_folders_hours: float = Field(
        0.0,
        ge=0,
        description=(
            "Hours a finished job's local run folder stays on its worker once everything it produced is "
            "in storage (0: removed right away)."
        ),
    )
    system_sample_seconds: float = Field(
        15.0,
        ge=0,
        description=(
            "Seconds between a training run's system samples (host CPU and memory, device use, memory, "
            "temperature and power), shown on the job page; the interval doubles as a long run goes on, "
            "to at most 800 samples a run (0: no samples)."
        ),
    )
    sweep_interval_s: float = Field(
        600.0,
        gt=0,
        description=(
            "Seconds between sweeps of leftovers: workers' finished run and work scratch folders, and the "
            "API's abandoned uploads."
        ),
    )
    public_url: str | None = Field(
        None,
        description=(
            "The address people open the dashboard at (https://tunedeck.example.org); experiment trackers then "
            "link each run to its job page (unset: they record the job id)."
        ),
    )
    # Experiment trackers a job may report to (its report_to key); the job chooses which, these say where.
    mlflow_tracking_uri: str | None = Field(
        None,
        description="MLflow tracking server or store (http://..., sqlite:///...); data_dir/trackers/mlflow when unset.",
    )
    mlflow_experiment: str = Field("tunedeck", min_length=1, description="MLflow experiment the runs go into.")
    tensorboard_dir: Path | None = Field(
        None,
        description="TensorBoard event files, one sub-folder per run; data_dir/trackers/tensorboard when unset.",
    )
    wandb_mode: WandbMode = Field(
        "offline", description="Weights & Biases: offline (run files on the worker, `wandb sync` later) or online."
    )
    wandb_project: str = Field("tunedeck", min_length=1, description="Weights & Biases project.")
    wandb_entity: str | None = Field(
        None, description="Weights & Biases entity (team or user); the API key's default when unset."
    )
    wandb_dir: Path | None = Field(None, description="Weights & Biases run files; data_dir/trackers/wandb when unset.")
    wandb_base_url: str | None = Field(
        None, description="A self-hosted Weights & Biases server; its hosted service when unset."
    )
    wandb_api_key: SecretStr | None = Field(
        None, description="Weights & Biases API key for online mode; given to the training process's environment only."
    )
    trackio_dir: Path | None = Field(
        None, description="trackio's local database folder; data_dir/trackers/trackio when unset."
    )
    trackio_project: str = Field("tunedeck", min_length=1, description="trackio project.")
    memory_cap: str | None = Field(
        None,
        description=(
            "Simulate a smaller accelerator (or host) for the memory fit of the checks before training and "
            "of the training itself, e.g. 24GiB; written into each run's spec (unset: the device's memory)."
        ),
    )
    worker_devices: str | None = Field(
        None,
        description=(
            "Accelerators a worker's jobs may use: a count (2) or ids (0,1; one id as 3,); `tunedeck worker "
            "--devices` wins (unset: CUDA_VISIBLE_DEVICES, else every NVIDIA device)."
        ),
    )
    ray_address: str | None = Field(
        None,
        description=(
            "A Ray cluster (its head's host:port, or auto) the worker runs jobs across several machines on; "
            "`tunedeck worker --ray-address` wins (unset: no cluster)."
        ),
    )

    @model_validator(mode="after")
    def _retention_bounds_in_order(self) -> Settings:
        if self.retention_max_days is not None and self.retention_max_days < self.retention_min_days:
            raise ValueError(
                f"TUNEDECK_RETENTION_MAX_DAYS ({self.retention_max_days}) is below "
                f"TUNEDECK_RETENTION_MIN_DAYS ({self.retention_min_days}): no retention would be allowed"
            )
        return self

    def resolved_database_url(self) -> str:
        """The database URL, defaulting to SQLite inside data_dir."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'tunedeck.db').resolve()}"

    def encrypts_at_rest(self) -> bool:
        """Whether an operator's key is configured: stored objects are then encrypted client-side."""
        return self.encryption_key_file is not None or self.encryption_keys is not None

    def worker_cache_dir(self) -> Path | None:
        """The tokenized cache workers share between runs, or None for none.

        With encryption at rest and no cache folder set explicitly, workers keep no shared
        cache: tokenized rows would otherwise stay on the worker's disk, unencrypted, after
        the job that needed them; each run then tokenizes into its own folder, removed with it.
        """
        if self.cache_dir is None and self.encrypts_at_rest():
            return None
        return self.resolved_cache_dir()

    def resolved_cache_dir(self) -> Path:
        """Where tokenized datasets are cached, shared by every run on this machine."""
        return (self.cache_dir or self.data_dir / "cache" / "tokenized").resolve()

    def resolved_model_roots(self) -> list[Path]:
        """The folders local base models may come from, resolved; data_dir/models by default."""
        if self.model_roots is None:
            return [(self.data_dir / "models").resolve()]
        return [Path(part).expanduser().resolve() for part in self.model_roots.split(os.pathsep) if part.strip()]

    def resolved_runs_dir(self) -> Path:
        """Where a worker on this machine keeps its jobs' run folders and its work scratch folders."""
        return (self.data_dir / "runs").resolve()

    def resolved_uploads_dir(self) -> Path:
        """Where uploads stream to before validation (generated names only)."""
        return (self.data_dir / "uploads" / "incoming").resolve()

    def tracker_destinations(self) -> TrackerDestinations:
        """Where jobs' experiment trackers write: the settings, else folders under data_dir/trackers."""
        local = TrackerDestinations.under(self.data_dir / "trackers")
        return TrackerDestinations(
            mlflow_tracking_uri=self.mlflow_tracking_uri or local.mlflow_tracking_uri,
            mlflow_experiment=self.mlflow_experiment,
            tensorboard_dir=(self.tensorboard_dir or local.tensorboard_dir).resolve(),
            wandb_mode=self.wandb_mode,
            wandb_project=self.wandb_project,
            wandb_entity=self.wandb_entity,
            wandb_dir=(self.wandb_dir or local.wandb_dir).resolve(),
            wandb_base_url=self.wandb_base_url,
            trackio_dir=(self.trackio_dir or local.trackio_dir).resolve(),
            trackio_project=self.trackio_project,
            public_url=self.public_url,
        )

    def tracker_environment(self) -> dict[str, str]:
        """What the training processes' environment needs beyond the destinations: trackio's folder, and the W&B
        API key when set.

        trackio reads its folder once, when first imported, and TRL imports it wherever it is installed: the
        engine processes (the fork server's preloaded ones too) start with the operator's folder already set.
        """
        environment = {"TRACKIO_DIR": str(self.tracker_destinations().trackio_dir)}
        if self.wandb_api_key is not None:
            environment["WANDB_API_KEY"] = self.wandb_api_key.get_secret_value()
        return environment

    def resolved_storage_url(self) -> str:
        """The storage URL, defaulting to a local folder inside data_dir."""
        return self.storage_url or (self.data_dir / "artifacts").resolve().as_uri()


class ProcessSettings(BaseSettings):
    """tunedeck's variables a process reads from the environment it was started with, when it needs them.

    The dataset mirror reaches the process that fetches hub datasets (the worker's ingestion process, or
    the CLI); the failpoints and holdpoints are armed by crash tests in every process of a run.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    dataset_mirror: Path | None = Field(
        None,
        description=(
            "A folder of local git clones of hub datasets (<owner>/<name>) fetched instead of the hub itself "
            "(unset: the hub)."
        ),
    )
    failpoints: str = Field("", description="Tests only: failpoints armed in every process (comma-separated).")
    holdpoints: str = Field("", description="Tests only: holdpoints armed in every process (comma-separated).")
    failpoint_state: Path = Field(
        Path(".failpoints"), description="Tests only: the folder that records which points fired."
    )


def process_settings() -> ProcessSettings:
    """The process settings as the environment holds them now (tests arm failpoints in a running process)."""
    return ProcessSettings()


def setting_variable(name: str) -> str:
    """The environment variable of setting `name` (a field of `Settings` or `ProcessSettings`), for messages."""
    if name not in Settings.model_fields and name not in ProcessSettings.model_fields:
        raise KeyError(f"no setting {name!r}")
    return f"{ENV_PREFIX}{name.upper()}"


# tunedeck's variables an engine process on another machine (a Ray worker) takes over from its driver:
# the simulated memory cap and the test failpoints. Never a URL or a credential: a job's runtime
# environment is readable by anyone who can reach the cluster.
ENGINE_FORWARDED_VARIABLES = tuple(
    setting_variable(name) for name in ("memory_cap", "failpoints", "holdpoints", "failpoint_state")
)


def forwarded_engine_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `ENGINE_FORWARDED_VARIABLES` set in `environ` (this process's environment by default)."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in ENGINE_FORWARDED_VARIABLES if name in env}
