"""A local HTTP server that serves the SmolLM2 GGUF and stalls the first
download mid-transfer, for pull tests (kill mid-pull, concurrent pulls)."""

import http.server
import re
import threading

from conftest import MODEL_FILE, models_dir


class SlowGguf(http.server.ThreadingHTTPServer):
    """Serves the GGUF at /crash-smol.gguf with Range support. The first
    download stops after STALL_AT bytes and holds the connection open until
    `release` is set, then sends the rest."""

    STALL_AT = 8 << 20

    def __init__(self):
        super().__init__(("127.0.0.1", 0), SlowGgufHandler)
        self.data = (models_dir() / MODEL_FILE).read_bytes()
        self.ranges: list[str | None] = []
        self.stall = True
        self.release = threading.Event()
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/crash-smol.gguf"

    def close(self):
        self.release.set()
        self.shutdown()
        self.server_close()


class SlowGgufHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        srv: SlowGguf = self.server
        if self.path != "/crash-smol.gguf":
            self.send_error(404)
            return
        srv.ranges.append(self.headers.get("Range"))
        start = 0
        if m := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or ""):
            start = int(m.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(srv.data) - 1}/{len(srv.data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(srv.data) - start))
        self.end_headers()
        try:
            if srv.stall:
                srv.stall = False
                self.wfile.write(srv.data[start:srv.STALL_AT])
                self.wfile.flush()
                srv.release.wait()
                self.wfile.write(srv.data[srv.STALL_AT:])
                return
            self.wfile.write(srv.data[start:])
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass
