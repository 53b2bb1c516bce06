"""Zip a committed artifact folder and stream the archive without building it in memory.

The folder is first downloaded with every checksum verified (so a damaged
checkpoint fails before any byte is sent), then zipped chunk by chunk into the
response; the downloaded copy is removed when the stream ends or is abandoned.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tunedeck.storage.base import MANIFEST_NAME, ArtifactStore, Manifest

_CHUNK = 1024 * 1024
_ZIP64_THRESHOLD = 2**31


class _ChunkSink:
    """A write-only file object whose bytes are collected and drained by the generator."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data: bytes) -> int:
        self.buffer.extend(data)
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def drain(self) -> bytes:
        data = bytes(self.buffer)
        self.buffer.clear()
        return data


@dataclass
class PreparedArchive:
    """A verified local copy of a committed folder, ready to be zipped into a response."""

    root: Path
    manifest: Manifest
    scratch: Path

    def chunks(self) -> Iterator[bytes]:
        """The zip archive, in chunks; removes the local copy when done or abandoned."""
        try:
            sink = _ChunkSink()
            # An unseekable sink makes zipfile write data descriptors, so nothing is rewound.
            with zipfile.ZipFile(
                sink, mode="w", compression=zipfile.ZIP_DEFLATED, compresslevel=1
            ) as archive:
                for entry in self.manifest.files:
                    big = entry.size >= _ZIP64_THRESHOLD
                    with open(self.root / entry.path, "rb") as source, archive.open(
                        entry.path, mode="w", force_zip64=big
                    ) as target:
                        while block := source.read(_CHUNK):
                            target.write(block)
                            if len(sink.buffer) >= _CHUNK:
                                yield sink.drain()
                archive.writestr(MANIFEST_NAME, self.manifest.to_json())
            yield sink.drain()
        finally:
            self.cleanup()

    def cleanup(self) -> None:
        """Remove the local copy (idempotent)."""
        shutil.rmtree(self.scratch, ignore_errors=True)


def prepare_archive(store: ArtifactStore, prefix: str, work_dir: Path) -> PreparedArchive:
    """Download the committed folder `prefix` into a scratch folder under `work_dir`, verified."""
    work_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="archive-", dir=work_dir))
    try:
        root = scratch / "content"
        manifest = store.download_directory(prefix, root)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return PreparedArchive(root=root, manifest=manifest, scratch=scratch)
