"""The daemon serves the web UI to browsers and keeps Ollama's liveness text for clients.

These fail on a binary built without the UI (whose routes answer a "web UI
not built" page): they need the built app's index.html and its assets.
"""

import re

import requests

HTML = {"Accept": "text/html,application/xhtml+xml"}


def app_assets(page: requests.Response) -> tuple[str, str]:
    """The built app's script and stylesheet paths, from its index.html."""
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "not built" not in page.text, f"the UI is not embedded in this binary:\n{page.text}"
    assert '<div id="root"></div>' in page.text, page.text
    script = re.search(r'<script type="module"[^>]* src="(/ui/assets/[^"]+\.js)"', page.text)
    style = re.search(r'<link rel="stylesheet"[^>]* href="(/ui/assets/[^"]+\.css)"', page.text)
    assert script and style, f"no app script or stylesheet in:\n{page.text}"
    return script.group(1), style.group(1)


def test_browsers_get_the_app_and_clients_the_liveness_text(server):
    assert requests.get(server.url + "/").text == "MLXR is running"
    script, style = app_assets(requests.get(server.url + "/", headers=HTML))

    js = requests.get(server.url + script)
    assert js.status_code == 200
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert js.headers["cache-control"] == "public, max-age=31536000, immutable"
    # The bundle holds the app (React and the page components), not a stub.
    assert len(js.content) > 100_000 and "Something went wrong" in js.text

    css = requests.get(server.url + style)
    assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"


def test_client_routes_fall_back_to_the_app(server):
    index = requests.get(server.url + "/", headers=HTML)
    app_assets(index)
    for route in ["/ui", "/ui/", "/ui/chat", "/ui/models", "/ui/settings"]:
        page = requests.get(server.url + route, headers={"Accept": "text/html"})
        assert page.status_code == 200 and page.text == index.text, route
    assert requests.get(server.url + "/ui/assets/missing-file.js").status_code == 404
