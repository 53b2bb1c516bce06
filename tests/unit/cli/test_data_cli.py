"""`tunedeck data ...`: exit codes, every issue printed, JSON output."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.fixtures.data import PROMPT_COMPLETION_ROWS, write_jsonl
from tunedeck.cli.main import app

runner = CliRunner()


def _bad_file(tmp_path: Path) -> Path:
    rows: list[object] = [*PROMPT_COMPLETION_ROWS]
    rows[1] = {"prompt": "x"}
    rows[4] = {"prompt": "y", "completion": ""}
    return write_jsonl(tmp_path / "bad.jsonl", rows)


def test_validate_ok_and_invalid(tmp_path: Path, chat_file: Path) -> None:
    ok = runner.invoke(app, ["data", "validate", str(chat_file)])
    assert ok.exit_code == 0 and "valid" in ok.stdout and "chat" in ok.stdout
    bad = _bad_file(tmp_path)
    result = runner.invoke(app, ["data", "validate", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:2: completion: missing field" in result.stderr
    assert f"{bad}:5: completion: empty text" in result.stderr
    as_json = runner.invoke(app, ["data", "validate", str(bad), "--json"])
    report = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and not report["ok"] and report["issue_count"] == 2
    assert [(i["line"], i["field"]) for i in report["issues"]] == [(2, "completion"), (5, "completion")]
    missing = runner.invoke(app, ["data", "validate", str(tmp_path / "nope.jsonl"), "--json"])
    assert missing.exit_code == 1 and json.loads(missing.stdout)["issues"][0]["message"] == "file not found"


def test_validate_format_override(text_file: Path) -> None:
    result = runner.invoke(app, ["data", "validate", str(text_file), "--format", "chat", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["issues"][0]["message"] == "row of another format mixed in"


def test_register_and_drop_invalid(tmp_path: Path) -> None:
    bad, root = _bad_file(tmp_path), tmp_path / "registry"
    refused = runner.invoke(app, ["data", "register", str(bad), "--name", "qa", "--root", str(root)])
    assert refused.exit_code == 1 and not (root / "qa").exists()
    kept = runner.invoke(
        app, ["data", "register", str(bad), "--name", "qa", "--root", str(root), "--drop-invalid", "--json"]
    )
    out = json.loads(kept.stdout)
    assert kept.exit_code == 0 and out["manifest"]["version"] == 1 and out["manifest"]["rows"] == 4
    assert sorted({d["line"] for d in out["dropped"]}) == [2, 5]


def test_split_with_sealed_test(tmp_path: Path) -> None:
    rows = [{"text": f"row {i} of the corpus"} for i in range(20)]
    source = write_jsonl(tmp_path / "all.jsonl", rows)
    args = [
        "data",
        "split",
        str(source),
        "--out",
        str(tmp_path / "out"),
        "--ratios",
        "0.8,0.1,0.1",
        "--seed",
        "42",
        "--seal-test",
        "--json",
    ]
    result = runner.invoke(app, args)
    splits = json.loads(result.stdout)["splits"]
    assert result.exit_code == 0 and [splits[s]["rows"] for s in ("train", "validation", "test")] == [
        16,
        2,
        2,
    ]
    assert splits["test"]["sealed"] and not splits["train"]["sealed"]
    assert (tmp_path / "out" / "test.jsonl").is_file() and (
        tmp_path / "out" / "split_manifest.json"
    ).is_file()
    bad_ratios = runner.invoke(
        app, ["data", "split", str(source), "--out", str(tmp_path / "x"), "--ratios", "1,1"]
    )
    assert bad_ratios.exit_code == 1 and "ratios" in bad_ratios.stderr


def test_dedup_against_and_drop(tmp_path: Path) -> None:
    train = write_jsonl(
        tmp_path / "train.jsonl",
        [
            {"text": "alpha beta gamma delta epsilon"},
            {"text": "completely different words here"},
            {"text": "ALPHA beta gamma delta epsilon"},
        ],
    )
    test = write_jsonl(tmp_path / "test.jsonl", [{"text": "completely different words here"}])
    out = tmp_path / "clean.jsonl"
    result = runner.invoke(
        app, ["data", "dedup", str(train), "--against", str(test), "--drop", "--out", str(out), "--json"]
    )
    report = json.loads(result.stdout)
    assert (
        result.exit_code == 0
        and report["counts"]["exact_within"] == 1
        and report["counts"]["exact_across"] == 1
    )
    assert report["contamination"]["pairs_by_split"] == {"test": 1}
    assert out.read_text(encoding="utf-8").splitlines() == ['{"text":"alpha beta gamma delta epsilon"}']
    strict = runner.invoke(app, ["data", "dedup", str(train), "--strict"])
    assert strict.exit_code == 1
    needs_out = runner.invoke(app, ["data", "dedup", str(train), "--drop"])
    assert needs_out.exit_code == 1


def test_scan_policies(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "pii.jsonl", [{"text": "mail me at jane.doe@example.com"}, {"text": "fine"}]
    )
    warn = runner.invoke(app, ["data", "scan", str(source), "--json"])
    report = json.loads(warn.stdout)
    assert (
        warn.exit_code == 0 and report["counts"] == {"email": 1} and "jane.doe@example.com" not in warn.stdout
    )
    block = runner.invoke(app, ["data", "scan", str(source), "--policy", "block"])
    assert (
        block.exit_code == 1 and f"{source}:1" in block.stderr and "jane.doe@example.com" not in block.stderr
    )
    root = tmp_path / "registry"
    redact = runner.invoke(
        app,
        ["data", "scan", str(source), "--policy", "redact", "--root", str(root), "--name", "pii", "--json"],
    )
    assert redact.exit_code == 0 and json.loads(redact.stdout)["redacted"]["version"] == 1
    assert "[REDACTED:email]" in (root / "pii" / "v1" / "data.jsonl").read_text(encoding="utf-8")
    no_root = runner.invoke(app, ["data", "scan", str(source), "--policy", "redact"])
    assert no_root.exit_code == 1
