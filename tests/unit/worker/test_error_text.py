"""A failed job's error names the worker's folders by what they are, never by their path on the worker."""

from __future__ import annotations

from pathlib import Path

from tunedeck.worker.error_text import without_worker_paths


def test_the_attempt_and_runs_folders_are_named_not_shown(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    attempt = runs / "job_1" / "attempt-2"
    named = {attempt: "<the attempt's folder>", runs: "<the worker's runs folder>"}
    error = f"OSError: [Errno 28] No space left on device: '{attempt}/out/checkpoint-40/model.safetensors'"
    shown = without_worker_paths(error, named)
    assert shown == (
        "OSError: [Errno 28] No space left on device: '<the attempt's folder>/out/checkpoint-40/model.safetensors'"
    )
    assert str(tmp_path) not in (without_worker_paths(f"lock held in {runs}/job_9", named) or "")
    assert without_worker_paths(None, named) is None and without_worker_paths("plain", named) == "plain"
