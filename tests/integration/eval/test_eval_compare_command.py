"""`tunedeck compare` and `tunedeck eval report` read the store and the run files the worker uploaded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.eval.report_data import BASELINE, evaluation
from tunedeck.store.records import MetricPoint


def test_compare_and_report_from_the_store(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedeck.cli.main import app
    from tunedeck.storage.base import job_prefix
    from tunedeck.storage.factory import open_store
    from tunedeck.store.models import Job
    from tunedeck.store.store import JobStore

    storage_url = (tmp_path / "artifacts").resolve().as_uri()
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", storage_url)
    artifacts = open_store(storage_url)
    reference = {"learning_rate": 1e-4, "lora_r": 16, "guards": ["per_class.promo.f1 >= baseline"]}
    finals = {
        "reference": evaluation(0.80, 0.50, {"ham": 0.85, "spam": 0.80, "promo": 0.75}),
        "rank-64": evaluation(0.83, 0.45, {"ham": 0.95, "spam": 0.90, "promo": 0.20}),
        "lr-high": None,
    }
    configs = {"reference": {}, "rank-64": {"lora_r": 64}, "lr-high": {"learning_rate": 0.01}}
    with JobStore.open(sqlite_url, migrate=False) as store:
        owner = store.users.create_user("bob")
        experiment = store.experiments.create(owner, name="rank sweep", hypothesis="rank helps",
                                              reference_config=reference)  # fmt: skip
        ids = {}
        for name, overrides in configs.items():
            config = {"learning_rate": 1e-4, "lora_r": 16, **overrides}
            job = store.jobs.enqueue(owner, name=name, config=config, experiment_id=experiment.id)
            ids[name] = job.id
            with store.db.write() as session:
                row = session.get(Job, job.id)
                assert row is not None
                row.state = "failed" if finals[name] is None else "succeeded"
                row.error_message = "training failed at step 4: loss is NaN" if finals[name] is None else None
            prefix = f"{job_prefix(owner.id, job.id)}/run"
            artifacts.put_bytes(f"{prefix}/baseline_eval.json", json.dumps(BASELINE).encode())
            artifacts.put_bytes(f"{prefix}/config.json", json.dumps({"derived": {"total_steps": 30}}).encode())
            if finals[name] is not None:
                artifacts.put_bytes(f"{prefix}/final_eval.json", json.dumps(finals[name]).encode())
            store.telemetry.append_metrics(job.id, [MetricPoint("loss", step, 1.0 / step) for step in (1, 2, 3)])

    runner = CliRunner()
    html, markdown = tmp_path / "report.html", tmp_path / "report.md"
    result = runner.invoke(app, ["compare", experiment.id, "--html", str(html), "--markdown", str(markdown),
                                 "--database-url", sqlite_url])  # fmt: skip
    assert result.exit_code == 0, result.output
    page, text = html.read_text(), markdown.read_text()
    for name in configs:
        assert name in page and f"| {name}" in text
    assert "<mark><strong>lora_r</strong>: 16 → 64</mark>" in page
    assert "failed: training failed at step 4" in text
    assert "Δref +0.0300" in page and "VIOLATED" in page
    assert 'src="data:image/png;base64,' in page and not re.search(r"""(src|href)=["']?https?:""", page)
    assert "| rank-64 | loss | 3 | 1.0000 | 0.3333 | 0.3333 |" in text

    report = runner.invoke(app, ["eval", "report", "--job", ids["rank-64"], "--json", str(tmp_path / "r.json"),
                                 "--database-url", sqlite_url])  # fmt: skip
    assert report.exit_code == 0, report.output
    written = json.loads((tmp_path / "r.json").read_text())
    assert {row["class"] for row in written["limits"]["classes_worse"]} == {"promo"}
    assert written["experiment"]["hypothesis"] == "rank helps"
    assert written["limits"]["guard_violations"] == ["per_class.promo.f1 >= baseline"]
