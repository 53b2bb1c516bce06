"""Experiments compare what holds: jobs created through the API with a dataset id, notes, procedure flags."""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures.app import AppHarness
from tunedeck.storage.base import job_prefix

API = "/api/v1"


def _job(web: AppHarness, experiment_id: str, name: str, train: str, validation: str, **config: Any) -> str:
    model = web.base_model("alice")
    body = {
        "name": name, "base_model_id": model["id"], "train_dataset_id": train, "validation_dataset_id": validation,
        "experiment_id": experiment_id, "config": {"epochs": 1, **config},
    }  # fmt: skip
    answer = web.client.post(f"{API}/jobs", headers=web.auth("alice"), json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _comparison(web: AppHarness, experiment_id: str) -> dict[str, Any]:
    answer = web.client.get(f"{API}/experiments/{experiment_id}/comparison", headers=web.auth("alice"))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_jobs_validated_on_a_dataset_id_are_comparable(web: AppHarness) -> None:
    train, validation = web.dataset("alice", name="train"), web.dataset("alice", name="val")
    for reference_config in ({"epochs": 1}, {"epochs": 1, "validation_dataset_id": validation["id"]}):
        created = web.client.post(
            f"{API}/experiments", headers=web.auth("alice"),
            json={"name": f"rank {len(reference_config)}", "reference_config": reference_config},
        )  # fmt: skip
        assert created.status_code == 201, created.text
        experiment = created.json()
        if "validation_dataset_id" in reference_config:
            # Kept in the form a job's config stores: the version it evaluates on.
            assert experiment["reference_config"]["validation_dataset_id"] == validation["latest"]["id"]
        reference = _job(web, experiment["id"], "reference", train["id"], validation["id"])
        variant = _job(web, experiment["id"], "rank-64", train["id"], validation["id"], lora_r=64)
        comparison = _comparison(web, experiment["id"])
        assert comparison["reference_job_id"] == reference
        variants = {v["job_id"]: v for v in comparison["variants"]}
        assert variants[reference]["config_diff"] == {}
        assert variants[variant]["config_diff"] == {"lora_r": {"reference": 16, "variant": 64, "group": "model"}}
        assert variants[variant]["changed_groups"] == ["model"]
        assert variants[variant]["procedure_flags"] == []
        assert comparison["warnings"] == []


def _run_files(web: AppHarness, job_id: str, *, derived: dict[str, Any], rows: int, max_new_tokens: int) -> None:
    prefix = f"{job_prefix(web.users['alice'].id, job_id)}/run"
    procedure = {"data_sha256": "d" * 64, "num_examples": rows, "generation": {"max_new_tokens": max_new_tokens}}
    final = {"metrics": {"accuracy": 0.5}, "procedure_sha256": "p" * 64, "procedure": procedure}
    web.artifacts.put_bytes(f"{prefix}/final_eval.json", json.dumps(final).encode())
    web.artifacts.put_bytes(f"{prefix}/config.json", json.dumps({"derived": derived}).encode())


def test_several_groups_need_a_note_and_other_procedures_are_flagged_everywhere(web: AppHarness) -> None:
    train, validation = web.dataset("alice", name="train"), web.dataset("alice", name="val")
    created = web.client.post(
        f"{API}/experiments", headers=web.auth("alice"),
        json={"name": "lr", "reference_config": {"epochs": 1, "mixed_precision": "bf16"}},
    )  # fmt: skip
    experiment = created.json()["id"]
    reference = _job(web, experiment, "reference", train["id"], validation["id"], mixed_precision="bf16")
    # "auto" that resolved to bf16, and 16 × 1 examples per step instead of 4 × 4: nothing changed.
    same = _job(web, experiment, "same", train["id"], validation["id"], mixed_precision="auto",
                batch_size=16, gradient_accumulation_steps=1)  # fmt: skip
    both = _job(web, experiment, "both", train["id"], validation["id"], learning_rate=1e-4, lora_r=64, seed=7)
    _run_files(web, reference, derived={"resolved_precision": "bf16", "total_steps": 10}, rows=30, max_new_tokens=128)
    _run_files(web, same, derived={"resolved_precision": "bf16", "total_steps": 10}, rows=30, max_new_tokens=128)
    _run_files(web, both, derived={"resolved_precision": "bf16", "total_steps": 12}, rows=29, max_new_tokens=64)

    comparison = _comparison(web, experiment)
    variants = {v["job_id"]: v for v in comparison["variants"]}
    assert comparison["reference_job_id"] == reference
    assert variants[same]["config_diff"] == {} and variants[same]["procedure_flags"] == []
    assert set(variants[both]["config_diff"]) == {"learning_rate", "lora_r", "seed"}
    assert variants[both]["changed_groups"] == ["optimisation", "model", "seed"]
    checks = {flag["check"]: flag for flag in variants[both]["procedure_flags"]}
    assert set(checks) == {"evaluation_rows", "decoding", "seed", "budget.total_steps"}
    assert checks["evaluation_rows"]["reference"]["rows"] == 30 and checks["evaluation_rows"]["variant"]["rows"] == 29
    assert any("both" in w and "3 groups of keys" in w for w in comparison["warnings"])

    html = web.client.get(f"{API}/experiments/{experiment}/comparison?format=html", headers=web.auth("alice")).text
    markdown = web.client.get(
        f"{API}/experiments/{experiment}/comparison?format=markdown", headers=web.auth("alice")
    ).text
    for text in (html, markdown):
        assert "evaluation_rows" in text and "decoding" in text and "not compared alike" in text
    from tests.fixtures.app import sign_in

    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/experiments/{experiment}").text
    assert 'data-check="evaluation_rows"' in page and 'data-check="decoding"' in page

    noted = web.client.put(
        f"{API}/experiments/{experiment}/variants/{both}/note", headers=web.auth("alice"),
        json={"note": "the larger rank needs a larger learning rate; seed drawn again on purpose"},
    )  # fmt: skip
    assert noted.status_code == 200, noted.text
    assert noted.json()["variant_notes"] == {
        both: "the larger rank needs a larger learning rate; seed drawn again on purpose"
    }
    assert "variant_notes" not in noted.json()["reference_config"]
    comparison = _comparison(web, experiment)
    assert not any("groups of keys" in w for w in comparison["warnings"])
    assert next(v for v in comparison["variants"] if v["job_id"] == both)["note"].startswith("the larger rank")
    # The procedure flags stay: a note explains a change, it does not make other rows comparable.
    assert any("evaluated on" in w for w in comparison["warnings"])

    other = web.client.put(
        f"{API}/experiments/{experiment}/variants/{both}/note", headers=web.auth("bob"), json={"note": "x"}
    )
    assert other.status_code == 404
    outsider = web.job("alice", name="outsider")["id"]
    answer = web.client.put(
        f"{API}/experiments/{experiment}/variants/{outsider}/note", headers=web.auth("alice"), json={"note": "x"}
    )
    assert answer.status_code == 404


def test_every_config_key_has_a_group() -> None:
    from tunedeck.config.training import TrainingConfig
    from tunedeck.eval.config_groups import KEY_GROUPS

    assert set(TrainingConfig.model_fields) <= set(KEY_GROUPS)
