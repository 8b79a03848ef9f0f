"""`mlxr serve --socket PATH`: the socket is the owner's only, a second
daemon on the same path fails without taking the first one's socket, a
stale socket is replaced and any other file at the path is left alone."""

import os
import socket
import stat
import subprocess

import pytest

from conftest import MODEL, MODEL_FILE, ROOT, Server, free_port, models_dir

BINARY = os.environ.get("MLXR_BIN", str(ROOT / "target/release/mlxr"))


def mlxr(*args, host):
    return subprocess.run([BINARY, *args], env=dict(os.environ, MLXR_HOST=f"unix:{host}"),
                          capture_output=True, text=True, timeout=120)


def serve_once(tmp_path, path):
    """A second `mlxr serve --socket PATH` that is expected to exit."""
    return subprocess.run([BINARY, "serve", "--home", str(tmp_path / "other-home"),
                           "--host", "127.0.0.1:0", "--socket", str(path)],
                          capture_output=True, text=True, timeout=120)


def raw_get(path, request_path, host):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(path))
        s.sendall(f"GET {request_path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.decode()


@pytest.fixture(scope="module")
def sock_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlxr-sock")
    path = tmp / "mlxr.sock"
    s = Server(tmp, "--socket", str(path))
    s.socket = path
    yield s
    s.stop()


def test_the_socket_is_private(sock_server):
    mode = os.stat(sock_server.socket).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600, oct(stat.S_IMODE(mode))
    listed = mlxr("list", host=sock_server.socket)
    assert listed.returncode == 0 and MODEL in listed.stdout, listed


def test_the_socket_needs_no_host_check(sock_server):
    # A browser cannot reach the socket, so any Host is fine there.
    response = raw_get(sock_server.socket, "/api/version", "evil.example")
    assert response.startswith("HTTP/1.1 200"), response


def test_a_second_daemon_does_not_take_a_live_socket(sock_server, tmp_path):
    second = serve_once(tmp_path, sock_server.socket)
    assert second.returncode != 0
    assert f"another daemon is listening on {sock_server.socket}" in second.stderr, second.stderr
    listed = mlxr("list", host=sock_server.socket)
    assert listed.returncode == 0 and MODEL in listed.stdout, listed
    assert sock_server.alive()


def test_a_stale_socket_is_replaced_and_removed_at_shutdown(tmp_path):
    path = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # bound, never listening: what a killed daemon leaves
    server = Server(tmp_path, "--socket", str(path))
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        listed = mlxr("list", host=path)
        assert listed.returncode == 0 and MODEL in listed.stdout, listed
    finally:
        server.stop()
    assert server.proc.returncode == 0
    assert not path.exists()


def test_a_file_that_is_not_a_socket_is_left_alone(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me")
    run = serve_once(tmp_path, path)
    assert run.returncode != 0
    assert "not a socket" in run.stderr and str(path) in run.stderr, run.stderr
    assert path.read_text() == "keep me"


def test_an_unknown_socket_group_is_a_clear_error(tmp_path):
    path = tmp_path / "g.sock"
    run = subprocess.run([BINARY, "serve", "--home", str(tmp_path / "home"), "--host", "127.0.0.1:0",
                          "--socket", str(path), "--socket-group", "no-such-group-mlxr"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "unknown group 'no-such-group-mlxr'" in run.stderr, run.stderr
    assert not path.exists()


def test_no_tcp_listens_on_the_socket_only(tmp_path):
    path = tmp_path / "only.sock"
    port = free_port()
    proc = subprocess.Popen([BINARY, "serve", "--home", str(tmp_path / "home"), "-m", str(models_dir() / MODEL_FILE),
                             "--name", MODEL, "--host", f"127.0.0.1:{port}", "--socket", str(path), "--no-tcp"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "no TCP listener" in line:
                break
        assert proc.poll() is None, "".join(lines)
        assert not any("listening on http://" in l for l in lines), "".join(lines)
        assert raw_get(path, "/api/version", "localhost").startswith("HTTP/1.1 200")
        listed = mlxr("list", host=path)
        assert listed.returncode == 0 and MODEL in listed.stdout, listed
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0
    assert not path.exists()


def test_no_tcp_needs_a_socket(tmp_path):
    run = subprocess.run([BINARY, "serve", "--home", str(tmp_path / "home"), "--no-tcp"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "--socket" in run.stderr, run.stderr
    config = tmp_path / "server.toml"
    config.write_text("no_tcp = true\n")
    run = subprocess.run([BINARY, "serve", "--home", str(tmp_path / "home"), "--config", str(config)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "no_tcp needs a socket" in run.stderr, run.stderr
