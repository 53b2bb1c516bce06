"""What a Ray cluster offers: `python -m tunedeck.engine.ray_cluster --spec FILE` with `{"address": ...}`.

Prints one JSON line (see `tunedeck.engine.json_process`): the alive nodes and each one's
CPUs and GPUs. The worker runs it when it starts with `--ray-address`, to say how many
machines and devices it offers, and to refuse an address where no cluster answers (exit 2,
with the reason) before it claims any job. Ray stays out of the worker's own process.
"""

from __future__ import annotations

import sys
from typing import Any

from tunedeck.core.errors import TunedeckError
from tunedeck.engine.distributed.ray_connect import alive_nodes, connect
from tunedeck.engine.json_process import run_spec_main


def describe_cluster(spec: dict[str, Any]) -> dict[str, Any]:
    """Join the cluster at `spec["address"]` for a moment; its alive nodes and their resources."""
    address = spec.get("address")
    if not isinstance(address, str) or not address:
        raise TunedeckError("the spec names no Ray address")
    ray = connect(address, ship_code=False)
    try:
        nodes = alive_nodes(ray)
    finally:
        ray.shutdown()
    return {"address": address, "nodes": [node.to_dict() for node in nodes]}


def main(argv: list[str] | None = None) -> int:
    """Entry point: `--spec FILE` in, one JSON line out."""
    return run_spec_main("python -m tunedeck.engine.ray_cluster", describe_cluster, argv)


if __name__ == "__main__":
    sys.exit(main())
