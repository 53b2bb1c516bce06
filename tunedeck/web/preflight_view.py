"""A job refused by the checks before training, as its page shows it: each failed check once, in plain words.

The refusal's record is the failed `preflight` phase event, which carries the whole report.
Its messages were written on the worker, so they name files by their path there
(`/…/attempt-1/data/train.jsonl:3`); the page names the dataset and row instead, or the
file's name when it is not one of the job's datasets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tunedeck.web.locales.catalogue import marked

SHOWN_LINES = 3  # of a check's listed problems (rows, fields); the rest are counted
# An absolute path, then the line a message names in it (`file:3`).
_PATH = re.compile(r"(?<![\w.:/])(/[^\s/:'\"()\[\],;]+)+(?::(\d+))?")
_MORE = re.compile(r"^and (\d+) more\b")


@dataclass
class FailedCheck:
    """One check that refused the job: what it checks, what it found, how to fix it."""

    title: str
    headline: str
    lines: list[str] = field(default_factory=list)
    more: int = 0
    advice: list[str] = field(default_factory=list)


@dataclass
class PreflightRefusal:
    """Why the checks before training refused a job, for the job page."""

    failed: list[FailedCheck]
    not_run: list[str]


def without_worker_paths(text: str, datasets: Mapping[str, str]) -> str:
    """`text` with each absolute path replaced by what it is to a person.

    `datasets` maps a data file's stem on the worker (`train`, `validation`) to the dataset's
    name: such a file reads `dataset “name”` (`, row N` with its line); any other file, its name.
    """

    def named(match: re.Match[str]) -> str:
        path, line = match.group(0).split(":")[0], match.group(2)
        name = path.rsplit("/", 1)[-1]
        dataset = datasets.get(name.split(".")[0])
        shown = f"dataset “{dataset}”" if dataset else name
        if line is None:
            return shown
        return f"{shown}, row {line}" if dataset else f"{shown}:{line}"

    return _PATH.sub(named, text)


def _check_title(check: Mapping[str, Any]) -> str:
    title = str(check.get("title") or check.get("name") or "a check").strip()
    return title[:1].upper() + title[1:]


def _failed_check(check: Mapping[str, Any], datasets: Mapping[str, str]) -> FailedCheck:
    message = without_worker_paths(str(check.get("message") or ""), datasets)
    headline, *rest = [line.strip() for line in message.splitlines() if line.strip()] or [""]
    lines = [line.removeprefix("- ").strip() for line in rest]
    more = 0
    if lines and (counted := _MORE.match(lines[-1])):
        more = int(counted.group(1))
        lines.pop()
    more += max(0, len(lines) - SHOWN_LINES)
    advice = [without_worker_paths(str(a), datasets) for a in check.get("advice") or [] if str(a).strip()]
    return FailedCheck(_check_title(check), headline, lines[:SHOWN_LINES], more, advice)


def preflight_refusal(phase: Mapping[str, Any] | None, datasets: Mapping[str, str]) -> PreflightRefusal | None:
    """The refusal a failed `preflight` phase event records; None for any other event (or none)."""
    if not phase or phase.get("name") != "preflight" or phase.get("status") != "failed":
        return None
    report = phase.get("report")
    checks = [c for c in (report.get("checks") if isinstance(report, dict) else None) or [] if isinstance(c, dict)]
    blocking = {str(name) for name in phase.get("failed") or []}
    failed = [_failed_check(c, datasets) for c in checks if c.get("status") == "fail"]
    not_run = [
        str(c.get("name")).replace("_", " ") for c in checks if c.get("status") == "skip" and c.get("name") in blocking
    ]
    if not failed:  # a record without its report still refuses: say which checks did
        failed = [
            FailedCheck(str(name).replace("_", " ").capitalize(), marked("This check failed.")) for name in blocking
        ]
    return PreflightRefusal(failed=failed, not_run=not_run)


def readable_report(report: dict[str, Any] | None, datasets: Mapping[str, str]) -> dict[str, Any] | None:
    """A stored preflight report with every check's message and advice told without worker paths."""
    if report is None:
        return None
    checks = [
        {
            **check,
            "message": without_worker_paths(str(check.get("message") or ""), datasets),
            "advice": [without_worker_paths(str(line), datasets) for line in check.get("advice") or []],
        }
        for check in report.get("checks") or []
        if isinstance(check, dict)
    ]
    return {**report, "checks": checks}
