"""Pages render what the store holds, for its owner only; bad input is a 404 or a redirect, never a 500."""

from __future__ import annotations

import json
import re

from tests.fixtures.app import AppHarness, sign_in
from tests.fixtures.job_claims import claim_job
from tunedeck.config.loading import config_schema
from tunedeck.core.states import JobState
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.train_policy import JobEnd
from tunedeck.web.form_spec import BASIC_KEYS


def _job_data(html: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="job-data">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_another_users_job_page_is_404(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["bob"], name="bobs secret run", config={})
    sign_in(web.client, web.tokens["alice"])
    answer = web.client.get(f"/jobs/{job.id}")
    assert answer.status_code == 404
    assert "bobs secret run" not in answer.text
    assert web.client.get("/jobs/job_does_not_exist").status_code == 404
    listed = web.client.get("/jobs")
    assert "bobs secret run" not in listed.text


def test_another_users_job_actions_are_404(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["bob"], name="bobs", config={})
    csrf = sign_in(web.client, web.tokens["alice"])
    answer = web.client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf}, follow_redirects=False)
    assert answer.status_code == 404
    assert web.store.jobs.get(web.users["bob"], job.id).state == "queued"


def test_another_users_dataset_and_clone_source_are_404(web: AppHarness) -> None:
    dataset = web.store.datasets.create_dataset(web.users["bob"], "private")
    job = web.store.jobs.enqueue(web.users["bob"], name="bobs", config={})
    sign_in(web.client, web.tokens["alice"])
    assert web.client.get(f"/datasets/{dataset.id}").status_code == 404
    assert web.client.get(f"/jobs/new?clone={job.id}").status_code == 404


def test_job_page_shows_series_events_and_escapes_names(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="<script>alert(1)</script>", config={"epochs": 1})
    telemetry = web.store.telemetry
    telemetry.append_metrics(job.id, [MetricPoint("loss", s, 2.0 - s / 100) for s in range(1, 51)])
    telemetry.append_events(
        job.id,
        1,
        [
            NewEvent(1, "phase", {"type": "phase", "name": "training", "status": "started", "total_steps": 100}),
            NewEvent(2, "log", {"type": "log", "level": "info", "message": "hello from the run"}),
            NewEvent(3, "diagnosis", {"type": "diagnosis", "kind": "oom", "message": "CUDA out of memory"}),
        ],
    )
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job.id}")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "hello from the run" in page.text
    assert "Out of memory" in page.text and "Reduce max_length." in page.text  # the troubleshooting advice
    data = _job_data(page.text)
    charts = data["charts"]
    assert [chart["id"] for chart in charts] == ["loss", "learning_rate", "grad_norm", "tokens_per_second"]  # type: ignore[attr-defined,index]
    # Training and evaluation loss share one chart.
    assert [name for name, _ in charts[0]["series"]] == ["loss", "eval_loss"]  # type: ignore[index]
    assert data["steps_per_epoch"] == 100  # 100 planned steps over one epoch: the x-axis can show epochs
    assert 'src="/static/vendor/uplot/uPlot.iife.min.js"' in page.text
    assert data["total_steps"] == 100
    # The charts read their series from the API with the page's session cookie.
    series = web.client.get(f"/api/v1/jobs/{job.id}/metrics/loss?points={data['max_points']}")
    assert series.status_code == 200 and len(series.json()["points"]) == 50
    assert data["last_event_id"] > 0  # type: ignore[operator]
    assert "content-security-policy" in page.headers


def test_a_preference_jobs_page_charts_rewards_margins_and_accuracies(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="dpo run", config={"task": "dpo"})
    sft = web.store.jobs.enqueue(web.users["alice"], name="sft run", config={})
    points = [MetricPoint("rewards/chosen", 1, 0.1), MetricPoint("eval_rewards/accuracies", 1, 0.75)]
    web.store.telemetry.append_metrics(job.id, points)
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job.id}").text
    charts = [chart for chart in _job_data(page)["charts"] if chart["optional"]]  # type: ignore[attr-defined,index]
    assert [chart["id"] for chart in charts] == ["rewards", "reward-margins", "reward-accuracies"]
    assert [name for name, _ in charts[0]["series"]] == [
        "rewards/chosen",
        "rewards/rejected",
        "eval_rewards/chosen",
        "eval_rewards/rejected",
    ]
    assert 'id="chart-rewards" aria-labelledby="chart-rewards-title" hidden' in page  # shown once it has a point
    # The series are read by the names the charts use, "/" and all.
    series = web.client.get(f"/api/v1/jobs/{job.id}/metrics/eval_rewards%2Faccuracies").json()
    assert [(p["step"], p["value"]) for p in series["points"]] == [(1, 0.75)]
    assert not [chart for chart in _job_data(web.client.get(f"/jobs/{sft.id}").text)["charts"] if chart["optional"]]  # type: ignore[attr-defined,index]
    assert 'id="chart-rewards"' not in web.client.get(f"/jobs/{sft.id}").text


def test_jobs_list_shows_progress_and_filters_by_state(web: AppHarness) -> None:
    running = web.store.jobs.enqueue(web.users["alice"], name="alpha run", config={})
    web.store.jobs.enqueue(web.users["alice"], name="beta run", config={})
    web.store.telemetry.append_metrics(running.id, [MetricPoint("loss", 30, 1.0), MetricPoint("eval_loss", 30, 0.75)])
    web.store.telemetry.append_events(
        running.id, 1, [NewEvent(1, "phase", {"type": "phase", "name": "training", "total_steps": 120})]
    )
    web.store.jobs.request_cancel(web.users["alice"], running.id)
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/jobs")
    assert 'max="120" value="30"' in page.text
    assert "eval_loss 0.75" in page.text
    only_cancelled = web.client.get("/jobs?state=cancelled")
    assert "alpha run" in only_cancelled.text and "beta run" not in only_cancelled.text
    assert web.client.get("/jobs?state=bogus").status_code == 422
    assert web.client.get("/jobs?cursor=%%%garbage").status_code == 200


def test_new_job_form_is_generated_from_the_schema(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/jobs/new")
    assert page.status_code == 200
    for key in config_schema()["properties"]:
        assert f'id="f-{key}"' in page.text, key
    advanced_at = page.text.index('<details class="card" id="advanced">')
    for key in BASIC_KEYS:
        assert page.text.index(f'id="f-{key}"') < advanced_at  # basic fields sit outside the collapsed section
    assert "<details class=\"card\" id=\"advanced\" open" not in page.text
    for key in ("gradient_accumulation_steps", "use_peft", "peft_method", "eval_strategy", "save_steps", "seed"):
        assert page.text.index(f'id="f-{key}"') > advanced_at
    assert 'value="qlora"' in page.text
    assert 'for="f-learning_rate"' in page.text  # every control has a label
    # The learning-rate preview is drawn by charts.js on the vendored uPlot.
    assert 'src="/static/vendor/uplot/uPlot.iife.min.js"' in page.text and 'src="/static/charts.js"' in page.text
    assert 'id="lr-schedule"' in page.text


def test_new_job_form_puts_the_task_first_and_marks_each_keys_tasks(web: AppHarness) -> None:
    finished = web.store.jobs.enqueue(web.users["alice"], name="sft first", config={"epochs": 1})
    claimed = claim_job(web.store, "test-worker", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == finished.id
    assert web.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.SUCCEEDED))
    web.store.jobs.enqueue(web.users["alice"], name="still queued", config={})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/jobs/new").text
    # The task select sits with the model and data choice, before every setting.
    assert page.index('id="f-train_dataset_id"') < page.index('id="f-task"') < page.index('id="f-learning_rate"')
    assert '<option value="dpo"' in page and 'data-field="beta"' in page
    assert 'data-tasks="dpo orpo kto"' in page[page.index('data-field="beta"') :][:200]
    assert 'data-tasks="sft"' in page[page.index('data-field="packing"') :][:200]
    # init_from_job offers the user's succeeded jobs only.
    start = page[page.index('id="f-init_from_job"') : page.index("</select>", page.index('id="f-init_from_job"'))]
    assert finished.id in start and "sft first (sft, " in start and "still queued" not in start
    # The form's script gets the same task lists from the server.
    found = re.search(r'<script type="application/json" id="form-spec">(.*?)</script>', page, re.S)
    assert found is not None
    client = {f["key"]: f for f in json.loads(found.group(1))["fields"]}
    assert client["undesirable_weight"]["tasks"] == ["kto"] and client["learning_rate"]["tasks"] is None
    assert client["loss_type"]["task_choices"]["kto"] == ["kto", "apo_zero_unpaired"]


def test_clone_form_starts_from_the_source_config(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="base", config={"learning_rate": 0.0003, "epochs": 7})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/new?clone={job.id}")
    assert 'name="epochs"' in page.text and 'value="7"' in page.text
    assert "base (clone)" in page.text


def test_dataset_page_renders_reports_and_the_loss_mask(web: AppHarness) -> None:
    dataset = web.store.datasets.create_dataset(web.users["alice"], "chats")
    inspection = {
        "kind": "chat", "max_length": 64, "train_on_inputs": False, "template_version": "1",
        "chat_mask_method": "template", "share_truncated": 0.0, "trainable_token_share": 0.5,
        "lengths": {"count": 2, "mean": 5, "p50": 4, "p90": 6, "p99": 6, "max": 6,
                    "histogram": [{"start": 0, "end": 4, "count": 1}, {"start": 4, "end": 8, "count": 1}]},
        "examples": [{"index": 0, "row_number": 1, "length": 4, "kept": 4, "trained_tokens": 2, "truncated": False,
                      "tokens": [{"id": 1, "text": "Hi", "trained": False, "special": False},
                                 {"id": 2, "text": "<b>there</b>", "trained": True, "special": False}]}],
    }
    reports = {
        "validation": {"ok": False, "rows_total": 3, "rows_valid": 2, "rows_dropped": 1,
                       "issues": [{"message": "missing field", "line": 3, "field": "messages"}]},
        "dedup": {"threshold": 0.9, "pairs": [],
                  "counts": {"exact_within": 0, "near_within": 0, "train_rows_to_drop": 0}},
        "scan": {"rows_scanned": 2, "clean": True, "counts": {}, "findings": [], "sampled": False},
        "inspection": inspection,
    }
    web.store.datasets.add_version(
        web.users["alice"], dataset.id, sha256="0" * 64, format="chat", kind="chat", rows=2,
        storage_key="users/x/datasets/missing/data.jsonl", manifest={}, reports=reports,
    )
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/datasets/{dataset.id}")
    assert page.status_code == 200
    assert "missing field" in page.text and "<td>3</td>" in page.text  # issue with its line number
    assert 'class="tok trained"' in page.text and 'class="tok masked"' in page.text
    assert "&lt;b&gt;there&lt;/b&gt;" in page.text  # token text escaped
    assert page.text.count("<rect ") == 2
    assert "could not be read from storage" in page.text  # a missing preview is reported, not a 500
    assert web.client.get(f"/datasets/{dataset.id}?version=abc").status_code == 422


def test_dataset_page_shows_preference_examples_as_prompt_and_answers(web: AppHarness) -> None:
    dataset = web.store.datasets.create_dataset(web.users["alice"], "pairs")
    tokens = [{"id": 5, "text": "<i>sky</i>", "trained": False, "special": False}]
    answer = [{"id": 6, "text": "blue", "trained": True, "special": False}]
    inspection = {
        "kind": "preference", "max_length": 64, "train_on_inputs": False, "template_version": "4",
        "chat_mask_method": None, "share_truncated": 1.0, "trainable_token_share": 0.5,
        "lengths": {"count": 1, "mean": 9, "p50": 9, "p90": 9, "p99": 9, "max": 9,
                    "histogram": [{"start": 0, "end": 10, "count": 1}]},
        "examples": [{"index": 0, "row_number": 1, "length": 9, "kept": 3, "trained_tokens": 2, "truncated": True,
                      "tokens": [], "spans": [
                          {"name": "prompt", "tokens": tokens, "kept": 1, "cut": 4},
                          {"name": "chosen", "tokens": answer, "kept": 1, "cut": 0},
                          {"name": "rejected", "tokens": answer, "kept": 1, "cut": 2}]}],
    }  # fmt: skip
    web.store.datasets.add_version(
        web.users["alice"], dataset.id, sha256="1" * 64, format="preference", kind="preference", rows=1,
        storage_key="users/x/datasets/missing/data.jsonl", manifest={}, reports={"inspection": inspection},
    )
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/datasets/{dataset.id}")
    assert page.status_code == 200
    for caption in ("<strong>prompt</strong> · 1 tokens · 4 cut", "<strong>chosen</strong> · 1 tokens",
                    "<strong>rejected</strong> · 1 tokens · 2 cut"):
        assert caption in page.text
    assert "&lt;i&gt;sky&lt;/i&gt;" in page.text and page.text.count('class="cut"') == 2


def test_models_and_datasets_pages_render(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    assert web.client.get("/models").status_code == 200
    datasets = web.client.get("/datasets")
    assert datasets.status_code == 200
    assert 'id="upload-file"' in datasets.text and 'for="upload-file"' in datasets.text


def test_static_assets_are_served(web: AppHarness) -> None:
    for name in ("app.css", "common.js", "job_form.js", "job_page.js", "job_exports.js", "upload.js",
                 "models.js", "playground.js", "charts.js", "compare_page.js", "jobs_list.js",
                 "vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.min.css"):
        assert web.client.get(f"/static/{name}").status_code == 200, name
    # Every chart is drawn by charts.js on uPlot: the older canvas chart is gone.
    assert web.client.get("/static/chart.js").status_code == 404


def test_dataset_page_shows_the_scan_policy_and_masked_findings(web: AppHarness) -> None:
    dataset = web.store.datasets.create_dataset(web.users["alice"], "leaky")
    finding = {"row": 4, "field": "completion", "category": "secret", "type": "aws_access_key",
               "excerpt": "Use AKIA************ for"}
    reports = {"scan": {"rows_scanned": 9, "clean": False, "counts": {"aws_access_key": 1}, "findings": [finding],
                        "finding_count": 1, "sampled": False, "policy": "redact",
                        "redacted": {"aws_access_key": 1}}}
    web.store.datasets.add_version(
        web.users["alice"], dataset.id, sha256="1" * 64, format="prompt_completion", kind="prompt_completion", rows=9,
        storage_key="users/x/datasets/missing/data.jsonl", manifest={}, reports=reports,
    )
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/datasets/{dataset.id}").text
    assert "Scan policy: <strong>redact</strong>" in page
    assert "every finding was masked" in page
    assert "<td>4</td><td>completion</td><td>secret: aws_access_key</td>" in page
    upload = web.client.get("/datasets").text
    assert 'for="upload-scan-policy"' in upload and 'value="block"' in upload


def test_upload_form_offers_a_label_column_and_a_column_mapping(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/datasets").text
    for field, label in (("label_column", "Label column"), ("column_map", "Column mapping")):
        assert f'name="{field}"' in page and f">{label}</label>" in page
    assert 'id="help-upload-column-map"' in page and "target=source" in page
    assert 'id="help-upload-label-column"' in page
    script = web.client.get("/static/upload.js").text
    assert '"label_column"' in script and '"column_map"' in script


def test_dataset_page_shows_the_column_mapping_of_each_version(web: AppHarness) -> None:
    dataset = web.store.datasets.create_dataset(web.users["alice"], "qa")
    for n, notes in enumerate(({"column_map": {"instruction": "question", "output": "answer"}}, {})):
        web.store.datasets.add_version(
            web.users["alice"], dataset.id, sha256=str(n) * 64, format="alpaca", kind="prompt_completion", rows=2,
            storage_key=f"users/x/datasets/missing{n}/data.jsonl", manifest={"notes": notes}, reports={},
        )
    sign_in(web.client, web.tokens["alice"])
    latest = web.client.get(f"/datasets/{dataset.id}").text
    assert "v1 · 2 rows · mapped instruction=question,output=answer" in latest
    assert "none: fields read as named in the file" in latest
    first = web.client.get(f"/datasets/{dataset.id}?version=1").text
    assert "<code>instruction=question,output=answer</code>" in first


def test_datasets_page_registers_a_hub_split(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/datasets").text
    for field, label in (("hub", "Dataset id"), ("split", "Split"), ("subset", "Subset"), ("revision", "Revision")):
        assert f'name="{field}"' in page and f">{label}</label>" in page
    assert '<script src="/static/hub_dataset.js" defer></script>' in page
    script = web.client.get("/static/hub_dataset.js").text
    assert '"/api/v1/hub-datasets"' in script
    assert ".tsv" in page and ".gz" in page  # the file picker offers every readable file
