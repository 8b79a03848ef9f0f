"""The `mlxr` CLI over the gRPC API (MLXR_HOST=grpc://HOST:PORT or
grpc+unix:PATH): the same commands print what they print over REST, a
command that gRPC cannot carry says so, the API key comes from MLXR_API_KEY
on both transports."""

import functools
import os
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import requests

from conftest import MODEL, MODEL_FILE, Server, mlxr_bin, models_dir


def mlxr(*args, host, key=None, timeout=180):
    env = dict(os.environ, MLXR_HOST=host)
    env.pop("MLXR_API_KEY", None)
    if key is not None:
        env["MLXR_API_KEY"] = key
    return subprocess.run([mlxr_bin(), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def grpc_host(server):
    return f"grpc://127.0.0.1:{server.port}"


def rest_host(server):
    return f"127.0.0.1:{server.port}"


def ok(done):
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def test_list_and_show_print_what_rest_prints(server):
    for args in (["list"], ["show", MODEL], ["show", MODEL, "--template"],
                 ["show", MODEL, "--modelfile"]):
        over_grpc = ok(mlxr(*args, host=grpc_host(server)))
        assert over_grpc == ok(mlxr(*args, host=rest_host(server))), args
    assert MODEL in ok(mlxr("list", host=grpc_host(server)))


def test_run_streams_the_greedy_reply_rest_gives(server):
    args = ["run", MODEL, "Name three colours.", "--temperature", "0", "--max-tokens", "24"]
    over_grpc = mlxr(*args, "--verbose", host=grpc_host(server))
    over_rest = ok(mlxr(*args, host=rest_host(server)))
    assert ok(over_grpc) == over_rest and len(over_rest.strip()) > 10
    # --verbose's timings come from the stream's Done message.
    assert "eval count:           24 token(s)" in over_grpc.stderr, over_grpc.stderr


def test_ps_and_stop(server):
    ok(mlxr("run", MODEL, "Hi", "--max-tokens", "2", host=grpc_host(server)))
    assert MODEL in ok(mlxr("ps", host=grpc_host(server)))
    ok(mlxr("stop", MODEL, host=grpc_host(server)))
    running = requests.get(server.url + "/api/ps", timeout=10).json()["models"]
    assert not [m for m in running if m["name"].startswith(MODEL)], running
    assert MODEL not in ok(mlxr("ps", host=grpc_host(server)))


def test_what_grpc_cannot_carry_is_an_error_naming_rest(server):
    done = mlxr("cp", MODEL, "copy-of-smollm2", host=grpc_host(server))
    assert done.returncode != 0
    assert "not part of the gRPC API" in done.stderr and "/api/copy" in done.stderr, done.stderr
    names = [m["name"] for m in requests.get(server.url + "/api/tags", timeout=10).json()["models"]]
    assert not [n for n in names if n.startswith("copy-of-smollm2")], names


def test_unknown_models_and_dead_daemons_are_clear_errors(server):
    done = mlxr("show", "no-such-model", host=grpc_host(server))
    assert done.returncode != 0 and "not found" in done.stderr.lower(), done.stderr
    done = mlxr("list", host="grpc://127.0.0.1:1")
    assert done.returncode != 0
    assert "could not connect to mlxr serve at grpc://127.0.0.1:1" in done.stderr, done.stderr


def test_the_api_key_on_both_transports(keyed_server):
    for host in (grpc_host(keyed_server), rest_host(keyed_server)):
        refused = mlxr("list", host=host)
        assert refused.returncode != 0 and MODEL not in refused.stdout, (host, refused)
        assert "key" in refused.stderr.lower(), (host, refused.stderr)
        assert mlxr("list", host=host, key="wrong").returncode != 0
        assert MODEL in ok(mlxr("list", host=host, key="sekrit")), host


def test_the_unix_socket(tmp_path):
    sock = tmp_path / "mlxr.sock"
    s = Server(tmp_path, "--socket", str(sock))
    try:
        assert MODEL in ok(mlxr("list", host=f"grpc+unix:{sock}"))
        reply = ok(mlxr("run", MODEL, "Hi", "--temperature", "0", "--max-tokens", "8",
                        host=f"grpc+unix://{sock}"))
        assert reply == ok(mlxr("run", MODEL, "Hi", "--temperature", "0", "--max-tokens", "8",
                                host=f"unix:{sock}"))
    finally:
        s.stop()


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_pull_and_rm(tmp_path):
    handler = functools.partial(QuietFiles, directory=str(models_dir()))
    files = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    s = Server(tmp_path, "--allow-insecure-pulls")
    try:
        url = f"http://127.0.0.1:{files.server_address[1]}/{MODEL_FILE}"
        pulled = mlxr("pull", url, host=grpc_host(s))
        ok(pulled)
        assert "success" in pulled.stderr, pulled.stderr
        name = "smollm2-135m-instruct.q4_1:latest"
        assert name in ok(mlxr("list", host=grpc_host(s)))
        ok(mlxr("rm", name, host=grpc_host(s)))
        assert name not in ok(mlxr("list", host=rest_host(s)))
        gone = mlxr("rm", name, host=grpc_host(s))
        assert gone.returncode != 0 and "not found" in gone.stderr.lower(), gone.stderr
    finally:
        s.stop()
        files.shutdown()
