"""Blob uploads under --max-blob-size and the free disk space: refused before
the body is read when Content-Length says too much, cut off when a chunked
body passes the cap, and never anything partial left in the blobs folder."""

import hashlib
import json
import os
import select
import socket

import pytest
import requests

from conftest import Server

MIB = 1 << 20


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr-capped"), "--max-blob-size", "1MiB")
    yield s
    s.stop()


def blob_files(server) -> set[str]:
    return {p.name for p in (server.home / "blobs").iterdir()}


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_response(sock: socket.socket) -> tuple[int, dict]:
    """The status and JSON body of the response on `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed in the response body"
        body += chunk
    return int(lines[0].split()[1]), json.loads(body[:length] or b"{}")


def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def assert_refused_over_cap(server, status, body, digest, before):
    """A 413 naming the flag, and no new or partial file behind it."""
    assert status == 413, body
    assert "--max-blob-size" in body["error"]
    assert blob_files(server) == before, "no new or partial file"
    assert requests.head(f"{server.url}/api/blobs/{digest}").status_code == 404
    assert server.alive()


def test_content_length_over_the_cap_is_refused_before_the_body(capped):
    data = os.urandom(2 * MIB)
    digest = digest_of(data)
    before = blob_files(capped)
    with connect(capped) as sock:
        # Only the headers: the answer must come without the body.
        sock.sendall((f"POST /api/blobs/{digest} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Content-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n\r\n").encode())
        status, body = read_response(sock)
    assert_refused_over_cap(capped, status, body, digest, before)
    assert "1 MiB" in body["error"]


def test_chunked_upload_is_cut_off_at_the_cap(capped):
    data = os.urandom(2 * MIB)
    digest = digest_of(data)
    before = blob_files(capped)
    with connect(capped) as sock:
        sock.sendall((f"POST /api/blobs/{digest} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n").encode())
        step = 64 * 1024
        sent = 0
        # Send until the server answers (it stops reading at the cap).
        while sent < len(data):
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(b"%x\r\n" % step + data[sent:sent + step] + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += step
        else:
            try:
                sock.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        status, body = read_response(sock)
    assert_refused_over_cap(capped, status, body, digest, before)


def test_digest_mismatch_leaves_nothing_and_a_good_upload_works(capped):
    before = blob_files(capped)
    data = os.urandom(MIB // 2)
    wrong = digest_of(b"something else")
    r = requests.post(f"{capped.url}/api/blobs/{wrong}", data=data)
    assert r.status_code == 400 and "digest mismatch" in r.json()["error"]
    assert blob_files(capped) == before
    assert requests.head(f"{capped.url}/api/blobs/{wrong}").status_code == 404

    # Exactly the cap is allowed.
    data = os.urandom(MIB)
    digest = digest_of(data)
    r = requests.post(f"{capped.url}/api/blobs/{digest}", data=data)
    assert r.status_code == 201, r.text
    assert requests.head(f"{capped.url}/api/blobs/{digest}").status_code == 200
    assert blob_files(capped) == before | {digest.replace(":", "-")}


def test_an_upload_larger_than_the_free_disk_space_is_507(tmp_path, monkeypatch):
    # A cap no disk can hold, through the environment variable.
    monkeypatch.setenv("MLXR_MAX_BLOB_SIZE", "1000000TiB")
    s = Server(tmp_path)
    try:
        digest = digest_of(b"never sent")
        with connect(s) as sock:
            sock.sendall((f"POST /api/blobs/{digest} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          f"Content-Length: {10 ** 17}\r\n\r\n").encode())
            status, body = read_response(sock)
        assert status == 507, body
        assert "disk space" in body["error"]
        assert not list((s.home / "blobs").iterdir())
    finally:
        s.stop()
