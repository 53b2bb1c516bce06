"""Progress on large inputs for `data dedup` and `data inspect`, like validate and scan have."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tunedeck.cli.data_commands as data_commands
import tunedeck.cli.data_inspect_command as data_inspect_command
from tests.fixtures.data import write_jsonl
from tunedeck.cli.main import app
from tunedeck.data.dedup import find_duplicates
from tunedeck.data.loading import load_dataset

runner = CliRunner()


def _recording(bars: list[tuple[str, list[int]]]) -> Callable[..., Any]:
    """A stand-in for file_progress / row_progress that records its label and every update."""

    @contextmanager
    def progress(_size: Any, label: str, enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
        updates: list[int] = []
        bars.append((label, updates))
        yield updates.append if enabled else None

    return progress


def _rows(count: int, offset: int = 0) -> list[dict[str, str]]:
    return [{"text": f"row {i + offset} says {'lorem ' * (i % 7)}ipsum number {i + offset}"} for i in range(count)]


def test_find_duplicates_reports_rows_done(tmp_path: Path) -> None:
    train = load_dataset(write_jsonl(tmp_path / "train.jsonl", _rows(2500)))
    test = load_dataset(write_jsonl(tmp_path / "test.jsonl", _rows(300, offset=5000)))
    done: list[int] = []
    find_duplicates({"train": train, "test": test}, on_progress=done.append)
    assert done == sorted(done) and done[-1] == 2800 and len(done) >= 3


def test_dedup_shows_reading_and_comparing_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bars: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(data_commands, "file_progress", _recording(bars))
    monkeypatch.setattr(data_commands, "row_progress", _recording(bars))
    train = write_jsonl(tmp_path / "train.jsonl", _rows(1200))
    test = write_jsonl(tmp_path / "test.jsonl", _rows(10))
    result = runner.invoke(app, ["data", "dedup", str(train), "--against", str(test)])
    assert result.exit_code == 0, result.output
    labels = [label for label, _ in bars]
    assert labels == ["reading train", "reading test", "comparing"]
    assert bars[-1][1][-1] == 1210  # the comparison bar ends at every row of both files
    assert bars[0][1], "load_dataset fed the reading bar"
    bars.clear()
    quiet = runner.invoke(app, ["data", "dedup", str(train), "--json"])
    assert quiet.exit_code == 0 and all(not updates for _, updates in bars)  # --json: no bars
    json.loads(quiet.stdout)


def test_dedup_progress_bars_stay_off_for_small_files(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", _rows(20))
    with data_commands.file_progress(train, "reading") as progress:
        assert progress is None
    with data_commands.row_progress(20, "comparing") as progress:
        assert progress is None


def test_inspect_shows_reading_progress_and_tokenizing_status(tiny_llama_dir: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    bars: list[tuple[str, list[int]]] = []
    statuses: list[tuple[int, bool]] = []

    @contextmanager
    def status(rows: int, enabled: bool = True) -> Iterator[None]:
        statuses.append((rows, enabled))
        yield

    monkeypatch.setattr(data_inspect_command, "file_progress", _recording(bars))
    monkeypatch.setattr(data_inspect_command, "tokenizing_status", status)
    data = write_jsonl(tmp_path / "pc.jsonl", [{"prompt": f"Q{i}:", "completion": " yes"} for i in range(1500)])
    result = runner.invoke(app, ["data", "inspect", str(data), "--model", str(tiny_llama_dir),
                                 "--max-length", "32", "-n", "1"])
    assert result.exit_code == 0, result.output
    assert [label for label, _ in bars] == ["reading"] and bars[0][1]
    assert statuses == [(1500, True)]


def test_tokenizing_status_only_for_many_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []

    @contextmanager
    def fake_status(message: str) -> Iterator[None]:
        shown.append(message)
        yield

    monkeypatch.setattr(data_inspect_command.err_console, "status", fake_status)
    with data_inspect_command.tokenizing_status(10):
        pass
    with data_inspect_command.tokenizing_status(data_inspect_command.PROGRESS_MIN_ROWS, enabled=False):
        pass
    with data_inspect_command.tokenizing_status(data_inspect_command.PROGRESS_MIN_ROWS):
        pass
    assert shown == [f"tokenizing {data_inspect_command.PROGRESS_MIN_ROWS:,} rows"]
