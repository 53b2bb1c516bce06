"""Streaming multipart reception: limits while streaming, generated names, malformed bodies."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from tunedeck.api.uploads import UploadRejected, contained_path, receive_upload, safe_suffix

LIMIT = 1000


def make_client(directory: Path) -> TestClient:
    app = FastAPI()

    @app.post("/upload")
    async def upload(request: Request) -> dict[str, object]:
        try:
            received = await receive_upload(request, directory, LIMIT)
        except UploadRejected as error:
            raise HTTPException(error.status, error.detail) from None
        return {"name": received.path.name, "size": received.size, "fields": received.fields}

    return TestClient(app)


def test_file_is_streamed_to_a_generated_name(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    response = client.post(
        "/upload",
        files={"file": ("../../etc/evil name.JSONL", b'{"text": "hi"}\n', "application/octet-stream")},
        data={"format": "text"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["size"] == len(b'{"text": "hi"}\n')
    assert body["fields"] == {"format": "text"}
    assert body["name"].startswith("upload-") and body["name"].endswith(".jsonl")
    assert "evil" not in body["name"]
    assert [p.name for p in tmp_path.iterdir()] == [body["name"]]


def test_over_the_limit_is_413_and_leaves_nothing(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    response = client.post("/upload", files={"file": ("a.jsonl", b"x" * (LIMIT + 1))})
    assert response.status_code == 413
    assert list(tmp_path.iterdir()) == []


def test_limit_enforced_while_streaming_without_content_length(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    boundary = "b0undary"
    head = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n'.encode()

    def body():  # a generator body is sent chunked, with no Content-Length to trust
        yield head
        for _ in range(10):
            yield b"y" * 500
        yield f"\r\n--{boundary}--\r\n".encode()

    response = client.post(
        "/upload", content=body(), headers={"content-type": f"multipart/form-data; boundary={boundary}"}
    )
    assert response.status_code == 413
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b'{"a": 1}', "application/json", 415),
        (b"garbage", "multipart/form-data", 400),
        (b"garbage without any boundary", "multipart/form-data; boundary=zzz", 400),
        (
            b'--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\ntruncated',
            "multipart/form-data; boundary=zzz",
            400,
        ),
        (
            b'--zzz\r\nContent-Disposition: form-data; name="other"\r\n\r\nvalue\r\n--zzz--\r\n',
            "multipart/form-data; boundary=zzz",
            400,
        ),
        (
            b'--zzz\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n--zzz--\r\n',
            "multipart/form-data; boundary=zzz",
            400,
        ),
    ],
    ids=["not-multipart", "no-boundary", "no-parts", "truncated", "no-file", "no-name"],
)
def test_malformed_bodies_are_4xx(tmp_path: Path, content: bytes, content_type: str, status: int) -> None:
    response = make_client(tmp_path).post("/upload", content=content, headers={"content-type": content_type})
    assert response.status_code == status, response.text
    assert list(tmp_path.iterdir()) == []


def test_two_files_are_refused(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    response = client.post("/upload", files=[("file", ("a.jsonl", b"1")), ("file", ("b.jsonl", b"2"))])
    assert response.status_code == 400
    assert list(tmp_path.iterdir()) == []


def test_suffix_allowlist() -> None:
    assert safe_suffix("data.CSV") == ".csv"
    assert safe_suffix("x.exe") == ""
    assert safe_suffix(None) == ""
    assert safe_suffix("..\\..\\a.parquet") == ".parquet"
    # Every file type the data layer reads, gzip-compressed text files included.
    assert safe_suffix("pairs.TSV") == ".tsv" and safe_suffix("notes.txt") == ".txt"
    assert safe_suffix("train.jsonl.gz") == ".jsonl.gz" and safe_suffix("spam.csv.GZ") == ".csv.gz"
    assert safe_suffix("rows.parquet.gz") == "" and safe_suffix("archive.gz") == "" and safe_suffix("x.exe.gz") == ""


def test_contained_path_refuses_escape(tmp_path: Path) -> None:
    assert contained_path(tmp_path, "a.jsonl") == (tmp_path / "a.jsonl").resolve()
    with pytest.raises(UploadRejected):
        contained_path(tmp_path, "../outside")
    with pytest.raises(UploadRejected):
        contained_path(tmp_path, ".")
