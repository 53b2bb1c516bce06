"""A file-based registry of immutable dataset versions.

Layout under `root`:

    <name>/v<N>/data.jsonl       canonical rows, one canonical JSON line each
    <name>/v<N>/manifest.json    the DatasetManifest of that version
    .staging/                    versions being written; never read

A version is written whole in `.staging/` and then renamed into place, so a
reader sees a complete version or none, and a file that fails validation
registers nothing. The job service stores the same manifest in its database;
this registry is what the library and the CLI use on their own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunedeck.core.errors import DataError, Issue, NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.data.loading import LoadedDataset, load_dataset
from tunedeck.data.manifest import ContentHasher, DatasetManifest, write_json_atomic

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_VERSION_DIR = re.compile(r"^v(\d+)$")
_RENAME_ATTEMPTS = 100


@dataclass(frozen=True)
class DatasetVersion:
    """One registered version: its manifest and the folder holding its canonical rows."""

    manifest: DatasetManifest
    directory: Path

    @property
    def data_path(self) -> Path:
        """The canonical JSONL file of this version."""
        return self.directory / "data.jsonl"

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Stream the canonical rows."""
        with self.data_path.open(encoding="utf-8") as handle:
            for line in handle:
                yield json.loads(line)

    def load(self) -> LoadedDataset:
        """The version as a LoadedDataset, keeping this version's manifest."""
        rows = list(self.iter_rows())
        return LoadedDataset(
            path=self.data_path,
            kind=self.manifest.kind,
            source_format=self.manifest.format,
            rows=rows,
            line_numbers=list(range(1, len(rows) + 1)),
            manifest=self.manifest,
        )


class DatasetRegistry:
    """Registers immutable, numbered versions of named datasets under one folder."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def register(
        self,
        source: Path | str | LoadedDataset,
        name: str,
        *,
        format: str = "auto",
        drop_invalid: bool = False,
        schema_path: Path | str | None = None,
        sealed: bool = False,
        split: str | None = None,
        parent: str | None = None,
    ) -> DatasetVersion:
        """Validate and register a file (or an already loaded dataset) as the next version of `name`.

        Raises DataError, registering nothing, when the file is invalid (unless
        `drop_invalid`). Content already registered under `name` with the same
        flags returns the existing version instead of a duplicate.
        """
        loaded = (
            source
            if isinstance(source, LoadedDataset)
            else load_dataset(source, format, drop_invalid=drop_invalid, schema_path=schema_path, name=name)
        )
        notes: dict[str, Any] = {"source": loaded.path.name}
        if loaded.dropped:
            notes["dropped_lines"] = loaded.dropped_lines
        return self.register_rows(
            loaded.rows,
            name,
            kind=loaded.kind,
            source_format=loaded.source_format,
            sealed=sealed,
            split=split,
            parent=parent,
            dropped=loaded.manifest.dropped,
            notes=notes,
        )

    def register_rows(
        self,
        rows: Iterable[dict[str, Any]],
        name: str,
        *,
        kind: str,
        source_format: str,
        sealed: bool = False,
        split: str | None = None,
        parent: str | None = None,
        dropped: int = 0,
        notes: dict[str, Any] | None = None,
    ) -> DatasetVersion:
        """Register canonical rows (already validated) as the next version of `name`."""
        self._check_name(name)
        staging_root = self.root / ".staging"
        staging_root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=staging_root))
        try:
            hasher = ContentHasher()
            with (staging / "data.jsonl").open("w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(hasher.add(row) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            if hasher.rows == 0:
                raise DataError(
                    [
                        Issue(
                            "no rows to register", field="name", found=name, expected="at least one valid row"
                        )
                    ]
                )
            draft = DatasetManifest(
                name=name,
                sha256=hasher.hexdigest(),
                format=source_format,
                kind=kind,
                rows=hasher.rows,
                sealed=sealed,
                split=split,
                parent=parent,
                dropped=dropped,
                notes=notes or {},
                id=new_id("ds_"),
            )
            existing = self._same_content(draft)
            if existing is not None:
                return existing
            return self._publish(staging, draft)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _publish(self, staging: Path, draft: DatasetManifest) -> DatasetVersion:
        """Rename the staged folder to the next free `v<N>`; a concurrent writer makes us take N+1."""
        folder = self.root / draft.name
        folder.mkdir(parents=True, exist_ok=True)
        version = self._latest_number(draft.name) + 1
        for _ in range(_RENAME_ATTEMPTS):
            manifest = replace(draft, version=version)
            write_json_atomic(staging / "manifest.json", manifest.to_dict())
            target = folder / f"v{version}"
            try:
                # A non-empty target makes rename fail, so two writers never share a number.
                os.rename(staging, target)
            except OSError:
                version += 1
                continue
            return DatasetVersion(manifest, target)
        raise DataError([Issue("could not claim a version number", field="name", found=draft.name)])

    def _same_content(self, draft: DatasetManifest) -> DatasetVersion | None:
        for existing in self.versions(draft.name):
            m = existing.manifest
            if (m.sha256, m.sealed, m.split, m.kind) == (draft.sha256, draft.sealed, draft.split, draft.kind):
                return existing
        return None

    @staticmethod
    def _check_name(name: str) -> None:
        if not NAME_PATTERN.match(name):
            raise DataError(
                [
                    Issue(
                        "invalid dataset name",
                        field="name",
                        found=repr(name),
                        expected="1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
                    )
                ]
            )

    def _latest_number(self, name: str) -> int:
        numbers = [
            int(m.group(1)) for p in (self.root / name).glob("v*") if (m := _VERSION_DIR.match(p.name))
        ]
        return max(numbers, default=0)

    def names(self) -> list[str]:
        """Every dataset name with at least one version."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name for p in self.root.iterdir() if NAME_PATTERN.match(p.name) and self.versions(p.name)
        )

    def versions(self, name: str) -> list[DatasetVersion]:
        """Every complete version of `name`, oldest first."""
        self._check_name(name)
        found: list[DatasetVersion] = []
        folder = self.root / name
        if not folder.is_dir():
            return found
        for path in folder.iterdir():
            if _VERSION_DIR.match(path.name) and (path / "manifest.json").is_file():
                data = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
                found.append(DatasetVersion(DatasetManifest.from_dict(data), path))
        return sorted(found, key=lambda v: v.manifest.version or 0)

    def get(self, name: str, version: int | None = None) -> DatasetVersion:
        """Version `version` of `name`, or its latest; NotFoundError when there is none."""
        versions = self.versions(name)
        if version is None and versions:
            return versions[-1]
        for candidate in versions:
            if candidate.manifest.version == version:
                return candidate
        raise NotFoundError(
            f"dataset {name!r} has no version {version if version is not None else ''}".strip()
        )

    def get_by_id(self, dataset_id: str) -> DatasetVersion:
        """The version with this id; NotFoundError when there is none."""
        for name in self.names():
            for candidate in self.versions(name):
                if candidate.manifest.id == dataset_id:
                    return candidate
        raise NotFoundError(f"no dataset version with id {dataset_id!r}")
