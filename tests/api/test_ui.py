"""The daemon serves the web UI to browsers and keeps Ollama's liveness text for clients."""

import requests


def test_browsers_get_the_ui_and_clients_the_liveness_text(server):
    assert requests.get(server.url + "/").text == "MLXR is running"
    page = requests.get(server.url + "/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower()
    # Client-side routes fall back to the app's index page.
    models = requests.get(server.url + "/ui/models", headers={"Accept": "text/html"})
    assert models.status_code == 200 and "<html" in models.text.lower()
    assert requests.get(server.url + "/ui/assets/missing-file.js").status_code == 404
