"""The OpenAI-compatible fine-tuning API driven by the official client: files, fine-tuning jobs, models.

Every JSON body the app answers under `/v1` is checked against the client's own types: it
parses, carries every required field and no field the type does not have.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types import FileDeleted, FileObject, Model, ModelDeleted
from openai.types.fine_tuning import FineTuningJob, FineTuningJobEvent
from openai.types.fine_tuning.jobs import FineTuningJobCheckpoint
from pydantic import BaseModel

from tests.fixtures.app import API, AppHarness, jsonl_rows, make_settings, start_harness
from tests.fixtures.job_claims import claim_job
from tests.fixtures.openai_client import harness_client, openai_client, upload_and_create, upload_file
from tunedeck.backup.rows import reflected_tables
from tunedeck.core.states import JobState
from tunedeck.storage.base import final_prefix
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.train_policy import JobEnd

# Which client type each `/v1` answer is, by method and path shape ("*" is one path segment);
# a list answer's items are that type.
WIRE_TYPES: list[tuple[str, tuple[str, ...], type[BaseModel], bool]] = [
    ("POST", ("files",), FileObject, False),
    ("GET", ("files",), FileObject, True),
    ("GET", ("files", "*"), FileObject, False),
    ("DELETE", ("files", "*"), FileDeleted, False),
    ("POST", ("fine_tuning", "jobs"), FineTuningJob, False),
    ("GET", ("fine_tuning", "jobs"), FineTuningJob, True),
    ("GET", ("fine_tuning", "jobs", "*"), FineTuningJob, False),
    ("POST", ("fine_tuning", "jobs", "*", "cancel"), FineTuningJob, False),
    ("POST", ("fine_tuning", "jobs", "*", "pause"), FineTuningJob, False),
    ("POST", ("fine_tuning", "jobs", "*", "resume"), FineTuningJob, False),
    ("GET", ("fine_tuning", "jobs", "*", "events"), FineTuningJobEvent, True),
    ("GET", ("fine_tuning", "jobs", "*", "checkpoints"), FineTuningJobCheckpoint, True),
    ("GET", ("models",), Model, True),
]
PREFERENCE_ROWS = b"".join(
    json.dumps({"prompt": f"Say {i}.", "chosen": f"{i}.", "rejected": f"No {i}."}).encode() + b"\n" for i in range(3)
)


def _model_types(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names, inside Optional, Union and List."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for argument in typing.get_args(annotation):
        found += _model_types(argument)
    return found


def assert_exactly(kind: type[BaseModel], body: Any, where: str) -> None:
    """`body` parses as `kind`, holds every required field and no other; nested objects too."""
    kind.model_validate(body)
    assert isinstance(body, dict), where
    extra = set(body) - set(kind.model_fields)
    assert not extra, f"{where}: fields {extra} are not in {kind.__name__}"
    missing = {name for name, info in kind.model_fields.items() if info.is_required()} - set(body)
    assert not missing, f"{where}: required fields {missing} of {kind.__name__} are missing"
    for name, value in body.items():
        nested = _model_types(kind.model_fields[name].annotation)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if nested and isinstance(item, dict):
                assert_exactly(nested[0], item, f"{where}.{name}")


def _wire_type(method: str, path: str) -> tuple[type[BaseModel], bool] | None:
    parts = tuple(part for part in path.removeprefix("/v1/").split("/") if part)
    if parts and parts[0] == "models" and len(parts) > 1:  # a model name may hold `/` and `:`
        return (ModelDeleted, False) if method == "DELETE" else (Model, False)
    for wanted_method, shape, kind, listed in WIRE_TYPES:
        same_shape = len(shape) == len(parts) and all(
            want in ("*", part) for want, part in zip(shape, parts, strict=False)
        )
        if method == wanted_method and same_shape:
            return kind, listed
    return None


class WireRecorder:
    """Every `/v1` answer the client received, checked against the client's types by `check`."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, str, int, Any]] = []

    def __call__(self, response: httpx.Response) -> None:
        request = response.request
        if not request.url.path.startswith("/v1/"):
            return
        response.read()
        if response.headers.get("content-type", "").split(";")[0].strip() == "application/json":
            self.answers.append((request.method, request.url.path, response.status_code, response.json()))

    def check(self) -> int:
        """Assert every recorded answer is exactly its type (errors: the OpenAI error object); how many."""
        for method, path, status, body in self.answers:
            where = f"{method} {path} ({status})"
            if status >= 400:
                assert set(body) == {"error"}, where
                assert set(body["error"]) == {"message", "type", "param", "code"}, where
                continue
            wire = _wire_type(method, path)
            assert wire is not None, f"{where}: no client type known for this answer"
            kind, listed = wire
            if listed:
                assert body["object"] == "list" and isinstance(body["data"], list), where
                for item in body["data"]:
                    assert_exactly(kind, item, where)
            else:
                assert_exactly(kind, body, where)
        return len(self.answers)


@pytest.fixture
def wire(api: AppHarness) -> Iterator[WireRecorder]:
    """Records every `/v1` answer of the test and checks them all against the client's types at its end."""
    recorder = WireRecorder()
    api.client.event_hooks["response"].append(recorder)
    yield recorder
    api.client.event_hooks["response"].remove(recorder)
    assert recorder.check() > 0


def _stored_config(api: AppHarness, job_id: str) -> dict[str, Any]:
    answer = api.client.get(f"{API}/jobs/{job_id}", headers=api.auth("alice"))
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["config"])


def test_files_upload_list_read_and_delete(api: AppHarness, wire: WireRecorder) -> None:
    client, other = harness_client(api, "alice"), harness_client(api, "bob")
    first = upload_file(client, jsonl_rows(3), harness=api)
    assert (first.object, first.purpose, first.status, first.filename) == (
        "file",
        "fine-tune",
        "processed",
        "train.jsonl",
    )
    assert first.bytes > 0
    second = upload_file(client, jsonl_rows(2, start=5), harness=api)  # the same file name again
    assert second.id != first.id

    bad = jsonl_rows(1) + b'{"prompt": "only a prompt"}\n'
    with pytest.raises(openai.BadRequestError) as refused:
        upload_file(client, bad, "bad.jsonl", harness=api)
    assert "bad.jsonl line 2" in refused.value.message and "completion" in refused.value.message
    assert "expected" in refused.value.message
    with pytest.raises(openai.BadRequestError) as wrong_purpose:
        client.files.create(file=("train.jsonl", jsonl_rows(1)), purpose="assistants")
    assert wrong_purpose.value.body["param"] == "purpose"  # type: ignore[index]

    page = client.files.list(limit=1)
    assert [f.id for f in page.data] == [second.id] and page.has_more
    assert [f.id for f in page.get_next_page().data] == [first.id]
    assert [f.id for f in client.files.list(order="asc")] == [first.id, second.id]
    assert list(client.files.list(purpose="batch")) == []
    assert client.files.retrieve(first.id).id == first.id
    rows = [json.loads(line) for line in client.files.content(first.id).text.splitlines()]
    assert [row["completion"] for row in rows] == ["It is 0.", "It is 2.", "It is 4."]

    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        other.files.delete(first.id)
    deleted = client.files.delete(first.id)
    assert (deleted.id, deleted.deleted) == (first.id, True)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(first.id)


def test_create_maps_hyperparameters_and_method_onto_the_job_config(api: AppHarness, wire: WireRecorder) -> None:
    base = api.base_model("alice")
    client = harness_client(api, "alice")
    training, job = upload_and_create(
        client, jsonl_rows(3), base["name"], harness=api, suffix="support-v1", seed=7,
        metadata={"team": "docs"}, hyperparameters={"n_epochs": 2, "batch_size": 8, "learning_rate_multiplier": 2},
    )  # fmt: skip
    config = _stored_config(api, job.id)
    assert (config["task"], config["epochs"], config["batch_size"]) == ("sft", 2, 8)
    assert config["gradient_accumulation_steps"] == 1 and config["learning_rate"] == pytest.approx(1e-4)
    assert config["seed"] == 7
    assert (job.status, job.model, job.training_file, job.seed) == ("queued", base["name"], training.id, 7)
    assert job.hyperparameters.n_epochs == 2 and job.hyperparameters.batch_size == 8
    assert job.hyperparameters.learning_rate_multiplier == pytest.approx(2.0)
    assert job.metadata == {"team": "docs"} and job.fine_tuned_model is None
    assert config["mixed_precision"] == "auto"  # the client cannot name one: the hardware's best

    extended = client.fine_tuning.jobs.create(
        model=base["name"], training_file=training.id, extra_body={"config": {"max_length": 64, "lora_r": 4}}
    )
    assert {key: _stored_config(api, extended.id)[key] for key in ("max_length", "lora_r")} == {
        "max_length": 64,
        "lora_r": 4,
    }

    pairs = upload_file(client, PREFERENCE_ROWS, "pairs.jsonl", harness=api)
    dpo = client.fine_tuning.jobs.create(
        model=base["id"], training_file=pairs.id,
        method={"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.2, "n_epochs": "auto"}}},
    )  # fmt: skip
    config = _stored_config(api, dpo.id)
    assert (config["task"], config["beta"], config["epochs"]) == ("dpo", 0.2, 1)
    assert config["learning_rate"] == pytest.approx(2e-5)  # the dpo recipe's
    assert dpo.method is not None and dpo.method.type == "dpo"
    assert dpo.method.dpo is not None and dpo.method.dpo.hyperparameters is not None
    assert dpo.method.dpo.hyperparameters.beta == pytest.approx(0.2)

    tracked = client.fine_tuning.jobs.create(
        model=base["name"], training_file=training.id, integrations=[{"type": "wandb", "wandb": {"project": "p"}}]
    )
    assert _stored_config(api, tracked.id)["report_to"] == ["wandb"]
    assert tracked.integrations is not None and tracked.integrations[0].wandb.project == "p"

    refusals: list[tuple[dict[str, Any], str]] = [
        ({"hyperparameters": {"n_epochs": 0}}, "hyperparameters.n_epochs"),
        ({"hyperparameters": {"learning_rate_multiplier": 1e6}}, "hyperparameters.learning_rate_multiplier"),
        ({"method": {"type": "supervised", "supervised": {"hyperparameters": {"batch_size": "many"}}}},
         "method.supervised.hyperparameters.batch_size"),
        ({"suffix": "no spaces allowed"}, "suffix"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"method": {"type": "dpo"}}, "training_file"),  # prompt/completion rows cannot train dpo
        ({"extra_body": {"config": {"epochs": 2}}}, "config.epochs"),  # hyperparameters.n_epochs says it
        ({"extra_body": {"config": {"lora_r": 0}}}, "config.lora_r"),
    ]  # fmt: skip
    for extra, field in refusals:
        with pytest.raises(openai.BadRequestError) as refused:
            client.fine_tuning.jobs.create(model=base["name"], training_file=training.id, **extra)
        assert refused.value.body["param"] == field, refused.value.message  # type: ignore[index]
        assert field in refused.value.message
    with pytest.raises(openai.NotFoundError):
        client.fine_tuning.jobs.create(model="no-such-model", training_file=training.id)
    with pytest.raises(openai.NotFoundError):  # another user's file
        harness_client(api, "bob").fine_tuning.jobs.create(
            model=api.base_model("bob")["name"], training_file=training.id
        )


def test_list_retrieve_and_state_changes(api: AppHarness, wire: WireRecorder) -> None:
    base = api.base_model("alice")
    client = harness_client(api, "alice")
    training = upload_file(client, jsonl_rows(3), harness=api)
    created = [
        client.fine_tuning.jobs.create(model=base["name"], training_file=training.id, metadata={"n": str(i)})
        for i in range(3)
    ]
    page = client.fine_tuning.jobs.list(limit=2)
    assert [job.id for job in page.data] == [created[2].id, created[1].id] and page.has_more
    assert [job.id for job in client.fine_tuning.jobs.list(limit=2)] == [job.id for job in reversed(created)]
    assert [job.id for job in client.fine_tuning.jobs.list(metadata={"n": "1"})] == [created[1].id]
    assert client.fine_tuning.jobs.retrieve(created[0].id).status == "queued"

    running = claim_job(api.store, "test-worker", devices=0, lease_s=60)  # the oldest: created[0]
    assert running is not None and running.job_id == created[0].id
    assert client.fine_tuning.jobs.retrieve(created[0].id).status == "running"
    with pytest.raises(openai.ConflictError):  # only a running job pauses
        client.fine_tuning.jobs.pause(created[1].id)
    assert client.fine_tuning.jobs.pause(created[0].id).status == "running"  # pausing: it writes a checkpoint
    assert api.store.queue.finish(running.item_id, running.fencing_token, JobEnd(JobState.PAUSED))
    assert client.fine_tuning.jobs.retrieve(created[0].id).status == "queued"  # paused: waits to be resumed
    assert client.fine_tuning.jobs.resume(created[0].id).status == "queued"

    cancelled = client.fine_tuning.jobs.cancel(created[1].id)
    assert cancelled.status == "cancelled" and cancelled.finished_at is not None
    with pytest.raises(openai.ConflictError):
        client.fine_tuning.jobs.cancel(created[1].id)

    failing = claim_job(api.store, "test-worker", devices=0, lease_s=60)
    assert failing is not None
    diagnosis = {"kind": "oom", "message": "out of memory at step 3"}
    end = JobEnd(JobState.FAILED, error="CUDA OOM", diagnosis=diagnosis)
    assert api.store.queue.finish(failing.item_id, failing.fencing_token, end)
    failed = client.fine_tuning.jobs.retrieve(failing.job_id)
    assert failed.status == "failed" and failed.error is not None
    assert (failed.error.code, failed.error.message) == ("oom", "CUDA OOM")

    other = harness_client(api, "bob")
    for call in (other.fine_tuning.jobs.retrieve, other.fine_tuning.jobs.cancel, other.fine_tuning.jobs.list_events):
        with pytest.raises(openai.NotFoundError):
            call(created[2].id)
    assert list(other.fine_tuning.jobs.list()) == []


def test_events_checkpoints_and_models(api: AppHarness, wire: WireRecorder, tmp_path: Path) -> None:
    base = api.base_model("alice")
    client = harness_client(api, "alice")
    training, job = upload_and_create(client, jsonl_rows(3), base["name"], harness=api, suffix="tiny")
    claimed = api.commit_checkpoint(job.id, 2, tmp_path, {"adapter_model.safetensors": b"weights"})
    events = [
        NewEvent(seq=1, type="phase", payload={"type": "phase", "name": "training", "status": "started"}),
        NewEvent(seq=2, type="metric", payload={"type": "metric", "step": 1, "loss": 2.5, "tokens_seen": 40}),
        NewEvent(seq=3, type="metric", payload={"type": "metric", "step": 2, "loss": 1.5, "tokens_seen": 80}),
        NewEvent(seq=4, type="eval", payload={"type": "eval", "step": 2, "eval_loss": 1.75}),
        NewEvent(seq=5, type="diagnosis", payload={"type": "diagnosis", "kind": "slow", "message": "slow steps"}),
        NewEvent(seq=6, type="system", payload={"type": "system", "elapsed_s": 15.0, "cpu_percent": 80.0}),
    ]
    api.store.telemetry.append_events(job.id, 1, events)
    points = [
        ("loss", 1, 2.5),
        ("loss", 2, 1.5),
        ("eval_loss", 2, 1.75),
        ("tokens_seen", 1, 40),
        ("tokens_seen", 2, 80),
    ]
    api.store.telemetry.append_metrics(job.id, [MetricPoint(name=n, step=s, value=v) for n, s, v in points])

    page = client.fine_tuning.jobs.list_events(job.id, limit=2)
    assert [event.message for event in page.data] == ["slow steps", "Step 2: validation loss=1.7500"]
    assert page.has_more and page.data[0].level == "warn"
    later = page.get_next_page()
    assert later.data[0].type == "metrics" and later.data[0].data == {"step": 2, "train_loss": 1.5, "tokens_seen": 80}
    assert len(list(client.fine_tuning.jobs.list_events(job.id, limit=2))) == 5  # every page, no system samples

    (checkpoint,) = client.fine_tuning.jobs.checkpoints.list(job.id).data
    name = f"ft:{base['name']}:tiny:{job.id}"
    assert checkpoint.fine_tuned_model_checkpoint == f"{name}:ckpt-step-2" and checkpoint.step_number == 2
    assert (checkpoint.metrics.train_loss, checkpoint.metrics.valid_loss, checkpoint.metrics.step) == (1.5, 1.75, 2)
    assert client.models.retrieve(checkpoint.fine_tuned_model_checkpoint).id == checkpoint.fine_tuned_model_checkpoint

    with pytest.raises(openai.NotFoundError):  # no final model yet
        client.models.retrieve(name)
    final = tmp_path / "final"
    final.mkdir()
    (final / "adapter_model.safetensors").write_bytes(b"final weights")
    api.artifacts.commit_directory(final, final_prefix(api.users["alice"].id, job.id))
    assert api.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.SUCCEEDED))
    done = client.fine_tuning.jobs.retrieve(job.id)
    assert (done.status, done.fine_tuned_model, done.trained_tokens) == ("succeeded", name, 80)

    assert {model.id for model in client.models.list()} == {base["name"], name}
    assert client.models.retrieve(name).owned_by == api.users["alice"].id
    with pytest.raises(openai.NotFoundError):
        harness_client(api, "bob").models.retrieve(name)
    with pytest.raises(openai.ConflictError) as trained:  # the file trained the job: tunedeck's deletion rule
        client.files.delete(training.id)
    assert job.id in trained.value.message
    with pytest.raises(openai.BadRequestError):
        client.models.delete(checkpoint.fine_tuned_model_checkpoint)
    assert client.models.delete(name).deleted
    with pytest.raises(openai.NotFoundError):  # the job went with its model
        client.fine_tuning.jobs.retrieve(job.id)
    assert api.store.fine_tuning_requests.get(job.id) is None
    assert client.models.delete(base["name"]).deleted
    assert list(client.models.list()) == []


def test_every_answer_type_is_known() -> None:
    """The recorder's table names a client type for each route of the `/v1` fine-tuning API."""
    assert _wire_type("GET", "/v1/fine_tuning/jobs/job_1/checkpoints") == (FineTuningJobCheckpoint, True)
    assert _wire_type("DELETE", "/v1/models/ft:a/b:s:job_1") == (ModelDeleted, False)
    assert _wire_type("GET", "/v1/files/f/content") is None  # not JSON: the file's rows


def test_a_job_request_is_backed_up_with_its_job(api: AppHarness) -> None:
    """The request table is one of the tables a backup reads (every model table, in foreign-key order)."""
    with api.store.db.engine.connect() as connection:
        names = [table.name for table in reflected_tables(connection)]
    assert names.index("fine_tuning_requests") > names.index("jobs")


def test_a_job_and_its_request_on_each_database(tmp_path: Path, database_url: str) -> None:
    """The request row (JSON columns, foreign key) is written, read and deleted with its job on both databases."""
    for api in start_harness(make_settings(tmp_path, database_url)):
        client = harness_client(api, "alice")
        _, job = upload_and_create(
            client, jsonl_rows(2), api.base_model("alice")["name"], harness=api, suffix="db",
            metadata={"k": "v"},
        )  # fmt: skip
        assert client.fine_tuning.jobs.retrieve(job.id).metadata == {"k": "v"}
        assert [found.id for found in client.fine_tuning.jobs.list(metadata={"k": "v"})] == [job.id]
        client.fine_tuning.jobs.cancel(job.id)
        api.client.delete(f"{API}/jobs/{job.id}", headers=api.auth("alice")).raise_for_status()
        assert api.store.fine_tuning_requests.get(job.id) is None
        with pytest.raises(openai.AuthenticationError):
            openai_client(api.client, "tdk_not-a-token").models.list()
