"""Licences in exports: the base model's, read from its files when the run started, and each training dataset's."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from tests.fixtures.app import API, make_settings, running_worker, start_harness
from tunedeck.core.model_licence import NOT_FOUND, ModelLicence

from .stored_jobs import store_finished_job


def test_the_run_records_the_base_models_licence_as_its_files_state_it(lora_run: Path) -> None:
    recorded = json.loads((lora_run / "config.json").read_text())["model"]["licence"]
    assert recorded == ModelLicence().to_dict()  # the tiny model's folder names no licence


def test_an_exported_card_lists_each_training_dataset_with_its_licence(
    tmp_path: Path, sqlite_url: str, lora_run: Path, tiny_llama_dir: Path
) -> None:
    for api in start_harness(make_settings(tmp_path, sqlite_url)):
        job_id = store_finished_job(api, lora_run, tiny_llama_dir)
        job = api.client.get(f"{API}/jobs/{job_id}", headers=api.auth("alice")).json()
        (dataset,) = api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()
        assert dataset["latest"]["id"] == job["train_dataset_version_id"]
        rights = {"licence": "cc-by-4.0", "rights_note": "Collected from our public help pages."}
        assert api.client.patch(f"{API}/datasets/{dataset['id']}", headers=api.auth("alice"), json=rights).is_success
        with running_worker(api):
            created = api.client.post(
                f"{API}/jobs/{job_id}/exports?wait=120", headers=api.auth("alice"), json={"format": "adapter"}
            )
        assert created.status_code == 200 and created.json()["state"] == "succeeded", created.text
        export = api.client.get(f"{API}/jobs/{job_id}/exports/adapter-final", headers=api.auth("alice")).json()
        archive = zipfile.ZipFile(io.BytesIO(api.client.get(export["archive_url"], headers=api.auth("alice")).content))
        card = archive.read("README.md").decode()
        licences = card.split("## License", 1)[1]
        assert f"(it applies to derived weights too):** {NOT_FOUND}" in licences
        assert "  - train: train v1 — cc-by-4.0" in licences
        assert "    - rights: Collected from our public help pages." in licences
        record = json.loads(archive.read("export.json"))
        assert record["base_licence"] == ModelLicence().to_dict()
        assert [(d["role"], d["name"], d["version"], d["licence"]) for d in record["dataset_licences"]] == [
            ("train", "train", 1, "cc-by-4.0")
        ]
