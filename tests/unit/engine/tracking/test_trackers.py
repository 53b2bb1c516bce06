"""Experiment trackers: the report_to key, the operator's settings, and the fan-out that never fails a job."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.trackers import offline_environment
from tunedeck.config.loading import config_schema, validate_config
from tunedeck.config.training import TRACKER_NAMES
from tunedeck.core.errors import ConfigError
from tunedeck.core.events import EventType, EventWriter, read_events
from tunedeck.core.settings import Settings
from tunedeck.core.tracker_destinations import TrackerDestinations
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.tracking.fanout import TrackerFanOut, build_tracker
from tunedeck.engine.tracking.protocol import TrackedRun
from tunedeck.engine.tracking.reporting_events import ReportingEventWriter
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.web.form_spec import build_form_spec


class FakeTracker:
    """Records every call; raises `error` on call number `fail_at` of `fail_on` (start, log or finish)."""

    package = "fake-tracker"

    def __init__(self, name: str, fail_on: str | None = None, fail_at: int = 1,
                 error: Exception | None = None) -> None:  # fmt: skip
        self.name = name
        self.fail_on, self.fail_at = fail_on, fail_at
        self.error = error or RuntimeError("tracker server said no")
        self.calls: list[tuple[str, Any]] = []

    def _call(self, action: str, value: Any) -> None:
        self.calls.append((action, value))
        if action == self.fail_on and sum(1 for done, _ in self.calls if done == action) == self.fail_at:
            raise self.error

    def start(self, run: TrackedRun) -> None:
        self._call("start", run.name)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._call("log", (step, dict(metrics)))

    def finish(self, status: str) -> None:
        self._call("finish", status)


def _run(tmp_path: Path) -> TrackedRun:
    return TrackedRun("job (job_1)", {"epochs": 1}, "job_1", None, TrackerDestinations.under(tmp_path))


def _warnings(path: Path) -> list[dict[str, Any]]:
    return [e for e in read_events(path) if e["type"] == "log" and e.get("level") == "warning"]


# --- the report_to key ----------------------------------------------------------------------------


def test_report_to_defaults_to_no_tracker_and_keeps_each_name_once() -> None:
    assert validate_config({}).report_to == []
    assert validate_config({"report_to": ["wandb", "mlflow", "wandb"]}).report_to == ["wandb", "mlflow"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["mlflow", "comet"], 'report_to[1] is "comet", not a tracker: expected one of mlflow, tensorboard, wandb'),
        ("mlflow", "expected a list of tracker names from mlflow, tensorboard, wandb, trackio"),
    ],
)
def test_report_to_refuses_an_unknown_tracker_naming_its_position(value: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config({"report_to": value})
    issues = caught.value.issues
    assert [issue.field for issue in issues] == ["report_to"]
    assert expected in issues[0].message


def test_report_to_reaches_the_schema_and_the_job_form_with_its_choices() -> None:
    assert config_schema()["properties"]["report_to"]["items"]["enum"] == list(TRACKER_NAMES)
    form = build_form_spec()
    logging = next(section for section in form.advanced if section.id == "logging")
    field = next(f for f in logging.fields if f.key == "report_to")
    assert (field.kind, field.default, field.tasks) == ("list", [], None)  # every task, none by default
    assert [value for value, _ in field.options] == ["mlflow", "tensorboard", "wandb", "trackio"]


# --- the operator's settings and the run spec -------------------------------------------------------


def test_tracker_settings_default_to_local_folders_and_wandb_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TUNEDECK_WANDB_MODE", raising=False)
    places = Settings(data_dir=tmp_path).tracker_destinations()
    root = tmp_path.resolve() / "trackers"
    assert places.mlflow_tracking_uri == f"sqlite:///{root / 'mlflow' / 'mlflow.db'}"
    assert (places.tensorboard_dir, places.wandb_dir, places.trackio_dir) == (
        root / "tensorboard", root / "wandb", root / "trackio"
    )
    assert places.wandb_mode == "offline" and places.job_link("job_1") is None
    # trackio's folder reaches the engine processes before anything imports trackio; no key, none passed.
    assert Settings(data_dir=tmp_path).tracker_environment() == {"TRACKIO_DIR": str(root / "trackio")}


def test_tracker_settings_come_from_the_environment_and_the_api_key_stays_out_of_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {
        "TUNEDECK_MLFLOW_TRACKING_URI": "http://mlflow.internal:5000", "TUNEDECK_MLFLOW_EXPERIMENT": "fine-tunes",
        "TUNEDECK_WANDB_MODE": "online", "TUNEDECK_WANDB_PROJECT": "llm", "TUNEDECK_WANDB_ENTITY": "team",
        "TUNEDECK_WANDB_API_KEY": "secret-key-123", "TUNEDECK_PUBLIC_URL": "https://tunedeck.example.org/",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    settings = Settings(data_dir=tmp_path)
    places = settings.tracker_destinations()
    assert (places.mlflow_tracking_uri, places.mlflow_experiment) == ("http://mlflow.internal:5000", "fine-tunes")
    assert (places.wandb_mode, places.wandb_project, places.wandb_entity) == ("online", "llm", "team")
    assert places.job_link("job_1") == "https://tunedeck.example.org/jobs/job_1"
    assert settings.tracker_environment() == {
        "TRACKIO_DIR": str(tmp_path.resolve() / "trackers" / "trackio"),
        "WANDB_API_KEY": "secret-key-123",
    }
    assert "secret-key-123" not in repr(settings)

    spec = RunSpec(validate_config({"report_to": ["wandb"]}), ModelRef("m"), tmp_path / "t.jsonl", tmp_path / "run",
                   job_id="job_1", job_name="bot", tracking=places)  # fmt: skip
    written = spec.to_dict()
    assert "secret-key-123" not in str(written)
    read = RunSpec.from_dict(written)
    assert (read.tracking, read.job_name) == (places, "bot")


def test_a_malformed_tracking_block_is_a_spec_error(tmp_path: Path) -> None:
    data = {"model": "m", "train": "t.jsonl", "out": "run", "tracking": {"mlflow_experiment": "x"}}
    with pytest.raises(ConfigError) as caught:
        RunSpec.from_dict(data)
    assert [issue.field for issue in caught.value.issues] == ["tracking"]


# --- the fan-out ------------------------------------------------------------------------------------


def test_a_tracker_that_raises_mid_run_is_dropped_with_one_warning(tmp_path: Path) -> None:
    steady, failing = FakeTracker("steady"), FakeTracker("flaky", fail_on="log", fail_at=2)
    with EventWriter(tmp_path / "events.jsonl") as events:
        fanout = TrackerFanOut([steady, failing], events)
        fanout.start(_run(tmp_path))
        for step in range(1, 5):
            fanout.log_metrics({"train/loss": 1.0 / step}, step)
        fanout.finish("succeeded")

    warnings = _warnings(tmp_path / "events.jsonl")
    assert [(w["tracker"], w["message"]) for w in warnings] == [
        ("flaky", "flaky: log failed: RuntimeError: tracker server said no; the job goes on without reporting to flaky")
    ]
    assert [action for action, _ in failing.calls] == ["start", "log", "log", "finish"]
    assert failing.calls[-1] == ("finish", "failed")  # closed once, when dropped
    assert [value[0] for action, value in steady.calls if action == "log"] == [1, 2, 3, 4]
    assert steady.calls[-1] == ("finish", "succeeded")


def test_a_missing_tracker_library_names_the_package_and_the_install_command(tmp_path: Path) -> None:
    missing = FakeTracker("fake", fail_on="start", error=ModuleNotFoundError("No module named 'fake'"))
    with EventWriter(tmp_path / "events.jsonl") as events:
        fanout = TrackerFanOut([missing], events)
        fanout.start(_run(tmp_path))
        fanout.log_metrics({"train/loss": 1.0}, 1)
        assert fanout.names == []

    [warning] = _warnings(tmp_path / "events.jsonl")
    assert "fake-tracker package is not installed" in warning["message"]
    assert "make install-trackers" in warning["message"]
    assert [action for action, _ in missing.calls] == ["start", "finish"]


@pytest.mark.parametrize(("name", "modules", "package"), [
    ("mlflow", ("mlflow",), "mlflow-skinny"),
    ("tensorboard", ("tensorboard", "torch.utils.tensorboard"), "tensorboard"),
    ("wandb", ("wandb",), "wandb"),
    ("trackio", ("trackio", "trackio.utils"), "trackio"),
])  # fmt: skip
def test_a_real_tracker_without_its_library_warns_and_the_run_goes_on(
    name: str, modules: tuple[str, ...], package: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The library is absent from this process (even when an earlier test loaded it and its submodules),
    # as on a worker installed without `make install-trackers`.
    loaded = [key for key in sys.modules if any(key == m or key.startswith(f"{m}.") for m in modules)]
    for module in {*modules, *loaded}:
        monkeypatch.setitem(sys.modules, module, None)
    offline_environment(monkeypatch)
    with EventWriter(tmp_path / "events.jsonl") as events:
        fanout = TrackerFanOut([build_tracker(name)], events)
        fanout.start(_run(tmp_path))
        fanout.log_metrics({"train/loss": 1.0}, 1)
        fanout.finish("succeeded")

    [warning] = _warnings(tmp_path / "events.jsonl")
    assert warning["tracker"] == name
    assert f"{name}: the {package} package is not installed" in warning["message"]
    assert "make install-trackers installs it" in warning["message"]


def test_events_reach_the_trackers_named_by_kind_and_the_result_closes_them(tmp_path: Path) -> None:
    tracker = FakeTracker("fake")
    inner = EventWriter(tmp_path / "events.jsonl")
    fanout = TrackerFanOut([tracker], inner)
    fanout.start(_run(tmp_path))
    events = ReportingEventWriter(inner, fanout)
    events.emit(EventType.PHASE, name="baseline_eval", status="completed",
                metrics={"eval_loss": 4.0, "exact_match": 0.0, "num_examples": 4, "broken": None})  # fmt: skip
    events.emit(EventType.METRIC, step=1, epoch=0.5, loss=3.0, learning_rate=0.1, grad_norm=None)
    events.emit(EventType.EVAL, step=2, epoch=1.0, eval_loss=2.5)
    events.emit(EventType.LOG, level="info", message="not a metric", step=2)
    events.emit(EventType.PHASE, name="final_eval", status="completed", metrics={"eval_loss": 2.0})
    events.emit(EventType.RESULT, status="succeeded", global_step=2, stopped_early=False)
    events.close()

    assert [value for action, value in tracker.calls if action == "log"] == [
        (0, {"baseline/loss": 4.0, "baseline/exact_match": 0.0, "baseline/num_examples": 4.0}),
        (1, {"train/epoch": 0.5, "train/loss": 3.0, "train/learning_rate": 0.1}),
        (2, {"eval/epoch": 1.0, "eval/loss": 2.5}),
        (2, {"final/loss": 2.0}),
    ]
    assert tracker.calls[-1] == ("finish", "succeeded")
    assert [e["type"] for e in read_events(tmp_path / "events.jsonl")] == [
        "phase", "metric", "eval", "log", "phase", "result"
    ]  # fmt: skip


def test_a_run_without_a_result_closes_its_trackers_as_failed(tmp_path: Path) -> None:
    tracker = FakeTracker("fake")
    inner = EventWriter(tmp_path / "events.jsonl")
    fanout = TrackerFanOut([tracker], inner)
    fanout.start(_run(tmp_path))
    ReportingEventWriter(inner, fanout).close()
    assert tracker.calls[-1] == ("finish", "failed")
