"""Which kinds of rows each training task trains on: the one rule the engine, the API and the CLI apply."""

from __future__ import annotations

from typing import Final

from tunedeck.core.errors import Issue

SFT_KINDS: Final[tuple[str, ...]] = ("text", "prompt_completion", "chat", "extraction")
"""Kinds a causal language model learns to continue (the sft task)."""

KINDS_FOR_TASK: Final[dict[str, tuple[str, ...]]] = {
    "sft": SFT_KINDS,
    "classification": ("classification",),
    "dpo": ("preference",),
    "orpo": ("preference",),
    # KTO learns from completions marked desirable or not; a chosen/rejected pair gives one of each.
    "kto": ("unpaired_preference", "preference"),
}


def tasks_for_kind(kind: str) -> list[str]:
    """The tasks that train on rows of `kind`, in a fixed order."""
    return [task for task, kinds in KINDS_FOR_TASK.items() if kind in kinds]


def kind_issue(kind: str, task: str, *, file: str | None = None) -> Issue | None:
    """None when rows of `kind` can train `task`; else the Issue that says which tasks they do train."""
    expected = KINDS_FOR_TASK.get(task, ())
    if kind in expected:
        return None
    fitting = tasks_for_kind(kind)
    hint = f"; rows of kind {kind} train task {' or '.join(fitting)}" if fitting else ""
    return Issue(
        f"rows of kind {kind} cannot train task {task}{hint}",
        file=file,
        field="task",
        expected=" | ".join(expected),
        found=kind,
    )
