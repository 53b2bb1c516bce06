"""Wire shapes of `/v1/files`, as the client's `FileObject`, `FileDeleted` and a page of files read them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

FILE_PURPOSE = "fine-tune"


class FileOut(BaseModel):
    """One file: a dataset version (`id` is the version's id)."""

    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str = FILE_PURPOSE
    status: Literal["uploaded", "processed", "error"] = "processed"
    status_details: str | None = None


class FileList(BaseModel):
    """A page of files; ask for the next one with `after` = the last id while `has_more`."""

    object: Literal["list"] = "list"
    data: list[FileOut]
    has_more: bool = False
    first_id: str | None = None
    last_id: str | None = None


class FileDeletedOut(BaseModel):
    """The answer to deleting a file."""

    id: str
    object: Literal["file"] = "file"
    deleted: bool = True
