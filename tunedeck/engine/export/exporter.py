"""`export_model`: one export (adapter, merged, bundle or mlx) of a final model or checkpoint, all or nothing.

The export is assembled in a hidden sibling of `out` and renamed into place only once
complete and scanned, so `out` never holds half an export. `export.json` beside the files
says what it is: format, source, contents (`adapter`, `merged_model`, `full_model` or,
for an MLX export of the base with its adapter, `base_and_adapter`), the MLX options,
the base pin, the base model's licence, the training datasets' recorded licences and any warnings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.core.errors import ConfigError, Issue, ModelLoadError
from tunedeck.core.mlx_export import MlxExportOptions
from tunedeck.core.model_licence import ModelLicence, read_model_licence
from tunedeck.engine.export.bundle import MODEL_FOLDER, pack, write_bundle_contents
from tunedeck.engine.export.card import build_model_card
from tunedeck.engine.export.consolidation import readable
from tunedeck.engine.export.merge import write_merged
from tunedeck.engine.export.mlx_convert import write_mlx
from tunedeck.engine.export.mlx_target import MlxTargetReport, check_model_folder
from tunedeck.engine.export.model_files import copy_adapter, copy_full_model
from tunedeck.engine.export.secrets_check import json_documents, read_texts, recorded_hashes, refuse_secrets
from tunedeck.engine.export.source import ModelFolder, RunDocuments, read_run_documents
from tunedeck.engine.models.model_source import HubResolver, ModelRef, ResolvedModel
from tunedeck.engine.models.pinning import (
    BasePin,
    default_base_ref,
    pin_of,
    read_pin,
    resolve_base,
    tokenizer_sha256,
    write_pin,
)

FORMATS = ("adapter", "merged", "bundle", "mlx")
EXPORT_RECORD = "export.json"
EXPORT_FORMAT = "tunedeck.export/1"
DEFAULT_MAX_SHARD_SIZE = "5GB"
FULL_MODEL_NOTE = (
    "this run fine-tuned every weight (no adapter): the adapter and merged exports both hold the full model"
)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
# Tokenizer vocabularies are long runs of high-entropy text by nature: not scanned, never user-written.
_UNSCANNED = frozenset({"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json"})

BaseSpec = ModelRef | ResolvedModel | str | Path


@dataclass
class ExportResult:
    """What an export wrote and what the reader should know about it."""

    format: str
    source: str
    out: Path
    contents: str
    files: list[str]
    pin: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    # The base model's licence as read from its files (`ModelLicence.to_dict`); None when they were not at hand.
    base_licence: dict[str, Any] | None = None
    # Each training dataset's recorded licence: role, name, version, sha256, licence (None: not recorded).
    dataset_licences: list[dict[str, Any]] = field(default_factory=list)
    # An MLX export's options (`MlxExportOptions.to_dict`); None for the other formats.
    mlx: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (`export.json`, and what `python -m tunedeck.engine.export` prints)."""
        return {
            "format": EXPORT_FORMAT,
            "export_format": self.format,
            "source": self.source,
            "out": str(self.out),
            "contents": self.contents,
            "files": self.files,
            "pin": self.pin,
            "base_licence": self.base_licence,
            "dataset_licences": self.dataset_licences,
            "warnings": self.warnings,
            "mlx": self.mlx,
        }


def export_model(
    folder: ModelFolder,
    export_format: str,
    out: Path,
    *,
    base: BaseSpec | None = None,
    allow_base_mismatch: bool = False,
    max_shard_size: str = DEFAULT_MAX_SHARD_SIZE,
    title: str | None = None,
    hub: HubResolver | None = None,
    datasets: Sequence[Mapping[str, Any]] = (),
    mlx: MlxExportOptions | None = None,
    unified_memory_gb: float | None = None,
) -> ExportResult:
    """Export `folder` as `export_format` into the new folder `out`.

    `base` names the base model to merge onto (default: the one the folder is pinned to);
    an adapter export never loads it. A base other than the pinned one is refused unless
    `allow_base_mismatch`. Text files are scanned: a secret refuses the whole export.
    `datasets` are the training datasets' recorded rights (role, name, version, sha256,
    licence, rights_note), which the model card lists. `mlx` chooses an MLX export's layout,
    dtype and quantisation; it is checked first (`mlx_target`), and against `unified_memory_gb`
    when given: a model mlx-lm cannot open is refused before anything is merged or converted.
    """
    if export_format not in FORMATS:
        raise ConfigError(
            [Issue("unknown export format", field="--format", expected=" | ".join(FORMATS), found=export_format)],
            title="cannot export",
        )
    mlx = (mlx or MlxExportOptions()) if export_format == "mlx" else None
    if mlx is not None:
        _check_mlx_options(mlx)
    out = Path(out)
    _check_out(out)
    documents = read_run_documents(folder)
    title = title or (folder.run_root or folder.path).name
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        with readable(folder) as plain:  # FSDP shards are gathered into safetensors first
            pin = _pin(plain, base, hub)
            target = _MlxTarget(mlx, unified_memory_gb) if mlx is not None else None
            result = _build(plain, documents, pin, export_format, staging, base, allow_base_mismatch,
                            max_shard_size, title, hub, datasets, target)
        result.out = out
        record = {key: value for key, value in result.to_dict().items() if key != "out"}  # no machine paths
        (staging / EXPORT_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above); rename cannot replace a folder otherwise
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


def _build(
    folder: ModelFolder,
    documents: RunDocuments,
    pin: BasePin | None,
    export_format: str,
    staging: Path,
    base: BaseSpec | None,
    allow_base_mismatch: bool,
    max_shard_size: str,
    title: str,
    hub: HubResolver | None,
    datasets: Sequence[Mapping[str, Any]],
    mlx_target: _MlxTarget | None = None,
) -> ExportResult:
    full_model = not folder.is_adapter
    warnings: list[str] = [FULL_MODEL_NOTE] if full_model and export_format in ("adapter", "merged") else []
    contents, resolved = _write_model(
        folder, documents, export_format, staging, base, allow_base_mismatch, max_shard_size, hub, mlx_target,
        warnings,
    )
    model_dir = staging / MODEL_FOLDER if export_format == "bundle" else staging
    if pin is not None:
        write_pin(model_dir, pin)
    base_licence = _base_licence(documents, pin, resolved)
    texts = _write_card(
        staging, model_dir, documents, pin, export_format, folder, full_model, warnings, base_licence, title,
        datasets, mlx_target,
    )
    recorded = [documents.config, documents.env, documents.data_manifest, documents.results,
                documents.baseline_eval, documents.final_eval, pin.to_dict() if pin else None,
                resolved.to_dict() if resolved else None]  # a mismatch warning names the base used
    allowed = recorded_hashes([*json_documents(texts), *recorded])
    refuse_secrets(texts, allowed)
    if export_format == "bundle":
        _pack_bundle(staging, title, folder.label)
    return ExportResult(
        format=export_format,
        source=folder.label,
        out=staging,
        contents=contents,
        files=sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file()),
        pin=pin.to_dict() if pin else None,
        warnings=warnings,
        base_licence=base_licence.to_dict() if base_licence is not None else None,
        dataset_licences=[
            {key: dataset.get(key) for key in ("role", "name", "version", "sha256", "licence")} for dataset in datasets
        ],
        mlx=mlx_target.options.to_dict() if mlx_target is not None else None,
    )


def _write_model(
    folder: ModelFolder,
    documents: RunDocuments,
    export_format: str,
    staging: Path,
    base: BaseSpec | None,
    allow_base_mismatch: bool,
    max_shard_size: str,
    hub: HubResolver | None,
    mlx_target: _MlxTarget | None,
    warnings: list[str],
) -> tuple[str, ResolvedModel | None]:
    """Write the model into `staging` (MLX, merged, or copied as it is), adding to `warnings`; returns what
    the export contains and the base model resolved for it (None when none was needed)."""
    full_model = not folder.is_adapter
    resolved = None
    if mlx_target is not None:
        if not full_model:
            resolved = resolve_base(base or _pinned_base(folder), hub)
        report = mlx_target.check(folder, resolved)
        warnings += write_mlx(
            folder, documents, resolved, staging, mlx_target.options, layout=report.adapter_layout,
            max_shard_size=max_shard_size, allow_base_mismatch=allow_base_mismatch,
        )
        contents = "base_and_adapter" if mlx_target.options.contents == "adapter" else (
            "full_model" if full_model else "merged_model")
    elif export_format == "merged":
        if not full_model:
            resolved = resolve_base(base or _pinned_base(folder), hub)
        _, found = write_merged(
            folder, documents, resolved, staging, max_shard_size=max_shard_size,
            allow_base_mismatch=allow_base_mismatch,
        )
        warnings += found
        contents = "full_model" if full_model else "merged_model"
    else:
        target = staging / MODEL_FOLDER if export_format == "bundle" else staging
        (copy_full_model if full_model else copy_adapter)(folder.path, target)
        contents = "full_model" if full_model else "adapter"
    return contents, resolved


def _write_card(
    staging: Path,
    model_dir: Path,
    documents: RunDocuments,
    pin: BasePin | None,
    export_format: str,
    folder: ModelFolder,
    full_model: bool,
    warnings: list[str],
    base_licence: ModelLicence | None,
    title: str,
    datasets: Sequence[Mapping[str, Any]],
    mlx_target: _MlxTarget | None,
) -> dict[str, str]:
    """Write the model card (README.md, with the run's documents in a bundle); returns the text files
    written, by path, for the secrets check."""
    card = build_model_card(
        title=title,
        documents=documents,
        pin=pin,
        export_format=export_format,
        source_label=folder.label,
        full_model=full_model,
        warnings=warnings,
        adapter_config=saved_adapter_config(folder.path),
        base_licence=base_licence,
        datasets=datasets,
        mlx=mlx_target.options if mlx_target is not None else None,
    )
    if export_format == "bundle":
        names = write_bundle_contents(staging, documents, card)
        texts = read_texts(staging, names)
        texts.update({f"{MODEL_FOLDER}/{k}": v for k, v in read_texts(model_dir, _scanned(model_dir)).items()})
    else:
        (staging / "README.md").write_text(card, encoding="utf-8")
        texts = read_texts(staging, _scanned(staging))
    return texts


def _pack_bundle(staging: Path, title: str, label: str) -> None:
    """Replace the bundle's files in `staging` with one archive of them, named after the title and source."""
    top = f"{_SAFE_NAME.sub('-', title).strip('-') or 'model'}-{label}"
    packed = Path(tempfile.mkdtemp(prefix=".pack-", dir=staging.parent))
    try:
        pack(staging, packed / f"{top}.tar.gz", top)
        for child in staging.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        os.replace(packed / f"{top}.tar.gz", staging / f"{top}.tar.gz")
    finally:
        shutil.rmtree(packed, ignore_errors=True)


@dataclass(frozen=True)
class _MlxTarget:
    """An MLX export's options and the Mac memory to check it against."""

    options: MlxExportOptions
    unified_memory_gb: float | None

    def check(self, folder: ModelFolder, base: ResolvedModel | None) -> MlxTargetReport:
        """The checks before an MLX export (`mlx_target`); ConfigError naming each failure and what to do."""
        report, _ = check_model_folder(folder, self.options, base=base, unified_memory_gb=self.unified_memory_gb)
        if not report.ok:
            raise ConfigError(
                [Issue(f"{check.message}; " + "; ".join(check.advice) if check.advice else check.message,
                       field=check.name) for check in report.failures()],
                title="cannot export for MLX",
            )
        return report


def _check_mlx_options(options: MlxExportOptions) -> None:
    problems = options.problems()
    if problems:
        raise ConfigError(
            [Issue("invalid MLX export option", field=name, expected=expected, found=found)
             for name, expected, found in problems],
            title="cannot export",
        )


def _pin(folder: ModelFolder, base: BaseSpec | None, hub: HubResolver | None) -> BasePin | None:
    """The folder's own pin; for an unpinned folder, the pin of the base the caller names."""
    pin = read_pin(folder.path)
    if pin is not None:
        return pin
    if base is None:
        if folder.is_adapter:
            raise ModelLoadError(
                f"{folder.path}: the adapter records no base model (no tunedeck_pin.json or run config): "
                "name its base to pin it to"
            )
        return None
    return pin_of(resolve_base(base, hub), tokenizer_sha256(folder.path))


def _base_licence(documents: RunDocuments, pin: BasePin | None, resolved: ResolvedModel | None) -> ModelLicence | None:
    """The base model's licence: as recorded when the run started, else read from the base's files when at hand.

    At hand: the base a merge loaded, or a local base folder that still exists. None otherwise
    (a hub base is not fetched only to read its licence).
    """
    recorded = (documents.config.get("model") or {}).get("licence")
    if isinstance(recorded, Mapping):
        return ModelLicence.from_dict(recorded)
    if resolved is not None:
        return read_model_licence(resolved.path)
    if pin is not None and pin.source == "local" and pin.base_kind == "base_model" and Path(pin.model_id).is_dir():
        return read_model_licence(Path(pin.model_id))
    return None


def saved_adapter_config(folder: Path) -> dict[str, Any] | None:
    """The adapter_config.json saved in a model folder (None for full weights or an unreadable file)."""
    try:
        document = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _pinned_base(folder: ModelFolder) -> ModelRef:
    ref = default_base_ref(folder.path)
    if ref is None:
        raise ModelLoadError(f"{folder.path}: the adapter records no base model; name the base to merge onto")
    return ref


def _scanned(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and p.suffix in (".json", ".md", ".jinja") and p.name not in _UNSCANNED
        and p.name != "model.safetensors.index.json"
    )


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            [Issue("already exists and is not an empty folder; choose a new folder", field="--out", file=str(out))],
            title="cannot export",
        )
