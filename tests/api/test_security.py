"""Web pages cannot drive the daemon through a user's browser: a foreign
`Origin` is refused, JSON bodies must be sent as application/json (a page
can send text/plain without a CORS preflight), and on a loopback listener
the `Host` header must name this machine (DNS rebinding). Each refused
request is checked to have changed nothing."""

import hashlib
import json

import pytest
import requests

from conftest import MODEL, MODEL_FILE, Server, models_dir

EVIL = "http://evil.example"
VICTIM = "victim"


def names(server):
    return {m["name"] for m in requests.get(server.url + "/api/tags").json()["models"]}


@pytest.fixture(scope="module")
def victim(server):
    """A registry model (file models cannot be copied or deleted)."""
    path = models_dir() / MODEL_FILE
    digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    with open(path, "rb") as f:
        requests.post(f"{server.url}/api/blobs/{digest}", data=f).raise_for_status()
    r = requests.post(server.url + "/api/create", json={"model": VICTIM, "files": {MODEL_FILE: digest}})
    r.raise_for_status()
    assert f"{VICTIM}:latest" in names(server)
    yield VICTIM
    requests.delete(server.url + "/api/delete", json={"model": VICTIM})


def send(server, method, path, body, content_type="text/plain", origin=None, host=None):
    headers = {"Content-Type": content_type}
    if origin:
        headers["Origin"] = origin
    if host:
        headers["Host"] = host
    return requests.request(method, server.url + path, data=json.dumps(body), headers=headers)


def test_cross_site_text_plain_requests_are_refused_and_change_nothing(server, victim):
    # What a page on evil.example can send without a CORS preflight.
    r = send(server, "POST", "/api/copy", {"source": victim, "destination": "stolen"}, origin=EVIL)
    assert r.status_code == 403, r.text
    message = r.json()["error"]
    assert EVIL in message and "--origins" in message, message

    r = send(server, "DELETE", "/api/delete", {"model": victim}, origin=EVIL)
    assert r.status_code == 403, r.text

    before = requests.get(server.url + "/api/mlxr/config").json()["models"]["keep_alive"]
    r = send(server, "PATCH", "/api/mlxr/config", {"keep_alive": "-1"}, origin=EVIL)
    assert r.status_code == 403, r.text
    assert requests.get(server.url + "/api/mlxr/config").json()["models"]["keep_alive"] == before != "-1"

    assert f"{victim}:latest" in names(server)
    assert "stolen:latest" not in names(server)


def test_a_foreign_origin_is_refused_even_with_a_json_body(server, victim):
    r = send(server, "POST", "/api/copy", {"source": victim, "destination": "stolen"},
             content_type="application/json", origin=EVIL)
    assert r.status_code == 403, r.text
    assert "stolen:latest" not in names(server)
    # OpenAI routes answer in OpenAI's error shape.
    r = send(server, "POST", "/v1/chat/completions", {"model": MODEL, "messages": []},
             content_type="application/json", origin=EVIL)
    assert r.status_code == 403, r.text
    assert r.json()["error"]["type"] == "permission_error"
    assert "--origins" in r.json()["error"]["message"]


def test_json_routes_require_the_json_content_type(server, victim):
    r = send(server, "POST", "/api/copy", {"source": victim, "destination": "stolen"})
    assert r.status_code == 415, r.text
    assert "-H 'Content-Type: application/json'" in r.json()["error"]
    assert "stolen:latest" not in names(server)
    r = send(server, "DELETE", "/api/delete", {"model": victim}, content_type="application/x-www-form-urlencoded")
    assert r.status_code == 415, r.text
    assert f"{victim}:latest" in names(server)
    r = requests.post(server.url + "/v1/completions", data=json.dumps({"model": MODEL, "prompt": "Hi"}))
    assert r.status_code == 415, r.text
    assert "Content-Type" in r.json()["error"]["message"]
    # Parameters and +json types are JSON too.
    r = send(server, "POST", "/api/show", {"model": MODEL}, content_type="application/json; charset=utf-8")
    assert r.status_code == 200, r.text
    r = send(server, "POST", "/api/show", {"model": MODEL}, content_type="application/vnd.mlxr+json")
    assert r.status_code == 200, r.text


def test_loopback_origins_and_clients_without_origin_pass(server):
    for origin in (None, f"http://localhost:{server.port}", "http://127.0.0.1:5173", server.url):
        r = send(server, "POST", "/api/show", {"model": MODEL}, content_type="application/json", origin=origin)
        assert r.status_code == 200, (origin, r.text)


def test_a_rebound_host_name_is_refused(server):
    for host in ("evil.example", f"evil.example:{server.port}", f"localhost.evil.example:{server.port}"):
        r = requests.get(server.url + "/api/tags", headers={"Host": host})
        assert r.status_code == 403, (host, r.text)
        message = r.json()["error"]
        assert "evil.example" in message and "--allowed-hosts" in message, message
    # Refused before any handler runs, on writes too.
    r = send(server, "PATCH", "/api/mlxr/config", {"keep_alive": "-1"},
              content_type="application/json", host=f"evil.example:{server.port}")
    assert r.status_code == 403, r.text
    assert requests.get(server.url + "/api/mlxr/config").json()["models"]["keep_alive"] != "-1"


def test_loopback_host_names_pass(server):
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "localhost", f"ui.localhost:{server.port}"):
        r = requests.get(server.url + "/api/tags", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr-open"),
               "--origins", "http://allowed.example", "--allowed-hosts", "mybox.example")
    yield s
    s.stop()


def test_configured_origins_and_hosts_pass(open_server):
    r = send(open_server, "POST", "/api/show", {"model": MODEL}, content_type="application/json",
             origin="http://allowed.example")
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == "http://allowed.example"
    preflight = requests.options(open_server.url + "/api/show", headers={
        "Origin": "http://allowed.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://allowed.example"
    r = send(open_server, "POST", "/api/show", {"model": MODEL}, content_type="application/json", origin=EVIL)
    assert r.status_code == 403, r.text

    r = requests.get(open_server.url + "/api/tags", headers={"Host": f"mybox.example:{open_server.port}"})
    assert r.status_code == 200, r.text
    r = requests.get(open_server.url + "/api/tags", headers={"Host": "evil.example"})
    assert r.status_code == 403, r.text
