"""One tiny run reporting to MLflow, TensorBoard, W&B (offline) and trackio, each read back with its own reader.

Every value a tracker holds is compared with the run's own events: training metrics per step, each
evaluation, the baseline evaluation of the untrained model and the final evaluation of the trained one.
A tracker whose server does not answer leaves one warning and the job succeeds.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.trackers import (
    network_watch,
    offline_environment,
    require_trackers,
    session_trackio_dir,
    wandb_records,
)
from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.core.events import read_events
from tunedeck.core.tracker_destinations import TrackerDestinations
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunResult, RunSpec
from tunedeck.engine.training.training_run import run_training

pytestmark = pytest.mark.slow

JOB_ID, JOB_NAME = "job_trackers01", "tracked"
RUN_NAME = f"{JOB_NAME} ({JOB_ID})"
PUBLIC_URL = "https://tunedeck.example.org"
JOB_LINK = f"{PUBLIC_URL}/jobs/{JOB_ID}"


@dataclass(frozen=True)
class TrackedRun:
    """The finished run, its events and where its trackers wrote."""

    result: RunResult
    events: list[dict[str, Any]]
    places: TrackerDestinations
    hosts: list[str]  # every host the run looked up or connected to (loopback left out)

    def expected(self) -> dict[str, list[tuple[int, float]]]:
        """Each tracker metric name with its (step, value) points, from the run's events."""
        points: dict[str, list[tuple[int, float]]] = {}
        step = 0

        def add(name: str, value: Any) -> None:
            if isinstance(value, int | float) and not isinstance(value, bool):
                points.setdefault(name, []).append((step, float(value)))

        for event in self.events:
            step = event.get("step", step)
            if event["type"] == "metric":
                for key in ("loss", "learning_rate", "grad_norm"):
                    add(f"train/{key}", event[key])
            elif event["type"] == "eval":
                add("eval/loss", event["eval_loss"])
            elif event["type"] == "phase" and event.get("status") == "completed" and event.get("metrics"):
                prefix = {"baseline_eval": "baseline/", "final_eval": "final/"}[event["name"]]
                for key, value in event["metrics"].items():
                    add(prefix + key.removeprefix("eval_"), value)
        return points


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """Trackers libraries installed (or the module skipped), and nothing they do leaves the machine."""
    require_trackers()
    with pytest.MonkeyPatch.context() as patch:
        offline_environment(patch)
        yield


@pytest.fixture(scope="module")
def tracked(offline: None, tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrackedRun]:
    """16 chat rows, 2 epochs of 2 steps, evaluated every 2 steps, reporting to all four trackers."""
    folder = tmp_path_factory.mktemp("trackers")
    with pytest.MonkeyPatch.context() as patch:
        # trackio reads its folder from the environment once per process: the test process's own folder.
        patch.setenv("TRACKIO_DIR", str(session_trackio_dir()))
        yield _run_tracked(tiny_llama_dir, folder)


def _run_tracked(tiny_llama_dir: Path, folder: Path) -> TrackedRun:
    places = replace(
        TrackerDestinations.under(folder / "trackers"),
        mlflow_experiment="tracker-test",
        trackio_dir=session_trackio_dir(),
        trackio_project="tracker-test",
        public_url=PUBLIC_URL,
    )
    config = fast_config(
        report_to=["mlflow", "tensorboard", "wandb", "trackio"],
        epochs=2, eval_strategy="steps", eval_steps=2, eval_max_new_tokens=4,
    )  # fmt: skip
    spec = RunSpec(
        config, ModelRef(str(tiny_llama_dir)), write_chat(folder, 16), folder / "run",
        validation_path=write_chat(folder, 4, name="validation.jsonl"),
        job_id=JOB_ID, job_name=JOB_NAME, tracking=places,
    )  # fmt: skip
    with network_watch() as hosts:
        result = run_training(spec)
    return TrackedRun(result, read_events(folder / "run" / "events.jsonl"), places, hosts)


def test_the_run_reports_to_every_tracker_without_a_warning_or_the_network(tracked: TrackedRun) -> None:
    assert tracked.result.status == "succeeded"
    assert tracked.hosts == []
    warnings = [e["message"] for e in tracked.events if e["type"] == "log" and e.get("tracker")]
    assert warnings == []
    reporting = [e for e in tracked.events if e["type"] == "log" and e.get("trackers")]
    assert reporting[0]["trackers"] == ["mlflow", "tensorboard", "wandb", "trackio"]
    expected = tracked.expected()
    assert len(expected["train/loss"]) == 4 and "baseline/loss" in expected and "final/loss" in expected


def test_mlflow_holds_the_metrics_params_and_job_link(tracked: TrackedRun) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = tracked.places.mlflow_tracking_uri
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["tracker-test"], output_format="list")
    assert [run.info.run_name for run in runs] == [RUN_NAME]
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["learning_rate"] == "0.003" and run.data.params["epochs"] == "2"
    assert run.data.params["report_to"] == '["mlflow", "tensorboard", "wandb", "trackio"]'
    assert run.data.tags["tunedeck.job_url"] == JOB_LINK and run.data.tags["tunedeck.job_id"] == JOB_ID
    client = MlflowClient(tracking_uri=uri)
    for name, points in tracked.expected().items():
        history = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, name)]
        assert history == points, name


def test_tensorboard_event_files_hold_the_same_values(tracked: TrackedRun) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folders = list(tracked.places.tensorboard_dir.iterdir())
    assert [folder.name for folder in folders] == ["tracked_job_trackers01"]
    reader = EventAccumulator(str(folders[0]), size_guidance={"scalars": 0, "tensors": 0})
    reader.Reload()
    for name, points in tracked.expected().items():
        stored = [(event.step, event.value) for event in reader.Scalars(name)]
        assert [step for step, _ in stored] == [step for step, _ in points], name
        assert [value for _, value in stored] == pytest.approx([value for _, value in points], rel=1e-6), name
    texts = {tag: reader.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in reader.Tags()["tensors"]}
    assert texts["job/text_summary"] == JOB_LINK
    assert "| learning_rate | `0.003` |" in texts["config/text_summary"]


def test_wandb_offline_run_file_holds_the_same_values(tracked: TrackedRun) -> None:
    import json

    files = list((tracked.places.wandb_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    rows: dict[int, dict[str, float]] = {}
    run_name = notes = None
    config: dict[str, Any] = {}
    exit_code = None
    for record in wandb_records(files[0]):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_name, notes = record.run.display_name, record.run.notes
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
        elif kind == "history":
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            rows.setdefault(int(row["_step"]), {}).update(row)
        elif kind == "exit":
            exit_code = record.exit.exit_code
    assert (run_name, notes, exit_code) == (RUN_NAME, JOB_LINK, 0)
    assert config["learning_rate"] == 0.003 and config["tunedeck_job"] == JOB_LINK
    for name, points in tracked.expected().items():
        # One history row per step: the last value logged at a step is the one kept.
        last = dict(points)
        assert {step: rows[step][name] for step in last} == pytest.approx(last), name


def test_trackio_local_database_holds_the_same_values(tracked: TrackedRun) -> None:
    from trackio.sqlite_storage import SQLiteStorage

    assert SQLiteStorage.get_runs("tracker-test") == [RUN_NAME]
    logs = SQLiteStorage.get_logs("tracker-test", RUN_NAME)
    config = SQLiteStorage.get_run_config("tracker-test", RUN_NAME)
    assert config is not None and config["learning_rate"] == 0.003 and config["tunedeck_job"] == JOB_LINK
    for name, points in tracked.expected().items():
        stored = [(row["step"], row[name]) for row in logs if name in row]
        assert [step for step, _ in stored] == [step for step, _ in points], name
        assert [value for _, value in stored] == pytest.approx([value for _, value in points]), name


def test_an_unreachable_mlflow_server_leaves_one_warning_and_the_job_succeeds(
    offline: None, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    places = replace(TrackerDestinations.under(tmp_path / "trackers"), mlflow_tracking_uri=f"http://127.0.0.1:{port}")
    spec = RunSpec(
        fast_config(report_to=["mlflow"]), ModelRef(str(tiny_llama_dir)), write_chat(tmp_path, 8), tmp_path / "run",
        job_id=JOB_ID, tracking=places,
    )  # fmt: skip
    result = run_training(spec)

    assert result.status == "succeeded" and result.global_step == 1
    events = read_events(tmp_path / "run" / "events.jsonl")
    warnings = [e for e in events if e["type"] == "log" and e.get("tracker")]
    assert [(e["level"], e["tracker"]) for e in warnings] == [("warning", "mlflow")]
    assert warnings[0]["message"].startswith("mlflow: start failed:")
    assert not any(e.get("trackers") for e in events if e["type"] == "log")  # nothing left to report to
