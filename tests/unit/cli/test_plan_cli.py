"""`tunedeck plan create | list | start | show` against a SQLite file, with the clock given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunedeck.cli import plan_commands
from tunedeck.cli.plan_commands import app
from tunedeck.store.store import JobStore


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A migrated SQLite file with alice's experiment; returns (url, experiment id)."""
    monkeypatch.setattr(plan_commands.console, "width", 200)  # tables unwrapped, whatever the terminal
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", (tmp_path / "artifacts").as_uri())
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with JobStore.open(url) as store:
        alice = store.users.create_user("alice")
        experiment = store.experiments.create(alice, name="lora-rank", reference_config={"epochs": 2})
    return url, experiment.id


def test_create_list_start_and_show_a_plan(database: tuple[str, str]) -> None:
    url, experiment_id = database
    runner = CliRunner()
    created = runner.invoke(
        app,
        ["create", experiment_id, "--device", "A100", "--count", "2", "--variant", "r8", "--variant", "r16:3",
         "--train-rows", "20000", "--validation-rows", "500", "--model-params", "7e9", "--price", "3.2",
         "--json", "--database-url", url],
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    plan = json.loads(created.output)
    assert [v["epochs"] for v in plan["workload"]["variants"]] == [2, 3]
    assert plan["timeline"]["estimated_figures"]  # nothing was measured: every figure is an estimate
    assert plan["machine"]["device_count"] == 2

    listed = runner.invoke(app, ["list", "--database-url", url])
    assert listed.exit_code == 0 and plan["id"] in listed.output and "A100 × 2" in listed.output

    started = runner.invoke(app, ["start", plan["id"], "--at", "2027-03-01T08:00:00Z", "--database-url", url])
    assert started.exit_code == 0, started.output
    assert "Initial check" in started.output and "rental ends 2027-03-04T08:00" in started.output
    again = runner.invoke(app, ["start", plan["id"], "--database-url", url])
    assert again.exit_code == 1 and "started at" in again.output

    shown = runner.invoke(app, ["show", plan["id"], "--now", "2027-03-01T09:00:00Z", "--database-url", url])
    assert shown.exit_code == 0, shown.output
    for text in ("Variant r16", "shortest rental that fits", "estimated", "train_examples_per_second", "running"):
        assert text in shown.output


def test_bad_input_is_a_clear_error(database: tuple[str, str]) -> None:
    url, experiment_id = database
    runner = CliRunner()
    neither = runner.invoke(app, ["create", experiment_id, "--train-rows", "10", "--database-url", url])
    assert neither.exit_code == 2 and "--device" in neither.output
    days = runner.invoke(app, ["create", experiment_id, "--device", "H100", "--days", "5", "--database-url", url])
    assert days.exit_code == 2 and "3, 7 or 30" in days.output
    no_size = runner.invoke(
        app,
        ["create", experiment_id, "--device", "H100", "--variant", "v", "--train-rows", "10", "--database-url", url],
    )
    assert no_size.exit_code == 1 and "model_params" in no_size.output and "Traceback" not in no_size.output
    unknown = runner.invoke(app, ["show", "plan_missing", "--database-url", url])
    assert unknown.exit_code == 1 and "not found" in unknown.output
