"""`mlxr serve --config`: the file fills what flags and environment leave unset."""

import os
from datetime import datetime
import subprocess

import requests

from conftest import MODEL_FILE, Daemon, free_port, mlxr_bin, models_dir


def test_file_then_env_then_flags(tmp_path):
    file_port, env_port = free_port(), free_port()
    config = tmp_path / "server.toml"
    config.write_text(
        f'host = "127.0.0.1:{file_port}"\nkeep_alive = "-1"\n'
        f'[[models]]\npath = "{models_dir() / MODEL_FILE}"\nname = "from-config"\n'
    )
    env = dict(os.environ, MLXR_HOST=f"127.0.0.1:{env_port}")
    daemon = Daemon(["--config", str(config), "--home", str(tmp_path / "home")], tmp_path / "server.log", env)
    try:
        url = f"http://127.0.0.1:{env_port}"  # the environment beats the file's host
        names = [m["name"] for m in requests.get(url + "/api/tags").json()["models"]]
        assert "from-config:latest" in names
        requests.post(url + "/api/generate", json={"model": "from-config", "prompt": ""})
        ps = requests.get(url + "/api/ps").json()["models"]
        expires = datetime.fromisoformat(ps[0]["expires_at"].replace("Z", "+00:00")[:26] + "+00:00")
        assert expires.year > 2100  # keep_alive -1: forever
    finally:
        daemon.stop()


def test_unknown_key_is_an_error(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("max_num_seqz = 4\n")
    out = subprocess.run([mlxr_bin(), "serve", "--config", str(config), "--home", str(tmp_path / "h")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "max_num_seqz" in out.stderr and out.stderr.startswith("error:")
