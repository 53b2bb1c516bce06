"""The job page's Export section: offered once there is a model to export, with the formats the job's method has."""

from __future__ import annotations

import re
from typing import Any

from tests.fixtures.app import AppHarness, sign_in
from tests.fixtures.job_claims import claim_job
from tunedeck.core.states import JobState
from tunedeck.store.train_policy import JobEnd


def _ended_job(web: AppHarness, state: JobState, config: dict[str, Any], steps: tuple[int, ...] = ()) -> str:
    """Alice's job, claimed, with checkpoints committed at `steps`, ended in `state`; its id."""
    job = web.store.jobs.enqueue(web.users["alice"], name="export me", config=config)
    claimed = claim_job(web.store, "w", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job.id
    for step in steps:
        web.store.checkpoints.record_written(job.id, claimed.fencing_token, step, f"users/x/ckpt-{step}")
        web.store.checkpoints.mark_committed(job.id, claimed.fencing_token, step, "0" * 64)
    web.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(state))
    return job.id


def _radio(html: str, export_format: str) -> str:
    found = re.search(rf'<input type="radio" name="format" id="export-format-{export_format}"[^>]*>', html)
    assert found is not None, export_format
    return found.group(0)


def _models(html: str) -> list[str]:
    select = re.search(r'<select id="export-checkpoint".*?</select>', html, re.S)
    assert select is not None
    return re.findall(r"<option[^>]*>([^<]+)</option>", select.group(0))


def test_a_succeeded_lora_job_offers_every_format_adapter_first(web: AppHarness) -> None:
    job_id = _ended_job(web, JobState.SUCCEEDED, {"epochs": 1, "use_peft": True, "peft_method": "lora"}, (3,))
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job_id}").text
    assert 'id="exports-section"' in page and "/static/job_exports.js" in page
    assert " checked" in _radio(page, "adapter") and " disabled" not in _radio(page, "adapter")
    assert all(" disabled" not in _radio(page, name) for name in ("merged", "bundle"))
    assert 'for="export-format-merged">Merged model' in page
    assert 'aria-describedby="export-format-bundle-help"' in page  # each choice explained in its own line
    assert _models(page) == ["final model", "checkpoint 3"]
    assert 'id="export-progress"' in page and 'id="exports"' in page


def test_a_full_fine_tune_has_no_adapter_to_export(web: AppHarness) -> None:
    job_id = _ended_job(web, JobState.SUCCEEDED, {"epochs": 1, "use_peft": False})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job_id}").text
    adapter = _radio(page, "adapter")
    assert " disabled" in adapter and " checked" not in adapter
    assert " checked" in _radio(page, "merged")
    assert "there is no separate adapter" in page and 'for="export-format-merged">Full model' in page


def test_a_failed_job_exports_its_committed_checkpoints_only(web: AppHarness) -> None:
    job_id = _ended_job(web, JobState.FAILED, {"epochs": 1}, (2, 4))
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job_id}").text
    assert _models(page) == ["checkpoint 2", "checkpoint 4"]


def test_nothing_to_export_before_a_model_is_committed(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="queued", config={"epochs": 1})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job.id}").text
    assert 'id="exports-section"' not in page


def test_the_mlx_format_comes_with_its_options_hidden_until_chosen(web: AppHarness) -> None:
    job_id = _ended_job(web, JobState.SUCCEEDED, {"epochs": 1, "use_peft": True, "peft_method": "lora"})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job_id}").text
    assert " disabled" not in _radio(page, "mlx") and 'for="export-format-mlx">MLX (Apple silicon)' in page
    fieldset = re.search(r'<fieldset id="export-mlx-options"[^>]*>', page)
    assert fieldset is not None and " hidden" in fieldset.group(0)  # shown by the script when mlx is chosen
    weights = re.search(r'<select id="export-mlx-weights".*?</select>', page, re.S)
    assert weights is not None
    assert re.findall(r'value="([^"]+)"', weights.group(0)) == ["float16", "bfloat16", "float32", "4", "8"]
    assert '<option value="adapter">' in page and 'id="export-mlx-memory"' in page


def test_a_full_fine_tune_offers_mlx_merged_only(web: AppHarness) -> None:
    job_id = _ended_job(web, JobState.SUCCEEDED, {"epochs": 1, "use_peft": False})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job_id}").text
    assert " disabled" not in _radio(page, "mlx")
    assert '<option value="adapter" disabled>' in page
