"""A hostile file host for the remote-model reads (issue 33), served over https on loopback only.

`HostileHost()` listens on 127.0.0.1 (any free port) with the self-signed certificate in hostile_host.pem (for
127.0.0.1 and localhost; a test's browser context opens with ignore_https_errors). Its origin is
https://127.0.0.1:PORT; https://localhost:PORT is the same server seen as another origin (the target of its
redirects). Each path misbehaves in one way, over the GGUF header of remote_fixtures.tiny_header() (1.9 MB, the
"file" being that header followed by zeros):

    /ok.gguf               answers ranges correctly (206, Content-Range, CORS)
    /ignores-range.gguf    answers every range request with 200 and the whole 4.9 GB file from byte 0
    /wrong-range.gguf      206, but its Content-Range (and body) start 4096 bytes after the byte asked for
    /redirect.gguf         302 to https://localhost:PORT/elsewhere/x.gguf, which does not allow CORS
    /redirect-ok.gguf      302 to https://localhost:PORT/cdn/x.gguf, which does (a Hub file on its CDN)
    /cut-body.gguf         206 with the right headers, then closes after 300,000 bytes of the 1 MiB asked for
    /cut-head.gguf         closes the connection in the middle of its HTTP headers (GET and HEAD)
    /drip.gguf             206 with the right headers, then one byte a second
    /claims-50gb.gguf      206 for bytes 0-1048575, with Content-Length: 53687091200, and a body without end
    /claims-50gb.json      200 with Content-Length: 53687091200 and a body without end (a "config.json")

Bounded in time: every body without end stops after MAX_STREAM_S or MAX_STREAM_BYTES, the drip after DRIP_S,
and every socket times out after SOCKET_TIMEOUT_S. `sent(path)` is what the server wrote for a path (bytes of
body, all requests), `requests(path)` the Range headers it got.
"""

from __future__ import annotations

import http.server
import socketserver
import ssl
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import remote_fixtures as rf  # noqa: E402

CERT = Path(__file__).with_name("hostile_host.pem")
FILE_SIZE = rf.TINY_SIZE  # what a file claims to weigh (its header, then zeros)
CLAIM = 50 * 1024**3  # 53,687,091,200 bytes
SHIFT = 4096  # how far /wrong-range.gguf's answers are off
CUT_AFTER = 300_000
DRIP_S = 8.0
MAX_STREAM_S = 15.0
MAX_STREAM_BYTES = 256 << 20
SOCKET_TIMEOUT_S = 10.0
CHUNK = 64 << 10


def _file_bytes(start: int, end: int) -> bytes:
    """Bytes start..end (inclusive) of the file: its header, then zeros."""
    head = rf.tiny_header()
    chunk = head[start : end + 1]
    return chunk + b"\0" * (end + 1 - start - len(chunk))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    host: HostileHost  # set on the subclass made per server

    def setup(self):
        self.request.settimeout(SOCKET_TIMEOUT_S)
        self.request.do_handshake()
        super().setup()

    def log_message(self, *args):
        pass

    # -- helpers --------------------------------------------------------------------------------------------
    def _cors(self, allow=True):
        if allow:
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Expose-Headers", "Content-Range, Content-Length, Accept-Ranges")

    def _range(self):
        rng = self.headers.get("Range")
        if not rng or not rng.startswith("bytes="):
            return None, None
        a, _, b = rng.removeprefix("bytes=").partition("-")
        return int(a), (int(b) if b else FILE_SIZE - 1)

    def _head(self, status, headers, cors=True):
        self.send_response(status)
        self._cors(cors)
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.send_header("Connection", "close")
        self.end_headers()

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the reader stopped reading: closed on its side
            return False
        self.host.count(self.path, len(data))
        return True

    def _stream(self, first: bytes):
        """first, then zeros until the reader closes, MAX_STREAM_BYTES or MAX_STREAM_S."""
        t0, n = time.monotonic(), 0
        data = first
        while n < MAX_STREAM_BYTES and time.monotonic() - t0 < MAX_STREAM_S:
            if not self._write(data):
                return
            n += len(data)
            data = b"\0" * CHUNK

    def _ranged(self, start, end, **extra):
        body = _file_bytes(start, end)
        self._head(
            206,
            {"Content-Range": f"bytes {start}-{end}/{FILE_SIZE}", "Content-Length": len(body), **extra},
        )
        self._write(body)

    def _cut_head(self):
        self._write(b"HTTP/1.1 206 Partial Content\r\nAccess-Control-Allow-Origin: *\r\nContent-Ty")
        self.close_connection = True

    # -- requests -------------------------------------------------------------------------------------------
    def do_OPTIONS(self):  # a preflight, should the browser send one for the Range header
        self._head(204, {"Access-Control-Allow-Headers": "Range", "Content-Length": 0})

    def do_HEAD(self):
        if self.path == "/cut-head.gguf":  # (the page asks again with HEAD to tell a CORS refusal from this)
            self._cut_head()
            return
        self._head(200, {"Content-Length": FILE_SIZE}, cors=not self.path.startswith("/elsewhere/"))

    def do_GET(self):
        self.host.asked(self.path, self.headers.get("Range"))
        start, end = self._range()
        path = self.path
        if path in ("/ok.gguf", "/cdn/x.gguf") and start is not None:
            self._ranged(start, end)
        elif path == "/elsewhere/x.gguf":  # no Access-Control-Allow-Origin: the browser hides the answer
            body = _file_bytes(start or 0, end or CHUNK)
            self._head(206, {"Content-Length": len(body)}, cors=False)
            self._write(body)
        elif path in ("/redirect.gguf", "/redirect-ok.gguf"):
            to = "elsewhere" if path == "/redirect.gguf" else "cdn"
            self._head(302, {"Location": f"https://localhost:{self.host.port}/{to}/x.gguf", "Content-Length": 0})
        elif path == "/ignores-range.gguf":
            self._head(200, {"Content-Length": FILE_SIZE, "Accept-Ranges": "none"})
            self._stream(rf.tiny_header())
        elif path == "/wrong-range.gguf" and start is not None:
            a, b = start + SHIFT, end + SHIFT
            body = _file_bytes(a, b)
            self._head(206, {"Content-Range": f"bytes {a}-{b}/{FILE_SIZE}", "Content-Length": len(body)})
            self._write(body)
        elif path == "/cut-body.gguf" and start is not None:
            body = _file_bytes(start, end)
            self._head(206, {"Content-Range": f"bytes {start}-{end}/{FILE_SIZE}", "Content-Length": len(body)})
            self._write(body[:CUT_AFTER])
            self.close_connection = True
        elif path == "/cut-head.gguf":
            self._cut_head()
        elif path == "/drip.gguf" and start is not None:
            body = _file_bytes(start, end)
            self._head(206, {"Content-Range": f"bytes {start}-{end}/{FILE_SIZE}", "Content-Length": len(body)})
            t0 = time.monotonic()
            for i in range(len(body)):
                if time.monotonic() - t0 > DRIP_S or not self._write(body[i : i + 1]):
                    break
                time.sleep(1.0)
        elif path == "/claims-50gb.gguf" and start is not None:
            self._head(206, {"Content-Range": f"bytes {start}-{end}/{CLAIM}", "Content-Length": CLAIM})
            self._stream(_file_bytes(start, end))
        elif path == "/claims-50gb.json":
            self._head(200, {"Content-Length": CLAIM, "Content-Type": "application/json"})
            self._stream(b'{"model_type": "llama", "pad": "' + b" " * CHUNK)
        else:
            self._head(404, {"Content-Length": 0})
        self.close_connection = True


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler, ctx):
        super().__init__(("127.0.0.1", 0), handler)
        self.ctx = ctx

    def handle_error(self, request, client_address):
        pass  # a browser that drops a connection (or rejects the certificate once before it is told not to)

    def get_request(self):
        sock, addr = self.socket.accept()
        # the TLS handshake happens in the request's own thread (the handler's setup), never in the accept loop
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr


class HostileHost:
    def __init__(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT)
        self._lock = threading.Lock()
        self._sent: dict[str, int] = {}
        self._asked: dict[str, list] = {}
        handler = type("Handler", (_Handler,), {"host": self})
        self.server = _Server(handler, ctx)
        self.port = self.server.server_address[1]
        self.origin = f"https://127.0.0.1:{self.port}"
        self.other_origin = f"https://localhost:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"{self.origin}{path}"

    def count(self, path: str, n: int) -> None:
        with self._lock:
            self._sent[path] = self._sent.get(path, 0) + n

    def asked(self, path: str, rng) -> None:
        with self._lock:
            self._asked.setdefault(path, []).append(rng)

    def sent(self, path: str) -> int:
        """Body bytes (and, for /cut-head.gguf, header bytes) written for path, all requests."""
        with self._lock:
            return self._sent.get(path, 0)

    def requests(self, path: str) -> list:
        with self._lock:
            return list(self._asked.get(path, []))

    def close(self):
        self.server.shutdown()
        self.server.server_close()
