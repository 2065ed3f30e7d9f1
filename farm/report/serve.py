"""`farm serve RUN`: the report of a run on http://127.0.0.1:PORT/, with Approve and Reject buttons.

The page is the static report (farm.report) written to a temporary folder and served from there,
plus three endpoints that change the golden index exactly as the commands do:

    POST /api/approve  {"key": TRACE, "env": false}   farm approve RUN --trace TRACE [--env]
    POST /api/reject   {"key": TRACE, "env": false}   farm reject RUN --trace TRACE [--env]
    POST /api/undo     {}                             farm approve --undo

Each answers JSON ``{"ok", "message", "status"}`` (the trace's status afterwards) and rewrites the
report, so a reload shows the new state. A decision approves the bytes the run stored, the very
image on the page.

Only this machine can reach it: the server binds 127.0.0.1 (or another loopback address given
with --host), answers only requests whose Host header names that address or ``localhost``
(DNS rebinding), and takes a POST only with the page's random token in an ``X-Farm-Token``
header (another web page the browser has open cannot set it without a CORS preflight, which this
server never grants).
"""

from __future__ import annotations

import ipaddress
import json
import mimetypes
import secrets
import shutil
import sys
import tempfile
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from farm import goldens as G
from farm.compare.runs import compare_run, results_for
from farm.report.html import write_report

__all__ = ["ReportServer", "serve"]

MAX_BODY = 64 * 1024


class ReportServer:
    """The state behind the server: the run, its goldens, the current results and the report folder."""

    def __init__(self, job, goldens: str | Path, *, by: str | None = None, allow_new: bool = False,
                 folder: str | Path | None = None):
        self.job = job
        self.goldens = Path(goldens)
        self.by = G.default_user(by)
        self.allow_new = allow_new
        self.token = secrets.token_urlsafe(24)
        self._own_folder = folder is None
        self.folder = Path(folder or tempfile.mkdtemp(prefix="farm-serve-"))
        self.lock = threading.Lock()
        self.results = results_for(job, self.goldens, allow_new=allow_new)
        self.write()

    def write(self) -> None:
        write_report(self.results, self.folder, serve={"token": self.token})

    def index_digest(self) -> str:
        return G.GoldenIndex.load(self.goldens).digest()

    def recompare(self, keys: list[str] | None = None, before: str | None = None) -> None:
        """Compare `keys` again (all when None). `before`: the index digest before this server's
        change; when it is not the one the results were made with, someone else changed the
        index too, and the saved results are marked for a full comparison next time."""
        current = before is not None and before == self.results.get("goldens_digest")
        self.results = compare_run(self.job, self.goldens, allow_new=self.allow_new, keys=keys,
                                   previous=self.results if keys is not None else None, rest_current=current)
        self.write()

    def status_of(self, key: str) -> str | None:
        t = self.results["traces"].get(key)
        return t["status"] if t else None

    # --- actions (called with self.lock held)
    def approve(self, key: str, env: bool = False) -> dict:
        if key not in self.job.traces:
            return {"ok": False, "message": f"{key!r} is not a trace of run {self.job.id}"}
        before = self.index_digest()
        rec, skipped = G.approve(self.goldens, self.job, [key], by=self.by, env_scope=env)
        self.recompare([key], before)
        if rec is None:
            msg = "; ".join(skipped) or "already approved: nothing changed"
            return {"ok": not skipped, "message": msg, "status": self.status_of(key)}
        ch = rec["changes"][0]
        scope = "generic" if ch["env"] == G.GENERIC else f"for {ch['env']}"
        digest = ch["after"]["approved"][-1]["digest"]
        return {"ok": True, "status": self.status_of(key), "log_id": rec["id"],
                "message": f"approved {digest[:12]}... ({scope}) as {self.by}; decision #{rec['id']}"}

    def reject(self, key: str, env: bool = False) -> dict:
        if key not in self.job.traces:
            return {"ok": False, "message": f"{key!r} is not a trace of run {self.job.id}"}
        before = self.index_digest()
        rec, skipped = G.reject(self.goldens, self.job, [key], by=self.by, env_scope=env,
                                reason=f"rejected in farm serve by {self.by}")
        self.recompare([key], before)
        if rec is None:
            msg = "; ".join(skipped) or "already rejected: nothing changed"
            return {"ok": not skipped, "message": msg, "status": self.status_of(key)}
        return {"ok": True, "status": self.status_of(key), "log_id": rec["id"],
                "message": f"rejected as {self.by}; decision #{rec['id']}"}

    def undo(self) -> dict:
        before = self.index_digest()
        rec, notes = G.undo(self.goldens, by=self.by)
        if rec is None:
            return {"ok": False, "message": "; ".join(notes) or "nothing to undo"}
        self.recompare([c["trace"] for c in rec["changes"]], before)
        msg = f"undid {rec['undoes_action']} #{rec['undoes']} ({len(rec['changes'])} trace(s))"
        if notes:
            msg += "; " + "; ".join(notes)
        return {"ok": True, "message": msg}

    def close(self) -> None:
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def _handler(state: ReportServer, allowed_hosts: set[str]):
    class Handler(BaseHTTPRequestHandler):
        server_version = "modelfarm"
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: one line per decision is printed instead
            pass

        def _host_ok(self) -> bool:
            host = (self.headers.get("Host") or "").strip().lower()
            return host in allowed_hosts

        def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, code: int, obj: dict) -> None:
            self._send(code, json.dumps(obj).encode("utf-8"), "application/json")

        def do_HEAD(self):  # noqa: N802
            self.do_GET()

        def do_GET(self):  # noqa: N802
            if not self._host_ok():
                return self._send(HTTPStatus.MISDIRECTED_REQUEST, b"wrong Host\n", "text/plain")
            path = unquote(urlsplit(self.path).path)
            if path in ("/", "/index.html"):
                path = "/index.html"
            if path == "/favicon.ico":
                return self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            root = state.folder.resolve()
            target = (root / path.lstrip("/")).resolve()
            if not target.is_relative_to(root) or not target.is_file():
                return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
                ctype += "; charset=utf-8"
            with state.lock:
                body = target.read_bytes()
            self._send(HTTPStatus.OK, body, ctype)

        def do_POST(self):  # noqa: N802
            if not self._host_ok():
                return self._json(HTTPStatus.MISDIRECTED_REQUEST, {"ok": False, "message": "wrong Host"})
            if not secrets.compare_digest(self.headers.get("X-Farm-Token", ""), state.token):
                return self._json(HTTPStatus.FORBIDDEN, {"ok": False, "message": "missing or wrong X-Farm-Token"})
            if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
                return self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"ok": False, "message": "send JSON"})
            try:
                n = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                n = -1
            if not 0 <= n <= MAX_BODY:
                return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": "bad Content-Length"})
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": f"bad JSON: {e}"})
            path = urlsplit(self.path).path
            action = {"/api/approve": "approve", "/api/reject": "reject", "/api/undo": "undo"}.get(path)
            if action is None:
                return self._json(HTTPStatus.NOT_FOUND, {"ok": False, "message": "no such endpoint"})
            key = body.get("key")
            if action != "undo" and not isinstance(key, str):
                return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": "say which trace: {\"key\": ...}"})
            try:
                with state.lock:
                    if action == "undo":
                        out = state.undo()
                    else:
                        out = getattr(state, action)(key, env=bool(body.get("env")))
            except G.GoldenError as e:
                return self._json(HTTPStatus.CONFLICT, {"ok": False, "message": str(e)})
            print(f"farm serve: {action} {key or ''}: {out['message']}", file=sys.stderr, flush=True)
            self._json(HTTPStatus.OK, out)

    return Handler


def _check_loopback(host: str) -> None:
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = host == "localhost"
    if not ok:
        raise ValueError(f"farm serve binds loopback addresses only (127.0.0.1, ::1, localhost), not {host!r}:"
                         f" its buttons change the golden index")


def make_server(state: ReportServer, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    _check_loopback(host)
    bind = "127.0.0.1" if host == "localhost" else host
    server_cls = ThreadingHTTPServer
    if ":" in bind:
        import socket

        class V6(ThreadingHTTPServer):
            address_family = socket.AF_INET6

        server_cls = V6
    server = server_cls((bind, port), _handler(state, set()))
    real_port = server.server_address[1]
    names = {bind, "localhost", "127.0.0.1", f"[{bind}]"}
    allowed = {f"{n}:{real_port}" for n in names} | names
    server.RequestHandlerClass = _handler(state, allowed)
    server.daemon_threads = True
    return server


def serve(job, goldens: str | Path, *, host: str = "127.0.0.1", port: int = 8765, by: str | None = None,
          allow_new: bool = False, ready=None) -> None:
    """Serve until interrupted. `ready(url)` is called once the server listens."""
    state = ReportServer(job, goldens, by=by, allow_new=allow_new)
    server = make_server(state, host, port)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{server.server_address[1]}/"
    try:
        if ready:
            ready(url)
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        state.close()
