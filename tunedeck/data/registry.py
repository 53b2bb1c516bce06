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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.dataset_vocabulary import NAME_PATTERN
from tunedeck.core.errors import DataError, Issue, NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.data.loading import LoadedDataset
from tunedeck.data.manifest import ContentHasher, DatasetManifest
from tunedeck.data.validation import ValidationReport, checked_rows

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
        label_column: str | None = None,
        notes: dict[str, Any] | None = None,
        column_map: Mapping[str, str] | None = None,
    ) -> DatasetVersion:
        """Validate and register a file (or an already loaded dataset) as the next version of `name`.

        Raises DataError, registering nothing, when the file is invalid (unless
        `drop_invalid`). Fields the format ignores are listed in the manifest's
        notes (`ignored_fields`); `label_column` names a classification label
        field other than `label`; `column_map` renames fields (target -> source) before
        the rows are read, and is kept in the notes (`column_map`, with a label column as
        its `label` pair); `notes` are added to the manifest's notes (a hub dataset's
        origin, say). Content already registered under `name` with the same flags and
        column mapping returns the existing version instead of a duplicate.
        """
        if not isinstance(source, LoadedDataset):
            # Streamed: each valid row goes straight to the staged file, so memory stays bounded
            # by one row whatever the file's size; an invalid file is refused before publishing.
            stream = _CheckedStream(Path(source), format, drop_invalid, schema_path, label_column, column_map)

            def describe() -> _Description:
                described = stream.describe()
                return replace(described, notes={**described.notes, **(notes or {})})

            return self._write_version(stream.rows(), name, describe, sealed=sealed, split=split, parent=parent)
        merged: dict[str, Any] = {"source": source.path.name}
        if source.dropped:
            merged["dropped_lines"] = source.dropped_lines
        if source.ignored_fields:
            merged["ignored_fields"] = source.ignored_fields
        if source.column_map:
            merged["column_map"] = dict(source.column_map)
        merged.update(notes or {})
        return self.register_rows(
            source.rows,
            name,
            kind=source.kind,
            source_format=source.source_format,
            sealed=sealed,
            split=split,
            parent=parent,
            dropped=source.manifest.dropped,
            notes=merged,
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
        described = _Description(kind, source_format, dropped, notes or {})
        return self._write_version(rows, name, lambda: described, sealed=sealed, split=split, parent=parent)

    def _write_version(
        self,
        rows: Iterable[dict[str, Any]],
        name: str,
        describe: Callable[[], _Description],
        *,
        sealed: bool,
        split: str | None,
        parent: str | None,
    ) -> DatasetVersion:
        """Stage `rows`, then publish them as the next version; `describe` may still refuse them (DataError)."""
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
            described = describe()
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
                format=described.source_format,
                kind=described.kind,
                rows=hasher.rows,
                sealed=sealed,
                split=split,
                parent=parent,
                dropped=described.dropped,
                notes=described.notes,
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
            # The column mapping and the recorded rights are part of what a version is: the same rows
            # read through another mapping, or registered under other terms, make a new version.
            if _identity(m) == _identity(draft):
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


@dataclass(frozen=True)
class _Description:
    """What a version's manifest says about its rows beyond their content."""

    kind: str
    source_format: str
    dropped: int
    notes: dict[str, Any]


class _CheckedStream:
    """One validating pass over a file: valid rows as they come, the verdict once they are all read.

    The same rules as `load_dataset`: any issue refuses the file unless `drop_invalid`, a
    fatal issue or a file without a valid row always does.
    """

    def __init__(
        self,
        path: Path,
        format: str,
        drop_invalid: bool,
        schema_path: Path | str | None,
        label_column: str | None = None,
        column_map: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self.drop_invalid = drop_invalid
        self.checker, self._stream = checked_rows(
            path,
            format,
            schema_path=Path(schema_path) if schema_path is not None else None,
            label_column=label_column,
            column_map=column_map,
        )
        self.report = ValidationReport(str(path), None, None)
        self.dropped_lines: set[int] = set()
        # Shards each number their lines from 1: a dropped row is its (file, line).
        self._dropped_rows: set[tuple[str | None, int]] = set()
        self.valid = 0
        self.fatal = False

    def rows(self) -> Iterator[dict[str, Any]]:
        """The valid rows; issues are collected on the way."""
        for checked in self._stream:
            if checked.row is not None:
                self.valid += 1
                yield checked.row
                continue
            self.fatal = self.fatal or checked.fatal
            self.report.add(checked.issues)
            self.dropped_lines.update(issue.line for issue in checked.issues if issue.line is not None)
            self._dropped_rows.update((i.file, i.line) for i in checked.issues if i.line is not None)

    def describe(self) -> _Description:
        """The manifest's fields, or the DataError that refuses the file."""
        if not self.valid and not self.report.issue_count:
            raise DataError([Issue("no rows", file=str(self.path), expected="at least one row",
                                   found="no rows in the file")])
        if self.report.issue_count and (self.fatal or not self.drop_invalid or not self.valid):
            self.report.rows_total = self.valid + len(self._dropped_rows)
            self.report.rows_valid = self.valid
            self.report.source_format, self.report.kind = self.checker.source_format, self.checker.kind
            raise self.report.error()
        assert self.checker.source_format is not None and self.checker.kind is not None  # set by a valid row
        notes: dict[str, Any] = {"source": self.path.name}
        if self.dropped_lines:
            notes["dropped_lines"] = sorted(self.dropped_lines)
        if self.checker.ignored:
            notes["ignored_fields"] = dict(self.checker.ignored.most_common())
        if self.checker.column_map:
            notes["column_map"] = dict(self.checker.column_map)
        return _Description(self.checker.kind, self.checker.source_format, len(self._dropped_rows), notes)


def _identity(manifest: DatasetManifest) -> tuple[Any, ...]:
    """What makes two registrations the same version: content, flags, column mapping and recorded rights."""
    notes = manifest.notes
    return (
        manifest.sha256,
        manifest.sealed,
        manifest.split,
        manifest.kind,
        notes.get("column_map") or {},
        *(notes.get(key) for key in RIGHTS_NOTES),
    )


RIGHTS_NOTES = ("licence", "rights_note")


def registered_rights(data_path: Path, sha256: str) -> dict[str, str]:
    """The licence and rights note recorded for a registered version, when `data_path` is its `data.jsonl`.

    Only a version whose manifest names the same content (`sha256`) counts; anything else gives `{}`.
    """
    path = Path(data_path)
    if path.name != "data.jsonl" or not (path.parent / "manifest.json").is_file():
        return {}
    try:
        document = json.loads((path.parent / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("sha256") != sha256:
        return {}
    notes = document.get("notes") or {}
    return {key: str(notes[key]) for key in RIGHTS_NOTES if isinstance(notes, dict) and notes.get(key)}
