"""A job refused by the checks before training reads once, in plain words: no worker paths, the dataset and row."""

from __future__ import annotations

from typing import Any

from tunedeck.web.preflight_view import SHOWN_LINES, preflight_refusal, readable_report, without_worker_paths

WORKER_FILE = "/tmp/tdk-worker/jobs/job_abc/attempt-1/data/train.jsonl"
DATASETS = {"train": "support chats"}


def _phase(checks: list[dict[str, Any]], failed: list[str]) -> dict[str, Any]:
    return {"name": "preflight", "status": "failed", "failed": failed, "report": {"status": "fail", "checks": checks}}


def _row_issue(line: int) -> str:
    return f"  - messages: {WORKER_FILE}:{line}: the answer lies beyond max_length 8 (example has 30 tokens)"


def test_each_failed_check_once_with_dataset_rows_advice_and_what_it_kept_from_running() -> None:
    rows = [_row_issue(line) for line in range(1, 21)] + ["  - and 7 more row(s) like these"]
    tokenization = {
        "number": 3,
        "name": "tokenization",
        "title": "tokenization and loss mask on a few formatted examples",
        "status": "fail",
        "message": "invalid dataset:\n" + "\n".join(rows),
        "advice": ["fix or drop the rows listed, then run preflight again"],
    }
    skipped = {"number": 4, "name": "full_step", "status": "skip", "message": "needs the data: an earlier check failed"}
    optional = {"number": 9, "name": "interconnect", "status": "skip", "message": "one process"}
    refusal = preflight_refusal(_phase([tokenization, skipped, optional], ["tokenization", "full_step"]), DATASETS)

    assert refusal is not None
    [check] = refusal.failed
    assert check.title == "Tokenization and loss mask on a few formatted examples"
    assert check.headline == "invalid dataset:"
    assert len(check.lines) == SHOWN_LINES
    assert check.lines[0].startswith("messages: dataset “support chats”, row 1: the answer lies beyond max_length 8")
    assert check.more == 20 - SHOWN_LINES + 7
    assert check.advice == ["fix or drop the rows listed, then run preflight again"]
    assert refusal.not_run == ["full step"]  # the interconnect does not apply here: not a consequence
    assert "/tmp" not in repr(refusal) and "attempt-1" not in repr(refusal)


def test_a_path_that_is_not_a_dataset_shows_the_file_name() -> None:
    text = "could not read /srv/worker/attempt-2/run/config.json:4 nor /var/cache/x/model.safetensors"
    assert without_worker_paths(text, DATASETS) == "could not read config.json:4 nor model.safetensors"
    assert without_worker_paths("see https://example.com/a/b and 1/2 steps", DATASETS) == (
        "see https://example.com/a/b and 1/2 steps"
    )
    validation = "/w/attempt-1/data/validation.jsonl:12: bad row"
    assert without_worker_paths(validation, {"validation": "held out"}) == "dataset “held out”, row 12: bad row"


def test_only_a_failed_preflight_phase_is_a_refusal() -> None:
    assert preflight_refusal(None, DATASETS) is None
    assert preflight_refusal({"name": "training", "status": "failed"}, DATASETS) is None
    assert preflight_refusal({"name": "preflight", "status": "passed"}, DATASETS) is None
    bare = preflight_refusal({"name": "preflight", "status": "failed", "failed": ["stack"]}, DATASETS)
    assert bare is not None and [c.title for c in bare.failed] == ["Stack"]


def test_the_checks_table_tells_every_check_without_worker_paths() -> None:
    report = {
        "status": "fail",
        "checks": [
            {
                "number": 3,
                "name": "tokenization",
                "status": "fail",
                "message": _row_issue(2),
                "advice": [f"see {WORKER_FILE}"],
            },
            {"number": 4, "name": "full_step", "status": "skipped", "message": "not run: an earlier check failed"},
        ],
    }
    shown = readable_report(report, DATASETS)
    assert shown is not None and "/tmp/" not in str(shown)
    assert "dataset “support chats”, row 2" in shown["checks"][0]["message"]
    assert shown["checks"][0]["advice"] == ["see dataset “support chats”"]
    assert shown["checks"][1]["message"] == "not run: an earlier check failed" and shown["status"] == "fail"
    assert readable_report(None, DATASETS) is None
