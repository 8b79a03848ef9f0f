"""Orphan blobs at start: `mlxr serve` removes blob files no model references
and older than an hour (as Ollama does unless OLLAMA_NOPRUNE is set), keeps
recent ones and resumable downloads, and keeps everything with
MLXR_NOPRUNE=1."""

import hashlib
import os
import time
from pathlib import Path

from conftest import Server

TWO_HOURS = 2 * 3600


def place_blobs(tmp_path: Path) -> dict[str, Path]:
    """An old orphan, a recent orphan and an old `-partial` file in the blobs
    folder of the home the Server will use."""
    blobs = tmp_path / "home" / "blobs"
    blobs.mkdir(parents=True)
    old = time.time() - TWO_HOURS
    files = {}
    for kind, content in (("orphan", b"an orphan blob"), ("recent", b"a fresh upload"),
                          ("partial", b"half a download")):
        name = "sha256-" + hashlib.sha256(content).hexdigest()
        if kind == "partial":
            name += "-partial"
        path = blobs / name
        path.write_bytes(content)
        if kind != "recent":
            os.utime(path, (old, old))
        files[kind] = path
    return files


def test_old_orphan_blobs_are_pruned_at_start(tmp_path, monkeypatch):
    monkeypatch.delenv("MLXR_NOPRUNE", raising=False)
    files = place_blobs(tmp_path)
    s = Server(tmp_path)
    try:
        assert s.alive()
        assert not files["orphan"].exists(), "the old orphan is removed"
        assert files["recent"].exists(), "a recent blob may be about to be used"
        assert files["partial"].exists(), "a download resumes from it"
        assert "pruned 1 unreferenced blob(s)" in s.read_log()
    finally:
        s.stop()


def test_noprune_keeps_orphan_blobs(tmp_path, monkeypatch):
    monkeypatch.setenv("MLXR_NOPRUNE", "1")
    files = place_blobs(tmp_path)
    s = Server(tmp_path)
    try:
        assert s.alive()
        assert all(p.exists() for p in files.values())
        assert "MLXR_NOPRUNE is set" in s.read_log()
    finally:
        s.stop()
