"""An MLX export asked of the API: a worker converts it in an engine process and commits it, named by its choices."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness, make_settings, running_worker, start_harness
from tests.fixtures.mlx import require_mlx
from tests.waiting import wait_until

from .stored_jobs import store_finished_job


@pytest.fixture
def stored_job(
    tmp_path: Path, sqlite_url: str, lora_run: Path, tiny_llama_dir: Path
) -> Iterator[tuple[AppHarness, str]]:
    """Alice's finished job on the tiny Llama, stored as a worker stores one."""
    for harness in start_harness(make_settings(tmp_path, sqlite_url)):
        yield harness, store_finished_job(harness, lora_run, tiny_llama_dir)


def _ended(api: AppHarness, item: dict[str, Any]) -> dict[str, Any]:
    """The work item once it ended (a conversion on a busy machine can outlast the API's longest wait)."""

    def ended() -> dict[str, Any] | None:
        now: dict[str, Any] = api.client.get(f"{API}/work/{item['id']}", headers=api.auth("alice")).json()
        return now if now["state"] in ("succeeded", "failed") else None

    return wait_until(ended, f"work item {item['id']} ends", timeout_s=900, poll_s=0.5)


def test_an_mlx_export_is_built_by_a_worker_and_listed_with_its_options(stored_job: tuple[AppHarness, str]) -> None:
    require_mlx()
    api, job_id = stored_job
    alice = api.auth("alice")
    body = {"format": "mlx", "mlx_contents": "adapter", "dtype": "bfloat16", "unified_memory_gb": 8}
    with running_worker(api):
        item = _ended(api, api.client.post(f"{API}/jobs/{job_id}/exports", headers=alice, json=body).json())
        assert item["state"] == "succeeded", item
        assert item["result"]["name"] == "mlx-adapter-bfloat16-final"
        tight = {"format": "mlx", "unified_memory_gb": 0.0001}
        failed = _ended(api, api.client.post(f"{API}/jobs/{job_id}/exports", headers=alice, json=tight).json())
        assert failed["state"] == "failed" and failed["error"]["status"] == 422, failed
        assert [issue["field"] for issue in failed["error"]["issues"]] == ["unified_memory"]
        assert "does not fit" in failed["error"]["issues"][0]["message"]
    export = api.client.get(f"{API}/jobs/{job_id}/exports/mlx-adapter-bfloat16-final", headers=alice).json()
    assert export["format"] == "mlx" and export["contents"] == "base_and_adapter"
    assert export["mlx"] == {"contents": "adapter", "dtype": "bfloat16", "quantize_bits": None}
    paths = {entry["path"] for entry in export["files"]}
    assert {"config.json", "adapter/adapters.safetensors", "adapter/adapter_config.json", "tunedeck_pin.json"} <= paths
    archive = zipfile.ZipFile(io.BytesIO(api.client.get(export["archive_url"], headers=alice).content))
    weights = archive.read("model.safetensors")
    header = json.loads(weights[8 : 8 + int.from_bytes(weights[:8], "little")])
    assert {entry["dtype"] for name, entry in header.items() if name != "__metadata__"} == {"BF16"}
    listed = api.client.get(f"{API}/jobs/{job_id}/exports", headers=alice).json()
    assert [entry["name"] for entry in listed] == ["mlx-adapter-bfloat16-final"]
