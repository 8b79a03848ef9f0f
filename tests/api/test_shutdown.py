"""Graceful shutdown: SIGTERM lets in-flight streams finish, then the daemon exits 0."""

import json
import signal

import requests

from conftest import MODEL, Server


def test_sigterm_lets_a_stream_finish(tmp_path):
    s = Server(tmp_path)
    try:
        body = {"model": MODEL, "prompt": "Count to twenty:", "options": {"num_predict": 40, "temperature": 0}}
        r = requests.post(s.url + "/api/generate", json=body, stream=True)
        lines = r.iter_lines()
        first = json.loads(next(lines))
        assert first["done"] is False
        s.proc.send_signal(signal.SIGTERM)
        rest = [json.loads(line) for line in lines]
        assert rest[-1]["done"] is True and rest[-1]["eval_count"] == 40
        assert s.proc.wait(timeout=30) == 0
    finally:
        s.stop()
