"""`--device`: where models run, reported by /api/ps and /api/show; a device
this build lacks is a clear error at startup, for the daemon and the
in-process commands alike."""

import subprocess

import requests

from conftest import MODEL_FILE, Daemon, free_port, mlxr_bin, models_dir

TIMEOUT = 120


def test_cpu_device_is_reported(tmp_path):
    port = free_port()
    config = tmp_path / "server.toml"
    config.write_text('device = "cpu"\n')
    daemon = Daemon(
        ["--config", str(config), "--host", f"127.0.0.1:{port}", "--home", str(tmp_path / "home"),
         "-m", str(models_dir() / MODEL_FILE), "--name", "smol"],
        tmp_path / "server.log",
    )
    try:
        url = f"http://127.0.0.1:{port}"
        shown = requests.post(url + "/api/show", json={"model": "smol"}, timeout=TIMEOUT).json()
        assert shown["device"] == "cpu"
        r = requests.post(url + "/api/generate",
                          json={"model": "smol", "prompt": "Hi", "stream": False,
                                "options": {"num_predict": 2}}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        ps = requests.get(url + "/api/ps", timeout=TIMEOUT).json()["models"]
        assert [m["device"] for m in ps] == ["cpu"]
    finally:
        daemon.stop()


def test_missing_gpu_support_is_a_clear_error(tmp_path):
    model = str(models_dir() / MODEL_FILE)
    for args, hint in [
        (["serve", "--device", "cuda", "--host", f"127.0.0.1:{free_port()}",
          "--home", str(tmp_path / "h")], "--features cuda"),
        (["run", "-m", model, "--device", "metal", "Hi"], "--features metal"),
        (["bench", "-m", model, "--device", "cuda:1", "-p", "8", "-n", "2", "-r", "1"], "--features cuda"),
        (["run", "-m", model, "--device", "tpu", "Hi"], "not a device"),
    ]:
        out = subprocess.run([mlxr_bin(), *args], capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode != 0, args
        assert hint in out.stderr, (args, out.stderr)
        assert "panicked" not in out.stderr
