"""Reaching an existing Ray cluster: importing Ray (an optional install), checking its address, reading its nodes.

Ray is installed by `make install-ray`, not by `make install`: every function here imports it
lazily and turns its absence into a `RayUnavailableError` that says how to install it. An
address nobody answers at is refused within seconds: `ray.init` itself keeps retrying an
unreachable cluster for minutes, so the address is tried with a plain TCP connection first.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tunedeck.core.errors import TunedeckError
from tunedeck.core.settings import forwarded_engine_variables

INSTALL_HINT = "install it with `make install-ray`"
# How long a TCP connection to the cluster's address may take before it counts as unreachable.
CONNECT_TIMEOUT_S = 5.0
# What the driver passes to the Ray workers from its own environment besides tunedeck's few
# (`forwarded_engine_variables`): the Hugging Face caches and offline switches, and the seed of
# hashing. Never the worker's settings (database and storage URLs) nor a credential: a job's
# runtime environment is readable by anyone who can reach the cluster.
FORWARDED_ENV_NAMES = ("PYTHONHASHSEED",)
FORWARDED_ENV_PREFIXES = ("HF_", "TRANSFORMERS_", "TOKENIZERS_")
_SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "KEY")

class RayUnavailableError(TunedeckError):
    """Ray is not installed, or no Ray cluster answers at the address: not the job's fault."""


@dataclass(frozen=True)
class RayNodeResources:
    """One alive node of the cluster and what it offers."""

    node_id: str
    address: str
    cpus: float
    gpus: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"node_id": self.node_id, "address": self.address, "cpus": self.cpus, "gpus": self.gpus}


def import_ray() -> ModuleType:
    """The `ray` module with Ray Train importable, or a RayUnavailableError saying how to install it."""
    try:
        import ray
        import ray.train.torch
    except ImportError as error:
        raise RayUnavailableError(f"Ray Train is not installed ({error}): {INSTALL_HINT}") from None
    return ray


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse an address no Ray head answers at, quickly (a RayUnavailableError naming it).

    `host:port` is tried with a TCP connection; `auto` (the cluster this machine is part of)
    is left to `ray.init`, which answers at once when there is none.
    """
    if address == "auto":
        return
    if address.startswith("ray://"):
        raise RayUnavailableError(
            f"{address}: a Ray Client address is not supported; give the head node's GCS address (host:6379)"
        )
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailableError(f"{address}: not a Ray address; expected host:port (the head's GCS port) or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        raise RayUnavailableError(f"no Ray cluster answers at {address}: {error.strerror or error}") from None


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of this process that the Ray workers get too (see FORWARDED_ENV_NAMES)."""
    env = dict(os.environ) if environ is None else environ
    others = {key: value for key, value in env.items() if key in FORWARDED_ENV_NAMES or _forwarded_prefix(key)}
    return {**forwarded_engine_variables(env), **others}


def _forwarded_prefix(name: str) -> bool:
    if not name.startswith(FORWARDED_ENV_PREFIXES):
        return False
    # HF_TOKEN and the like stay here: each node reads its own (TOKENIZERS_PARALLELISM is no secret).
    rest = name.removeprefix("TOKENIZERS_")
    return not any(marker in rest for marker in _SECRET_MARKERS)


def connect(address: str, *, ship_code: bool = True) -> ModuleType:
    """Join the cluster at `address` as a driver; returns the `ray` module.

    With `ship_code`, this process's tunedeck package travels to the cluster with the job
    (Ray's `py_modules`), so every node runs the same tunedeck as the worker that started
    the job; the nodes still need the same Python packages (the same `make install-ray`).
    """
    ray = import_ray()
    check_reachable(address)
    import tunedeck

    runtime_env: dict[str, Any] = {"env_vars": forwarded_env()}
    if ship_code:
        runtime_env["py_modules"] = [str(Path(tunedeck.__file__).parent)]
        runtime_env["excludes"] = ["__pycache__", "*.pyc"]
    try:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=True, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as error:
        hint = ""
        if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
            # Ray's default for a cluster started with `ray start` is token authentication, which a
            # driver joining it by address only uses when told to; without it, it retries, then fails.
            hint = (
                " (a cluster with token authentication needs RAY_AUTH_MODE=token and its token in "
                "RAY_AUTH_TOKEN or ~/.ray/auth_token in the worker's environment)"
            )
        raise RayUnavailableError(f"could not join the Ray cluster at {address}: {error}{hint}") from None
    return ray


def alive_nodes(ray: ModuleType) -> list[RayNodeResources]:
    """The cluster's alive nodes and their CPUs and GPUs (the driver must be connected)."""
    nodes = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        nodes.append(
            RayNodeResources(
                node_id=str(node.get("NodeID", "")),
                address=str(node.get("NodeManagerAddress", "")),
                cpus=float(resources.get("CPU", 0.0)),
                gpus=float(resources.get("GPU", 0.0)),
            )
        )
    return nodes
