"""What a worker does for each kind of work item: fetch the inputs from storage, run the engine, keep the output.

Each handler takes the claimed item and a private scratch folder and returns the
item's result (JSON). The engine runs as a process (`engine_process`; for generation,
the worker's long-lived `generation_process`), never in the worker. Everything is
read as the item's owner, so a request can reach only what its owner could when it
was queued.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.core.errors import NotFoundError, StorageError
from tunedeck.core.failpoints import failpoint
from tunedeck.core.mlx_export import MlxExportOptions
from tunedeck.data.cache_entries import entries_built_from
from tunedeck.service.datasets.dataset_versions import PREVIEW_ROWS, commit_version_files
from tunedeck.service.jobs.job_models import (
    base_model_reference,
    export_name_for,
    export_prefix,
    fetch_job_model,
    locate_job_model,
    stored_model_identity,
)
from tunedeck.service.users.storage_use import stored_bytes_if_limited
from tunedeck.storage.base import TransferProgress, dataset_prefix, upload_prefix
from tunedeck.store.deletions import FAILED, removal
from tunedeck.store.models import User
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.engine_process import EngineStoppedError, run_engine_module
from tunedeck.worker.generation_process import GenerationLaunch
from tunedeck.worker.local_removal import remove_folder

GENERATE_TIMEOUT_S = 600.0
PARTIAL_REPORT_INTERVAL_S = 0.2
EXPORT_TIMEOUT_S = 3600.0
PREFLIGHT_TIMEOUT_S = 1800.0
INSPECTION_TIMEOUT_S = 600.0
INGEST_TIMEOUT_S = 6 * 3600.0
INSPECTION_REPORT_KEY = "inspection"
SCRUBBED = "database files"


class LostHoldError(StorageError):
    """The worker's claim on the item lapsed before it could keep the output: another worker may be on it."""


@dataclass(frozen=True)
class WorkCall:
    """One handler call: the worker's context, the item's owner, inputs and scratch folder, and its checks."""

    ctx: WorkerContext
    owner: User
    inputs: dict[str, Any]
    folder: Path
    still_held: Callable[[], bool]
    progress: Callable[..., None]  # (phase, **detail): what the item is doing, for its progress bar


def run_export(call: WorkCall) -> dict[str, Any]:
    """Build an export of a job's final model or checkpoint and commit it (reused when already committed)."""
    store, artifacts, inputs = call.ctx.store, call.ctx.artifacts, call.inputs
    located = locate_job_model(store, artifacts, call.owner, str(inputs["job_id"]), inputs.get("step"))
    mlx = MlxExportOptions.from_dict(inputs["mlx"]) if isinstance(inputs.get("mlx"), dict) else None
    name = export_name_for(str(inputs["format"]), located.label, mlx)
    prefix = export_prefix(located.owner_id, located.job_id, name)
    if artifacts.read_manifest(prefix) is None:
        spec = fetch_job_model(artifacts, located, call.folder, on_progress=bytes_progress(call, "fetching the model"))
        spec.update(
            format=inputs["format"],
            out=str(call.folder / "out"),
            allow_base_mismatch=bool(inputs.get("allow_base_mismatch")),
            max_shard_size=inputs.get("max_shard_size"),
        )
        if mlx is not None:  # converted by the engine with mlx-lm (the worker never imports it)
            spec.update(mlx=mlx.to_dict(), unified_memory_gb=inputs.get("unified_memory_gb"))
        call.progress("exporting")
        try:
            run_engine_module(
                "export", spec, call.folder, timeout_s=EXPORT_TIMEOUT_S, should_stop=lambda: not call.still_held()
            )
        except EngineStoppedError:
            raise LostHoldError(f"export {name!r}: stopped, cancelled or this worker's claim lapsed") from None
        if not call.still_held():
            # Another worker took the item over (this one was cut off past its lease): committing could mix files.
            raise LostHoldError(f"export {name!r}: this worker's claim lapsed before it could commit")
        # Said before the files are hashed (a long while for a large merged model), counted once they upload.
        call.progress("committing")
        artifacts.commit_directory(call.folder / "out", prefix, on_progress=bytes_progress(call, "committing"))
    return {"job_id": located.job_id, "name": name, "storage_prefix": prefix}


def bytes_progress(call: WorkCall, phase: str) -> TransferProgress:
    """A storage transfer's progress reported as the item's `phase`, counted in bytes (`done`, `total`).

    Storage calls it before the first file and after each one, so the item's progress
    is written once per file, not once per chunk.
    """
    return lambda done, total: call.progress(phase, done=done, total=total, unit="bytes")


def run_generation(call: WorkCall) -> dict[str, Any]:
    """Answer a prompt or a conversation with a job's model (and the base model beside it when asked),
    or with a base model alone (`base_model_id`, no adapter).

    The worker's generation process keeps recently used models loaded: the model is
    fetched from storage only when that process does not hold it already. A request that
    asks to `stream` has its answer-so-far reported as the item's progress (`text`) while it
    is generated, at most every PARTIAL_REPORT_INTERVAL_S; the result holds the whole answer.
    """
    store, artifacts, inputs = call.ctx.store, call.ctx.artifacts, call.inputs
    request = {key: value for key, value in inputs.items() if key not in ("job_id", "step", "base_model_id")}
    fetch: Callable[[], dict[str, Any]]
    if inputs.get("base_model_id"):
        base = store.base_models.get(call.owner, str(inputs["base_model_id"]))
        reference = base_model_reference(base)
        key = generation_model_key({"base_model": reference}, request)
        answered_by: dict[str, Any] = {"base_model_id": base.id}

        def fetch() -> dict[str, Any]:
            call.progress("loading the model")
            return {"base_model": reference}  # the engine reads a local folder, or downloads from the hub
    else:
        located = locate_job_model(store, artifacts, call.owner, str(inputs["job_id"]), inputs.get("step"))
        key = generation_model_key(stored_model_identity(artifacts, located), request)
        answered_by = {"job_id": located.job_id}

        def fetch() -> dict[str, Any]:
            call.progress("fetching the model")
            spec = fetch_job_model(
                artifacts, located, call.folder, on_progress=bytes_progress(call, "fetching the model")
            )
            call.progress("loading the model")
            return spec

    call.progress("generating")
    launch = GenerationLaunch(
        env=dict(call.ctx.child_env),
        log_path=call.ctx.runs_dir / f"generation-{call.ctx.worker_id}.log",
        cache_bytes=call.ctx.generation_cache_bytes,
    )
    on_partial = partial_text_reporter(call) if request.get("stream") else None
    result = call.ctx.generation.generate(
        key, request, fetch=fetch, launch=launch, timeout_s=GENERATE_TIMEOUT_S, on_partial=on_partial
    )
    return {**answered_by, **result}


def partial_text_reporter(call: WorkCall, interval_s: float | None = None) -> Callable[[str], None]:
    """Report an answer-so-far as the item's progress (`generating`, `text`), at most every `interval_s`.

    Readers poll the item's row: one write per interval keeps the database's load bounded
    however fast tokens come; a text skipped here is a prefix of the next one and of the result.
    """
    every = PARTIAL_REPORT_INTERVAL_S if interval_s is None else interval_s
    last = -every

    def report(text: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= every:
            last = now
            call.progress("generating", text=text)

    return report


def generation_model_key(identity: dict[str, Any], request: dict[str, Any]) -> str:
    """What a loaded model is kept under: the stored model's identity and what loading it depends on.

    Comparing with the base loads it beside a full fine-tune, and allowing a base mismatch
    loads what would otherwise be refused, so both are part of the key.
    """
    parts = {
        **identity,
        "compare_base": bool(request.get("compare_base")),
        "allow_base_mismatch": bool(request.get("allow_base_mismatch")),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def run_preflight(call: WorkCall) -> dict[str, Any]:
    """The checks before training on a base model, data and config, nothing queued."""
    store, artifacts, inputs = call.ctx.store, call.ctx.artifacts, call.inputs
    base = store.base_models.get(call.owner, str(inputs["base_model_id"]))
    call.progress("fetching the data")
    files = {
        role: artifacts.get_file(
            store.datasets.get_version(call.owner, version_id).storage_key, call.folder / f"{role}.jsonl"
        )
        for role, version_id in dict(inputs["versions"]).items()
    }
    spec: dict[str, Any] = {
        "config": inputs["config"],
        "model": {"name": base.local_path or base.hub_id, "revision": base.revision},
        "train": str(files["train"]),
        "validation": str(files["validation"]) if "validation" in files else None,
        "out": str(call.folder / "run"),
    }
    call.progress("measuring")
    report = run_engine_module(
        "preflight", spec, call.folder, timeout_s=PREFLIGHT_TIMEOUT_S,
        on_progress=lambda seen: call.progress("checking", **seen),
    )  # fmt: skip
    return {"status": str(report.get("status")), "ok": bool(report.get("ok")), "report": report}


def run_inspection(call: WorkCall) -> dict[str, Any]:
    """Tokenize a dataset version as training would for a base model; the report is kept on the version."""
    store, artifacts, inputs = call.ctx.store, call.ctx.artifacts, call.inputs
    version = store.datasets.get_version(call.owner, str(inputs["version_id"]))
    base = store.base_models.get(call.owner, str(inputs["base_model_id"]))
    call.progress("fetching the data")
    data = artifacts.get_file(version.storage_key, call.folder / "data.jsonl")
    spec: dict[str, Any] = {
        "dataset": str(data),
        "model": {"name": base.local_path or base.hub_id, "revision": base.revision},
        "max_length": inputs["max_length"],
        "examples": inputs["examples"],
        "train_on_inputs": inputs["train_on_inputs"],
        "max_prompt_length": inputs.get("max_prompt_length"),
        "truncation": inputs.get("truncation", "refuse"),
    }
    call.progress("tokenizing")
    report = run_engine_module("inspection", spec, call.folder, timeout_s=INSPECTION_TIMEOUT_S)
    if not call.still_held():
        raise LostHoldError("inspection: this worker's claim lapsed before it could keep the report")
    fresh = store.datasets.get_version(call.owner, version.id)
    stored = (fresh.reports or {}).get(INSPECTION_REPORT_KEY)
    # Older single-report entries (without a model key) are replaced by the per-model map.
    by_model = dict(stored) if isinstance(stored, dict) and "examples" not in stored else {}
    by_model[base.id] = report
    store.datasets.set_reports(call.owner, version.id, {INSPECTION_REPORT_KEY: by_model})
    return {"dataset_id": fresh.dataset_id, "version": fresh.version, "base_model_id": base.id, "report": report}


def run_ingestion(call: WorkCall) -> dict[str, Any]:
    """Validate, scan and deduplicate an upload, then record it as a new dataset or a dataset's next version.

    The canonical files are committed under a prefix named after the item, and the rows are
    written in one transaction that finds them already there on a retry: a worker that dies
    anywhere in between leaves nothing half-made, and the next attempt finishes the same version.
    The received upload is removed from storage once the ingestion ends either way. An item
    naming a `hub` dataset (id, split, subset, revision) has no upload: the engine process
    fetches that split, pinned to the commit it resolves to.
    """
    artifacts, inputs = call.ctx.artifacts, call.inputs
    lost_hold = False
    try:
        try:
            ingested = run_engine_module(
                "ingestion", _ingestion_spec(call), call.folder, timeout_s=INGEST_TIMEOUT_S,
                on_progress=lambda seen: call.progress("validating", **seen), should_stop=lambda: not call.still_held(),
            )  # fmt: skip
        except EngineStoppedError:
            lost_hold = True  # a cancel removes the upload itself; an attempt that took over still needs it
            raise LostHoldError("ingestion: stopped, the item was cancelled or this worker's claim lapsed") from None
        if not call.still_held():
            lost_hold = True  # the attempt that took over still needs the upload
            raise LostHoldError("ingestion: this worker's claim lapsed before it could keep the dataset")
        return _store_ingested(call, ingested)
    finally:
        # Accepted or refused, this item ends here (a failed item is not retried): the upload is spent.
        if not lost_hold:
            artifacts.delete_prefix(upload_prefix(call.owner.id, str(inputs["upload_id"])))


def _ingestion_spec(call: WorkCall) -> dict[str, Any]:
    """What the ingestion engine reads: the received upload (or the hub split to fetch) and the item's options."""
    inputs = call.inputs
    source: dict[str, Any]
    if inputs.get("hub") is not None:
        # A hub dataset: the engine process fetches the split itself; nothing was uploaded.
        call.progress("fetching")
        source = {"hub": dict(inputs["hub"])}
    else:
        call.progress("receiving")
        upload_key = str(inputs["upload_key"])
        raw = call.ctx.artifacts.get_file(upload_key, call.folder / upload_key.rsplit("/", 1)[-1])
        source = {"path": str(raw)}
        call.progress("validating", done=0, total=raw.stat().st_size)
    return {
        **source,
        "out": str(call.folder / "canonical.jsonl"),
        "scratch": str(call.folder / "scratch"),
        "display_name": inputs["display_name"],
        "format": inputs["format"],
        "file_type": inputs.get("file_type"),
        "label_column": inputs.get("label_column"),
        "column_map": inputs.get("column_map") or {},
        "drop_invalid": inputs["drop_invalid"],
        "max_rows": inputs["max_rows"],
        "scan_policy": inputs["scan_policy"],
        "preview_rows": PREVIEW_ROWS,
    }


def _store_ingested(call: WorkCall, ingested: dict[str, Any]) -> dict[str, Any]:
    """Within the owner's storage limit, commit the canonical files, then the dataset (or version) row."""
    store, artifacts, inputs = call.ctx.store, call.ctx.artifacts, call.inputs
    stored = stored_bytes_if_limited(store.quotas, artifacts, call.owner.id)
    if stored is not None:
        # The received upload is still stored and goes once this ends: it is not counted twice.
        others = max(0, stored - int(inputs.get("upload_bytes") or 0))
        store.quotas.refuse_to_store(call.owner.id, others, int(ingested["size_bytes"]))
    call.progress("storing")
    prefix = dataset_prefix(call.owner.id, f"dsu_{inputs['upload_id']!s}")
    manifest = dict(ingested["manifest"])
    key = commit_version_files(
        artifacts, prefix, call.folder / "canonical.jsonl", ingested["preview"], manifest, call.folder / "version"
    )
    try:
        dataset, version = store.datasets.store_upload(
            call.owner,
            dataset_id=inputs.get("dataset_id"),
            name=inputs.get("name"),
            sha256=str(manifest["sha256"]),
            format=str(manifest["format"]),
            kind=str(manifest["kind"]),
            rows=int(ingested["rows"]),
            storage_key=key,
            manifest={**manifest, "size_bytes": int(ingested["size_bytes"])},
            reports=dict(ingested["reports"]),
            licence=inputs.get("licence"),
            rights_note=inputs.get("rights_note"),
        )
    except BaseException:
        artifacts.delete_prefix(prefix)  # no row points at these files
        raise
    return {"dataset_id": dataset.id, "name": dataset.name, "version_id": version.id, "version": version.version,
            "rows": version.rows}  # fmt: skip


def run_deletion(call: WorkCall) -> dict[str, Any]:
    """Remove every copy a deletion's rows left: stored files, run folders here, cache entries, uploads.

    Each removal is added to the receipt as soon as it is done, and one already on the
    receipt is not done again: a worker killed midway leaves the item to be claimed again,
    and the next attempt finishes the rest without listing anything twice. Cache entries
    go only when no remaining dataset version (of anyone) has the same content.
    """
    store, artifacts, inputs, ctx = call.ctx.store, call.ctx.artifacts, call.inputs, call.ctx
    receipt_id = str(inputs["receipt_id"])
    done = {(line["where"], line["what"]) for line in store.deletions.receipt(receipt_id).removed}
    here = f"worker {ctx.worker_id}"

    def keep(where: str, what: str, count: int, size: int) -> None:
        store.deletions.add_removed(receipt_id, [removal(where, what, count, size)])
        failpoint("deletion_after_removal")

    try:
        call.progress("removing stored files")
        for where, prefixes in (("uploads", inputs.get("upload_prefixes") or []),
                                ("storage", inputs.get("storage_prefixes") or [])):  # fmt: skip
            for prefix in prefixes:
                if (where, prefix) not in done:
                    size = artifacts.usage_bytes(prefix)
                    keep(where, prefix, artifacts.delete_prefix(prefix), size)
        call.progress("removing local copies")
        for job_id in inputs.get("job_ids") or []:
            folder = ctx.runs_dir / _safe_name(str(job_id))
            if (here, f"runs/{job_id}") not in done and (folder.exists() or folder.is_symlink()):
                keep(here, f"runs/{job_id}", *remove_folder(folder))
        hashes = set(inputs.get("dataset_sha256s") or [])
        unused = hashes - store.deletions.hashes_in_use(hashes)
        if ctx.cache_dir is not None:
            for entry in entries_built_from(ctx.cache_dir, unused):
                keep("cache", f"{here}: {entry.name}", *remove_folder(entry))
        # Last: the rows went when the deletion was asked; now no copy of them stays in the database's files.
        if not any(where == "database" and what.startswith(SCRUBBED) for where, what in done):
            scrubbed = f"{SCRUBBED}: {store.db.scrub_deleted_data()}"
            store.deletions.add_removed(receipt_id, [removal("database", scrubbed, 1)])
        receipt = store.deletions.finish(receipt_id)
    except Exception:
        store.deletions.finish(receipt_id, FAILED)
        raise
    return {"receipt_id": receipt.id, "state": receipt.state, "removed": len(receipt.removed)}


def _safe_name(name: str) -> str:
    """A single folder name (an id), never a path that climbs out of the folder it is joined to."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"{name!r} is not a folder name")
    return name


HANDLERS: dict[str, Callable[[WorkCall], dict[str, Any]]] = {
    "ingest": run_ingestion,
    "export": run_export,
    "generate": run_generation,
    "preflight": run_preflight,
    "inspect": run_inspection,
    "delete": run_deletion,
}


def handler_for(kind: str) -> Callable[[WorkCall], dict[str, Any]]:
    """The handler of a kind; NotFoundError for a kind this worker does not run."""
    try:
        return HANDLERS[kind]
    except KeyError:
        raise NotFoundError(f"this worker does not run work of kind {kind!r}") from None
