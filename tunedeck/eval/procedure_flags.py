"""Where a variant was not trained and measured like the reference: the "same procedure" half of the experiment method.

A metric delta means something only when both runs were measured on the same
evaluation rows, with the same evaluation procedure, chat template and decoding
settings, and trained from the same seed for the same budget on the same data.
`procedure_flags` names each of these a variant does not share with the variant it
is compared to; facts a run did not record are not guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunedeck.eval.experiment_report import VariantRun

BUDGET_KEYS = ("epochs", "total_steps")


@dataclass(frozen=True)
class ProcedureFlag:
    """One way a variant differs from the variant it is compared to, with both values."""

    check: str  # evaluation_rows, procedure, chat_template, decoding, seed, budget, training_data
    reference: Any
    variant: Any
    message: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"check": self.check, "reference": self.reference, "variant": self.variant, "message": self.message}


def _evaluation(variant: VariantRun) -> Mapping[str, Any]:
    return variant.final or variant.baseline or {}


def _procedure(variant: VariantRun) -> Mapping[str, Any]:
    procedure = _evaluation(variant).get("procedure")
    return procedure if isinstance(procedure, Mapping) else {}


def _manifest(variant: VariantRun, role: str) -> Mapping[str, Any] | None:
    return next((m for m in variant.data if m.get("role") == role), None)


def evaluation_rows(variant: VariantRun) -> dict[str, Any] | None:
    """The evaluation rows a variant was measured on: dataset version, content hash and row count."""
    procedure = _procedure(variant)
    manifest = _manifest(variant, "validation") or {}
    version, sha = manifest.get("version_id"), procedure.get("data_sha256") or manifest.get("sha256")
    rows = procedure.get("num_examples", manifest.get("rows"))
    if version is None and sha is None and rows is None:
        return None
    return {"version_id": version, "sha256": sha, "rows": rows}


def decoding(variant: VariantRun) -> Any:
    """The decoding settings of the evaluation (from its procedure, else the config's answer cap)."""
    procedure = _procedure(variant)
    if "generation" in procedure:
        return procedure["generation"]
    cap = variant.config.get("eval_max_new_tokens")
    return None if cap is None else {"max_new_tokens": cap}


def chat_template(variant: VariantRun) -> str | None:
    """The sha256 of the chat template the run rendered its rows with, when the run recorded it."""
    value = (variant.model or {}).get("chat_template_sha256")
    return value if isinstance(value, str) else None


def _rows_text(rows: Mapping[str, Any] | None) -> str:
    if rows is None:
        return "unknown rows"
    name = rows.get("version_id") or str(rows.get("sha256") or "")[:12] or "unknown data"
    return f"{name} ({rows.get('rows')} rows)"


def procedure_flags(anchor: VariantRun, variant: VariantRun) -> list[ProcedureFlag]:
    """Each way `variant` was trained or measured differently from `anchor` (module docstring)."""
    flags: list[ProcedureFlag] = []
    other = anchor.name
    mine_rows, their_rows = evaluation_rows(variant), evaluation_rows(anchor)
    if mine_rows and their_rows and _known_differ(mine_rows, their_rows):
        flags.append(
            ProcedureFlag(
                "evaluation_rows",
                their_rows,
                mine_rows,
                f"evaluated on {_rows_text(mine_rows)}, {other} on {_rows_text(their_rows)}; "
                "its metrics are not comparable",
            )
        )
    mine, theirs = _evaluation(variant).get("procedure_sha256"), _evaluation(anchor).get("procedure_sha256")
    if mine and theirs and mine != theirs:
        flags.append(
            ProcedureFlag(
                "procedure",
                theirs,
                mine,
                f"evaluated with a different procedure than {other}; its metrics are not comparable",
            )
        )
    mine, theirs = chat_template(variant), chat_template(anchor)
    if mine and theirs and mine != theirs:
        flags.append(ProcedureFlag("chat_template", theirs, mine, f"rendered with another chat template than {other}"))
    mine, theirs = decoding(variant), decoding(anchor)
    if mine is not None and theirs is not None and mine != theirs:
        flags.append(
            ProcedureFlag(
                "decoding", theirs, mine, f"decoding settings {_compact(mine)} differ from {other}'s {_compact(theirs)}"
            )
        )
    if variant.seed != anchor.seed:
        flags.append(
            ProcedureFlag(
                "seed", anchor.seed, variant.seed, f"seed {variant.seed} differs from {other}'s {anchor.seed}"
            )
        )
    for key in BUDGET_KEYS:
        mine, theirs = variant.budget.get(key), anchor.budget.get(key)
        if mine is not None and theirs is not None and mine != theirs:
            flags.append(
                ProcedureFlag(f"budget.{key}", theirs, mine, f"budget {key} {mine} differs from {other}'s {theirs}")
            )
    mine, theirs = _data_signature(variant), _data_signature(anchor)
    if mine and theirs and mine != theirs:
        flags.append(
            ProcedureFlag(
                "training_data",
                [list(pair) for pair in theirs],
                [list(pair) for pair in mine],
                f"trained on other data than {other}",
            )
        )
    return flags


def _known_differ(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    """Whether two row descriptions differ in a value both know; equal content under two version ids is the same."""
    identity = "sha256" if first.get("sha256") and second.get("sha256") else "version_id"
    return any(
        first.get(key) is not None and second.get(key) is not None and first.get(key) != second.get(key)
        for key in (identity, "rows")
    )


def _compact(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key} {item}" for key, item in value.items())
    return str(value)


def _data_signature(variant: VariantRun) -> tuple[tuple[str, str], ...]:
    """The training data's content hashes (evaluation rows are compared by their own check)."""
    return tuple(
        sorted((str(m.get("role")), str(m.get("sha256", ""))) for m in variant.data if m.get("role") == "train")
    )
