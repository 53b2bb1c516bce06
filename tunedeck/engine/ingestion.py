"""The ingestion process: one uploaded file in, its canonical dataset file and reports out.

Runs as `python -m tunedeck.engine.ingestion --spec FILE` on a worker, so an upload's
memory is the child's to return when it ends. The spec names the upload (`path`), the
canonical file to write (`out`), a scratch folder, the client's file name and the form's
options; `progress_file`, when given, is rewritten with `{"done": bytes, "total": bytes}`
about every second. A spec with `hub` ({"id", "split", "subset", "revision"}) instead of
`path` reads that split of a hub dataset first (no dataset code runs) and records its
origin and resolved commit in the manifest's notes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tunedeck.core.settings import process_settings
from tunedeck.data.hub import HubDatasetRef, default_resolver, fetch_split
from tunedeck.data.ingest import UploadOptions, ingest_upload
from tunedeck.engine.json_process import progress_reporter, run_spec_main

PROGRESS_EVERY_S = 1.0


def ingest(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one ingestion as the spec says; the result is `IngestedDataset.to_dict()`."""
    progress = progress_reporter(spec, every_s=PROGRESS_EVERY_S)

    def report(done: int, total: int) -> None:
        progress({"done": done, "total": total})

    options = UploadOptions(
        display_name=str(spec["display_name"]),
        max_rows=int(spec["max_rows"]),
        format=str(spec.get("format") or "auto"),
        file_type=spec.get("file_type"),
        label_column=spec.get("label_column"),
        column_map=dict(spec.get("column_map") or {}),
        drop_invalid=bool(spec.get("drop_invalid")),
        scan_policy=str(spec.get("scan_policy") or "warn"),
        preview_rows=int(spec.get("preview_rows") or 100),
    )
    scratch = Path(spec["scratch"])
    hub = spec.get("hub")
    origin: dict[str, Any] = {}
    if hub is not None:
        ref = HubDatasetRef.parse(f"hub:{hub['id']}", str(hub["split"]), hub.get("subset"), hub.get("revision"))
        fetched_into = scratch / "hub"
        fetched_into.mkdir(parents=True, exist_ok=True)
        # This process is started by the worker, with its environment: the mirror is read where it starts.
        fetched = fetch_split(ref, fetched_into, default_resolver(process_settings().dataset_mirror))
        path, origin = fetched.path, fetched.notes()
    else:
        path = Path(spec["path"])
    ingested = ingest_upload(path, Path(spec["out"]), options, scratch=scratch, on_progress=report)
    answer = ingested.to_dict()
    if origin:
        answer["manifest"]["notes"] = {**(answer["manifest"].get("notes") or {}), **origin}
    return answer


def main(argv: list[str] | None = None) -> int:
    """Entry point: `--spec FILE` in, one JSON line out (see `tunedeck.engine.json_process`)."""
    return run_spec_main("python -m tunedeck.engine.ingestion", ingest, argv)


if __name__ == "__main__":
    sys.exit(main())
