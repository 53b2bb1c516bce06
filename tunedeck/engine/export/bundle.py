"""The bundle: one `.tar.gz` holding everything needed to understand, reuse and reproduce a model.

Inside, under one top folder: `MODEL_CARD.md`, the run's `config.json` (resolved, with
derived values), `training_config.json` (the job config alone: `tunedeck train --config`
takes it as is), `env.json`, `data_manifest.json`, `results.json`, `evaluations.json`
(baseline and final metrics, without the per-example outputs, which quote data rows) and
`model/` (the adapter with its pin, or the full fine-tuned model).
"""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path
from typing import Any

from tunedeck.engine.export.source import RunDocuments

CARD_NAME = "MODEL_CARD.md"
MODEL_FOLDER = "model"


def write_bundle_contents(folder: Path, documents: RunDocuments, card: str) -> list[str]:
    """Write the bundle's documents into `folder` (beside `model/`, already there); the names written."""
    contents: dict[str, Any] = {
        "config.json": documents.config,
        "training_config.json": documents.training_config,
        "env.json": documents.env,
        "data_manifest.json": documents.data_manifest,
        "results.json": portable_results(documents.results),
        "evaluations.json": {
            name: _evaluation_summary(document)
            for name, document in (("baseline", documents.baseline_eval), ("final", documents.final_eval))
            if document is not None
        },
    }
    written = []
    for name, document in contents.items():
        if document:
            (folder / name).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            written.append(name)
    (folder / CARD_NAME).write_text(card, encoding="utf-8")
    return [CARD_NAME, *written]


def portable_results(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """`results.json` without the training machine's folders: paths inside the run become relative to it.

    Absolute paths tell a bundle's reader nothing and show the layout of the machine that trained
    (its home, its data folder, the job's id in a long path the secret scan rightly mistrusts).
    """
    if not results:
        return results
    portable = dict(results)
    run_dir = str(portable.pop("run_dir", "") or "").rstrip("/")
    for key in ("final_path", "best_checkpoint"):
        value = portable.get(key)
        if isinstance(value, str) and value.startswith("/"):
            inside = run_dir and value.startswith(run_dir + "/")
            portable[key] = value[len(run_dir) + 1 :] if inside else Path(value).name
    return portable


def pack(folder: Path, archive: Path, top: str) -> None:
    """Write `folder` as `archive` (gzip tar) under the top folder `top`, in a stable order."""

    def normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
        # Same content, same archive: no owner names or times from the machine that packed it.
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    # gzip's header stores a time too: zero it, so exporting twice commits identical bytes.
    with (
        open(archive, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w") as tar,
    ):
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=f"{top}/{path.relative_to(folder).as_posix()}", filter=normalised)


def _evaluation_summary(document: dict[str, Any]) -> dict[str, Any]:
    return {key: document.get(key) for key in ("format", "procedure_sha256", "metrics", "truncation")}
