"""Pinning an adapter to the exact base model it was trained on, and refusing any other base.

A LoRA adapter only means something on top of the weights it was trained against: the
same hub commit, or a local folder with the same content fingerprint, read by the same
tokenizer. Every adapter tunedeck writes (training's `final/`, every export) carries:

- `tunedeck_pin.json`: base model id, source, resolved commit hash (hub) or sha256
  fingerprint (local folder), and the tokenizer fingerprint;
- peft's own `adapter_config.json` fields set to match: `base_model_name_or_path` (the hub
  id for hub bases, so plain `AutoPeftModel...from_pretrained` fetches the right base) and
  `revision` (the commit). No extra keys go into `adapter_config.json`: peft warns about
  keys it does not know and tells the user to upgrade, which would be wrong advice.

`load_adapter_onto` checks the pin before loading and names both models when they differ;
`allow_mismatch=True` (`--allow-base-mismatch`) loads anyway, with a warning.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tunedeck.core.errors import ModelLoadError
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.engine.models.model_source import (
    HubResolver,
    ModelRef,
    ResolvedModel,
    fingerprint_model_dir,
    resolve_model,
)

PIN_FILE = "tunedeck_pin.json"
PIN_FORMAT = "tunedeck.pin/1"
ADAPTER_CONFIG_FILE = "adapter_config.json"
RUN_CONFIG_FILE = CHECKPOINT_CONFIG


class BaseModelMismatchError(ModelLoadError):
    """An adapter was asked to load onto a base model other than the one it is pinned to."""


@dataclass(frozen=True)
class BasePin:
    """The exact base model an adapter (or fine-tuned model) was trained from."""

    model_id: str
    source: str  # "local" or "hub"
    revision: str | None  # the resolved commit hash, for hub models
    fingerprint: str | None  # sha256 over weights, config and tokenizer files, for local folders
    tokenizer_sha256: str | None
    # "base_model": the pinned model is a base model; "parent_weights": an adapter trained on top of
    # another job's full weights, which are then the only right base (named `job <id> <checkpoint> weights`).
    base_kind: str = "base_model"
    # For a model started from another job's (`init_from_job`): the pin chain, oldest first — the base
    # model, each ancestor job, then this model's own job. None for a model trained from its base alone.
    chain: tuple[dict[str, Any], ...] | None = None

    @property
    def identity(self) -> str:
        """What must match: `hub@<commit>` or `sha256:<fingerprint>`."""
        if self.source == "hub" and self.revision:
            return f"hub@{self.revision}"
        return f"sha256:{self.fingerprint}"

    def describe(self) -> str:
        """One human-readable line naming the model and its exact version."""
        if self.base_kind == "parent_weights":
            return f"{self.model_id} (sha256 {self.fingerprint}), the full weights of the model it started from"
        if self.source == "hub":
            return f"hub model {self.model_id} at commit {self.revision}"
        return f"local folder {self.model_id} (sha256 {self.fingerprint})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form of `tunedeck_pin.json` (the chain keys only for a model started from another job's)."""
        data = {"format": PIN_FORMAT, **asdict(self)}
        if self.chain is None and self.base_kind == "base_model":
            del data["chain"], data["base_kind"]  # a model trained from its base alone: the pin as it always was
        elif self.chain is not None:
            data["chain"] = [dict(entry) for entry in self.chain]
        return data

    def describe_chain(self) -> str | None:
        """The chain as one line, `base@revision → job A (final, adapter) → job B`; None without one."""
        if not self.chain:
            return None
        return " → ".join(_describe_link(entry) for entry in self.chain)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = PIN_FILE) -> BasePin:
        """Parse a pin document; ModelLoadError when it is not one."""
        if data.get("format") != PIN_FORMAT or not data.get("model_id"):
            raise ModelLoadError(f"{source}: not a tunedeck pin (expected format {PIN_FORMAT})")
        return cls(
            model_id=str(data["model_id"]),
            source=str(data.get("source") or "local"),
            revision=data.get("revision"),
            fingerprint=data.get("fingerprint"),
            tokenizer_sha256=data.get("tokenizer_sha256"),
            base_kind=str(data.get("base_kind") or "base_model"),
            chain=tuple(dict(entry) for entry in data["chain"]) if isinstance(data.get("chain"), list) else None,
        )


def _describe_link(entry: dict[str, Any]) -> str:
    if "job_id" not in entry:  # the base model
        name = entry.get("name") or entry.get("model_id")
        exact = entry.get("revision") or (
            f"sha256:{str(entry['fingerprint'])[:12]}" if entry.get("fingerprint") else ""
        )
        return f"{name}@{exact}" if exact else str(name)
    parts = [str(part) for part in (entry.get("checkpoint"), entry.get("model_form")) if part is not None]
    return f"job {entry['job_id']}" + (f" ({', '.join(parts)})" if parts else "")


def pin_of(resolved: ResolvedModel, tokenizer_sha256: str | None) -> BasePin:
    """The pin of a resolved base model."""
    model_id = str(resolved.path) if resolved.source == "local" else resolved.name
    return BasePin(model_id, resolved.source, resolved.revision, resolved.fingerprint, tokenizer_sha256)


def tokenizer_sha256(folder: Path, *, trust_remote_code: bool = False) -> str:
    """Fingerprint of the tokenizer in `folder`, loaded as training loads it (pad = end-of-sequence if none).

    The same rule at pin time (the tokenizer saved beside the weights) and at check time
    (the candidate base's tokenizer) gives equal hashes for the same tokenizer.
    """
    from transformers import AutoTokenizer

    from tunedeck.data.tokenizer_fingerprint import tokenizer_fingerprint

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except Exception as error:  # tokenizer loading raises OSError, ValueError, KeyError...
        raise ModelLoadError(f"{folder}: cannot load the tokenizer: {error}") from error
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer_fingerprint(tokenizer)


def read_pin(folder: Path) -> BasePin | None:
    """The pin of a model folder: `tunedeck_pin.json`, else derived from the run config saved beside it.

    Training checkpoints hold the run config (`tunedeck_config.json`, whose `model` section
    is the resolved base) but no pin file; the tokenizer hash then comes from the tokenizer
    saved in the checkpoint. None when the folder says nothing about its base.
    """
    folder = Path(folder)
    path = folder / PIN_FILE
    if path.is_file():
        return BasePin.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    run_config = _read_json(folder / RUN_CONFIG_FILE)
    model = run_config.get("model") if run_config else None
    if not isinstance(model, dict) or not model.get("name"):
        return None
    trust = bool((run_config or {}).get("config", {}).get("trust_remote_code", False))
    source = str(model.get("source") or "local")
    pin = BasePin(
        # A local base is named by its absolute path: the name the user typed may be relative.
        model_id=str(model.get("path") or model["name"]) if source == "local" else str(model["name"]),
        source=source,
        revision=model.get("revision"),
        fingerprint=model.get("fingerprint"),
        tokenizer_sha256=tokenizer_sha256(folder, trust_remote_code=trust),
    )
    return _chained(pin, folder, run_config or {})


def _chained(pin: BasePin, folder: Path, run_config: dict[str, Any]) -> BasePin:
    """`pin` with the chain, for a model whose run started from another job's (config.json's `lineage`).

    A continued or merged adapter, or full weights, keep the base model as their base; an
    adapter trained on top of a parent job's full weights is pinned to those weights instead.
    """
    lineage = run_config.get("lineage")
    start = run_config.get("init_from") or {}
    chained = isinstance(lineage, list) and len(lineage) >= 2
    if not chained and not start:
        return pin
    is_adapter = (folder / ADAPTER_CONFIG_FILE).is_file()
    this_job = {"job_id": run_config.get("job_id"), "model_form": "adapter" if is_adapter else "merged"}
    # A run started from a model folder by hand (`tunedeck train --init-from`) has no recorded chain.
    chain = (*(dict(entry) for entry in lineage), this_job) if chained and isinstance(lineage, list) else None
    if is_adapter and start.get("how") == "weights":
        fingerprint = start.get("parent_weights_fingerprint")
        parent = lineage[-1] if chained and isinstance(lineage, list) else {}
        named = f"job {parent['job_id']} {parent.get('checkpoint')}" if parent.get("job_id") else "the starting"
        return BasePin(
            model_id=f"{named} weights",
            source="local",
            revision=None,
            fingerprint=fingerprint,
            tokenizer_sha256=pin.tokenizer_sha256,
            base_kind="parent_weights",
            chain=chain,
        )
    return replace(pin, chain=chain)


def write_pin(folder: Path, pin: BasePin) -> None:
    """Write `tunedeck_pin.json` into `folder` and align peft's base fields in its adapter config, if any."""
    folder = Path(folder)
    (folder / PIN_FILE).write_text(json.dumps(pin.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    adapter_config = folder / ADAPTER_CONFIG_FILE
    if not adapter_config.is_file():
        return  # a full fine-tune: the pin file alone records what it was trained from
    data = json.loads(adapter_config.read_text(encoding="utf-8"))
    if pin.source == "hub":
        # The hub id and commit let plain peft fetch exactly this base; the snapshot path would not travel.
        data["base_model_name_or_path"] = pin.model_id
        data["revision"] = pin.revision
    adapter_config.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def pin_model_folder(folder: Path) -> BasePin | None:
    """Pin a saved model folder from the run config beside it (training's `final/`); the pin, or None."""
    pin = read_pin(folder)
    if pin is not None:
        write_pin(folder, pin)
    return pin


def check_base(
    pin: BasePin | None,
    base: ResolvedModel,
    *,
    what: str,
    allow_mismatch: bool = False,
    trust_remote_code: bool = False,
) -> list[str]:
    """Refuse `base` unless it is the pinned model; with `allow_mismatch`, return the warnings instead."""
    problems = base_mismatches(pin, base, what=what, trust_remote_code=trust_remote_code)
    if problems and not allow_mismatch:
        raise BaseModelMismatchError(
            "; ".join(problems) + ". Load the exact base it was trained on, or pass allow_mismatch=True "
            "(--allow-base-mismatch) to load it anyway at your own risk."
        )
    for problem in problems:
        warnings.warn(f"loading despite a base model mismatch: {problem}", stacklevel=2)
    return problems


def base_mismatches(
    pin: BasePin | None, base: ResolvedModel, *, what: str, trust_remote_code: bool = False
) -> list[str]:
    """Why `base` is not the model `pin` names (empty when it is)."""
    if pin is None:
        return [f"{what} records no base model, so {_describe(base)} cannot be checked against it"]
    problems = []
    if not _same_weights(pin, base):
        problems.append(f"{what} was trained on {pin.describe()}, but the base given is {_describe(base)}")
    if pin.tokenizer_sha256 is not None:
        found = tokenizer_sha256(base.path, trust_remote_code=trust_remote_code)
        if found != pin.tokenizer_sha256:
            problems.append(
                f"{what} was trained with tokenizer {pin.tokenizer_sha256[:16]}…, "
                f"but the base {base.name} has tokenizer {found[:16]}…"
            )
    return problems


def _same_weights(pin: BasePin, base: ResolvedModel) -> bool:
    if pin.source == "hub" and base.source == "hub":
        return pin.revision is not None and pin.revision == base.revision
    if pin.fingerprint is None:
        return False  # pinned to a hub commit: a local folder cannot be proven to hold that commit
    return (base.fingerprint or fingerprint_model_dir(base.path)) == pin.fingerprint


def _describe(base: ResolvedModel) -> str:
    if base.source == "hub":
        return f"hub model {base.name} at commit {base.revision}"
    return f"local folder {base.name} (sha256 {base.fingerprint})"


def resolve_base(base: ModelRef | ResolvedModel | str | Path, hub: HubResolver | None = None) -> ResolvedModel:
    """A resolved base model from whatever names one: a folder, a hub id, a `ModelRef` or a resolved model."""
    if isinstance(base, ResolvedModel):
        return base
    if isinstance(base, ModelRef):
        return resolve_model(base, hub)
    return resolve_model(ModelRef(str(base)), hub)


def default_base_ref(folder: Path) -> ModelRef | None:
    """The base a model folder's pin names, as a reference to resolve (None when it names none)."""
    pin = read_pin(folder)
    if pin is None:
        return None
    return ModelRef(pin.model_id, pin.revision if pin.source == "hub" else None)


def load_adapter_onto(
    base: ModelRef | ResolvedModel | str | Path,
    adapter_dir: Path,
    *,
    allow_mismatch: bool = False,
    trust_remote_code: bool = False,
    hub: HubResolver | None = None,
) -> Any:
    """Load the adapter in `adapter_dir` onto `base` after checking its pin; a `TrainedModel` in eval mode.

    Raises BaseModelMismatchError naming both models when `base` is not the pinned one,
    unless `allow_mismatch` (then it warns and loads).
    """
    from tunedeck.eval.trained_model import load_trained_model

    adapter_dir = Path(adapter_dir)
    if not (adapter_dir / ADAPTER_CONFIG_FILE).is_file():
        raise ModelLoadError(f"{adapter_dir}: not an adapter folder (no {ADAPTER_CONFIG_FILE})")
    resolved = resolve_base(base, hub)
    check_base(
        read_pin(adapter_dir),
        resolved,
        what=f"the adapter in {adapter_dir}",
        allow_mismatch=allow_mismatch,
        trust_remote_code=trust_remote_code,
    )
    return load_trained_model(adapter_dir, base_model_dir=resolved.path, trust_remote_code=trust_remote_code)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None
