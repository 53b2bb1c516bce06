"""SFT, then DPO on its output: API + worker on CPU, and the child's export names the whole pin chain."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.fixtures.app import API, AppHarness, running_worker, uploaded_id
from tests.integration.worker.seeding import TINY_JOB_CONFIG, chat_rows
from tests.waiting import HANG_S
from tunedeck.demo.preference_pairs import preference_pairs
from tunedeck.storage.base import final_prefix, job_prefix

pytestmark = pytest.mark.slow  # two CPU training runs and an export per test


def _train(api: AppHarness, body: dict[str, Any]) -> dict[str, Any]:
    created = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    deadline = time.monotonic() + 300
    job = created.json()
    while time.monotonic() < deadline and job["state"] not in ("succeeded", "failed", "cancelled"):
        time.sleep(0.2)
        job = api.client.get(f"{API}/jobs/{job_id}", headers=api.auth("alice")).json()
    assert job["state"] == "succeeded", job
    return dict(job)


def _run_record(api: AppHarness, job_id: str) -> dict[str, Any]:
    key = f"{job_prefix(api.users['alice'].id, job_id)}/run/config.json"
    return dict(json.loads(api.artifacts.read_bytes(key)))


def test_dpo_on_an_sft_jobs_adapter_exports_the_chain_and_loads_with_peft(
    api: AppHarness, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    body = "".join(json.dumps(row) + "\n" for row in chat_rows(8)).encode()
    dataset = uploaded_id(api.upload("alice", body, name="arithmetic"))
    pairs = "".join(json.dumps(row) + "\n" for row in preference_pairs(8, conversational=True)).encode()
    preferences = uploaded_id(api.upload("alice", pairs, name="preferences"))
    registration = {"name": "tiny", "local_path": str(tiny_llama_dir)}
    base = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json=registration).json()["id"]
    with running_worker(api, jobs=1):
        parent = _train(api, {"base_model_id": base, "train_dataset_id": dataset, "name": "sft",
                              "config": TINY_JOB_CONFIG})  # fmt: skip
        dpo = {**TINY_JOB_CONFIG, "task": "dpo", "beta": 0.1, "init_from_job": parent["id"]}
        child = _train(api, {"base_model_id": base, "train_dataset_id": preferences, "name": "dpo", "config": dpo})
        export = api.client.post(
            f"{API}/jobs/{child['id']}/exports?wait={HANG_S}", headers=api.auth("alice"), json={"format": "adapter"}
        )
    assert export.status_code == 200 and export.json()["state"] == "succeeded", export.text

    # The run record names the chain it started from; the parent's weights are the ones it stored.
    parent_manifest = api.artifacts.read_manifest(final_prefix(api.users["alice"].id, parent["id"]))
    assert parent_manifest is not None
    parent_weights = parent_manifest.entry("adapter_model.safetensors")
    assert parent_weights is not None
    record = _run_record(api, child["id"])
    assert record["job_id"] == child["id"] and record["init_from"]["how"] == "adapter" and record["task"] == "dpo"
    # The dpo reference is the sft job's adapter, kept frozen: the sft model, not the bare base.
    events = api.artifacts.read_bytes(f"{job_prefix(api.users['alice'].id, child['id'])}/run/events.jsonl").decode()
    assert "reference model: the starting adapter (another job's)" in events
    report = api.client.get(f"{API}/jobs/{child['id']}/report", headers=api.auth("alice")).json()
    assert report["model"]["started_from"] == f"job {parent['id']} (final model, adapter)"
    base_entry, parent_entry = record["lineage"]
    assert base_entry["name"] == str(tiny_llama_dir.resolve()) and base_entry["fingerprint"]
    assert parent_entry == {
        "job_id": parent["id"],
        "checkpoint": "final",
        "model_form": "adapter",
        "weights_sha256": parent_weights.sha256,
    }

    # The export's pin names base → parent → child, and its card says so.
    stored = api.client.get(f"{API}/jobs/{child['id']}/exports/adapter-final", headers=api.auth("alice")).json()
    pin = stored["pin"]
    assert pin["base_kind"] == "base_model" and pin["fingerprint"] == base_entry["fingerprint"]
    assert [entry.get("job_id") for entry in pin["chain"]] == [None, parent["id"], child["id"]]
    archive = zipfile.ZipFile(io.BytesIO(api.client.get(stored["archive_url"], headers=api.auth("alice")).content))
    folder = tmp_path / "export"
    archive.extractall(folder)
    card = (folder / "README.md").read_text()
    assert f"job {parent['id']} (final, adapter) → job {child['id']} (adapter)" in card

    # Plain peft loads it on the base (one adapter: the frozen reference is not exported); it moved on from
    # the parent's adapter.
    assert not (folder / "ref").exists()
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir)), str(folder))
    assert getattr(model.peft_config["default"], "r", None) == TINY_JOB_CONFIG["lora_r"]
    parent_folder = tmp_path / "parent"
    api.artifacts.download_directory(final_prefix(api.users["alice"].id, parent["id"]), parent_folder)
    from safetensors.torch import load_file

    before = load_file(str(parent_folder / "adapter_model.safetensors"))
    after = load_file(str(folder / "adapter_model.safetensors"))
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[name], after[name]) for name in before)


def test_an_adapter_on_a_full_fine_tunes_weights_exports_merged_onto_them(
    api: AppHarness, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    body = "".join(json.dumps(row) + "\n" for row in chat_rows(4)).encode()
    dataset = uploaded_id(api.upload("alice", body, name="arithmetic"))
    registration = {"name": "tiny", "local_path": str(tiny_llama_dir)}
    base = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json=registration).json()["id"]
    job = {"base_model_id": base, "train_dataset_id": dataset}
    full = {**TINY_JOB_CONFIG, "use_peft": False, "learning_rate": 1e-4}
    with running_worker(api, jobs=1):
        parent = _train(api, {**job, "name": "full", "config": full})
        child = _train(api, {**job, "name": "adapter", "config": {**TINY_JOB_CONFIG, "init_from_job": parent["id"]}})
        merged = api.client.post(
            f"{API}/jobs/{child['id']}/exports?wait={HANG_S}", headers=api.auth("alice"), json={"format": "merged"}
        )
    assert merged.status_code == 200 and merged.json()["state"] == "succeeded", merged.text
    stored = api.client.get(f"{API}/jobs/{child['id']}/exports/merged-final", headers=api.auth("alice")).json()
    pin = stored["pin"]
    # The adapter's base is the parent's full weights, not the base model: the pin says so and merging used them.
    assert pin["base_kind"] == "parent_weights" and pin["model_id"] == f"job {parent['id']} final weights"
    assert pin["fingerprint"] == _run_record(api, child["id"])["init_from"]["parent_weights_fingerprint"]
    assert [entry.get("job_id") for entry in pin["chain"]] == [None, parent["id"], child["id"]]
    assert pin["chain"][1]["model_form"] == "merged"
