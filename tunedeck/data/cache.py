"""Tokenized datasets cached on disk, so a second run over the same data skips tokenization.

The key is a hash of everything that changes the result: the dataset's content hash, the
tokenizer fingerprint, the template version, the row kind, the task, max_length, packing,
train_on_inputs, the truncation mode and the label mapping. One entry is a folder named by the key:

    <cache_dir>/<key>/input_ids.npy   flat int32 token ids of every row (read back memory-mapped)
                      offsets.npy     int64 start of each row in the flat arrays (+ the end)
                      labels.npy      flat int32 labels (sft) or one int64 label per row
                      meta.json       key parts, truncation report, packs, label mapping

An entry is built in a temporary folder beside it and renamed into place, so a reader sees
a complete entry or none; an entry that fails to read is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunedeck.data.manifest import content_sha256
from tunedeck.data.packing import Pack, pack_examples
from tunedeck.data.ragged import RaggedRows
from tunedeck.data.tokenize import (
    TEMPLATE_VERSION,
    EncodedClassification,
    TokenizedRows,
    TruncationReport,
    encode_classification,
    tokenize_rows,
)
from tunedeck.data.tokenizer_fingerprint import tokenizer_fingerprint

CACHE_FORMAT = 1


@dataclass
class PreparedDataset:
    """Rows ready for training: tokenized (sft) or encoded (classification), packs when asked."""

    task: str
    kind: str
    key: str
    cache_hit: bool
    tokenized: TokenizedRows | None = None
    classification: EncodedClassification | None = None
    packs: list[Pack] | None = None

    @property
    def report(self) -> TruncationReport:
        """The truncation report of whichever encoding this holds."""
        held = self.tokenized if self.tokenized is not None else self.classification
        assert held is not None
        return held.report


def cache_key_parts(
    *,
    dataset_hash: str,
    tokenizer_hash: str,
    kind: str,
    task: str,
    max_length: int,
    packing: bool,
    train_on_inputs: bool,
    label2id: Mapping[str, int] | None,
    truncation: str = "refuse",
) -> dict[str, Any]:
    """Everything the cached result depends on, as a JSON-ready dict."""
    return {
        "cache_format": CACHE_FORMAT,
        "template_version": TEMPLATE_VERSION,
        "dataset": dataset_hash,
        "tokenizer": tokenizer_hash,
        "kind": kind,
        "task": task,
        "max_length": max_length,
        "packing": packing,
        "train_on_inputs": train_on_inputs,
        "truncation": truncation,
        "label2id": dict(sorted(label2id.items())) if label2id is not None else None,
    }


def cache_key(parts: Mapping[str, Any]) -> str:
    """sha256 of the key parts (hex, the entry's folder name)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def prepare_dataset(
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    tokenizer: Any,
    *,
    max_length: int,
    task: str = "sft",
    train_on_inputs: bool = False,
    packing: bool = False,
    cache_dir: Path | str | None = None,
    dataset_hash: str | None = None,
    label2id: Mapping[str, int] | None = None,
    row_numbers: Sequence[int] | None = None,
    source: str | None = None,
    truncation: str = "refuse",
) -> PreparedDataset:
    """Tokenize (or reuse the cached tokenization of) `rows` for `task`.

    `dataset_hash` is the manifest's sha256 when the caller has it (computed from the rows
    otherwise). Without `cache_dir` nothing is cached. Errors are those of `tokenize_rows`
    and `encode_classification`; a refused dataset is never cached. `truncation` (sft only) is
    what happens to rows left without a trained token (`tokenize_rows`).
    """
    if task not in ("sft", "classification"):
        raise ValueError(f"unknown task {task!r}; expected sft or classification")
    if task == "classification" and packing:
        raise ValueError("packing applies to sft only")
    parts = cache_key_parts(
        dataset_hash=dataset_hash or content_sha256(rows),
        tokenizer_hash=tokenizer_fingerprint(tokenizer),
        kind=kind,
        task=task,
        max_length=max_length,
        packing=packing,
        train_on_inputs=train_on_inputs,
        label2id=label2id,
        truncation=truncation,
    )
    key = cache_key(parts)
    entry = Path(cache_dir) / key if cache_dir is not None else None
    if entry is not None and entry.is_dir():
        cached = _read_entry(entry, task, kind, key)
        if cached is not None:
            return cached
    prepared = PreparedDataset(task=task, kind=kind, key=key, cache_hit=False)
    if task == "classification":
        prepared.classification = encode_classification(
            rows, tokenizer, max_length=max_length, label2id=label2id, row_numbers=row_numbers, source=source
        )
    else:
        prepared.tokenized = tokenize_rows(
            rows,
            kind,
            tokenizer,
            max_length=max_length,
            train_on_inputs=train_on_inputs,
            row_numbers=row_numbers,
            source=source,
            truncation=truncation,
        )
        if packing:
            prepared.packs = pack_examples(prepared.tokenized, max_length)
    if entry is not None:
        _write_entry(entry, prepared, parts)
    return prepared


def _write_entry(entry: Path, prepared: PreparedDataset, parts: Mapping[str, Any]) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        meta: dict[str, Any] = {"key": parts, "report": asdict(prepared.report)}
        if prepared.tokenized is not None:
            ids = RaggedRows.from_rows(prepared.tokenized.input_ids)
            labels = RaggedRows.from_rows(prepared.tokenized.labels).flat
            meta["chat_mask_method"] = prepared.tokenized.chat_mask_method
        else:
            assert prepared.classification is not None
            ids = RaggedRows.from_rows(prepared.classification.input_ids)
            labels = np.asarray(prepared.classification.labels, dtype=np.int64)
            meta["label2id"] = prepared.classification.label2id
        if prepared.packs is not None:
            meta["packs"] = [list(pack.indices) for pack in prepared.packs]
        np.save(staging / "input_ids.npy", ids.flat)
        np.save(staging / "offsets.npy", ids.offsets)
        np.save(staging / "labels.npy", labels)
        (staging / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        try:
            os.replace(staging, entry)
        except OSError:
            if not (entry / "meta.json").is_file():  # not a concurrent writer of the same entry
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _read_entry(entry: Path, task: str, kind: str, key: str) -> PreparedDataset | None:
    try:
        meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
        # Entries are never rewritten in place, so mapping them is safe and costs nothing up front.
        ids = RaggedRows(np.load(entry / "input_ids.npy", mmap_mode="r", allow_pickle=False),
                         np.load(entry / "offsets.npy", allow_pickle=False))
        labels = np.load(entry / "labels.npy", mmap_mode="r", allow_pickle=False)
        report = TruncationReport(**meta["report"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # incomplete or damaged: rebuilt by the caller
    prepared = PreparedDataset(task=task, kind=kind, key=key, cache_hit=True)
    if task == "classification":
        ones = RaggedRows(np.ones(len(ids.flat), dtype=np.int8), ids.offsets)
        prepared.classification = EncodedClassification(ids, ones, labels.tolist(), dict(meta["label2id"]),
                                                        report)
    else:
        prepared.tokenized = TokenizedRows(kind, ids, RaggedRows(labels, ids.offsets), report,
                                           meta.get("chat_mask_method"))
    if "packs" in meta:
        lengths = ids.lengths()
        prepared.packs = [Pack(tuple(members), tuple(lengths[i] for i in members))
                          for members in meta["packs"]]
    return prepared
