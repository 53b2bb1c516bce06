"""`TrackerDestinations`: where a run's experiment trackers write, as the operator configured them.

The worker builds it from its settings (`Settings.tracker_destinations`) and hands it to the engine in the
run spec; it never holds a secret (the W&B API key travels in the engine's environment only).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

WandbMode = Literal["offline", "online"]


@dataclass(frozen=True)
class TrackerDestinations:
    """Each tracker's destination, and the public address of the service's job pages (None: none)."""

    mlflow_tracking_uri: str
    mlflow_experiment: str
    tensorboard_dir: Path
    wandb_mode: WandbMode
    wandb_project: str
    wandb_entity: str | None
    wandb_dir: Path
    wandb_base_url: str | None
    trackio_dir: Path
    trackio_project: str
    public_url: str | None = None

    @classmethod
    def under(cls, folder: Path) -> TrackerDestinations:
        """Every tracker writing locally under `folder`: the defaults, for runs no operator configured."""
        folder = folder.resolve()
        return cls(
            mlflow_tracking_uri=f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}",
            mlflow_experiment="tunedeck",
            tensorboard_dir=folder / "tensorboard",
            wandb_mode="offline",
            wandb_project="tunedeck",
            wandb_entity=None,
            wandb_dir=folder / "wandb",
            wandb_base_url=None,
            trackio_dir=folder / "trackio",
            trackio_project="tunedeck",
        )

    def job_link(self, job_id: str | None) -> str | None:
        """The job's page at the public address, else None (a tracker then records the job id alone)."""
        if self.public_url is None or job_id is None:
            return None
        return f"{self.public_url.rstrip('/')}/jobs/{job_id}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (in the run spec)."""
        return {key: str(value) if isinstance(value, Path) else value for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrackerDestinations:
        """Read `to_dict`'s form back; KeyError names a missing destination, ValueError a bad W&B mode."""
        mode = data["wandb_mode"]
        if mode not in ("offline", "online"):
            raise ValueError(f'wandb_mode is "{mode}": expected offline or online')

        def text(key: str) -> str | None:
            return str(data[key]) if data.get(key) is not None else None

        return cls(
            mlflow_tracking_uri=str(data["mlflow_tracking_uri"]),
            mlflow_experiment=str(data["mlflow_experiment"]),
            tensorboard_dir=Path(data["tensorboard_dir"]),
            wandb_mode=mode,
            wandb_project=str(data["wandb_project"]),
            wandb_entity=text("wandb_entity"),
            wandb_dir=Path(data["wandb_dir"]),
            wandb_base_url=text("wandb_base_url"),
            trackio_dir=Path(data["trackio_dir"]),
            trackio_project=str(data["trackio_project"]),
            public_url=text("public_url"),
        )
