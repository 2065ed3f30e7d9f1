"""`farm serve RUN`: the report of a run on http://127.0.0.1:PORT/, with Approve and Reject buttons.

The page is the static report (farm.report) written to a temporary folder and served from there,
plus three endpoints that change the golden index exactly as the commands do:

    POST /api/approve  {"key": TRACE, "env": false}   farm approve RUN --trace TRACE [--env]
    POST /api/reject   {"key": TRACE, "env": false}   farm reject RUN --trace TRACE [--env]
    POST /api/bulk     {"action": "approve"|"reject", "keys": [TRACE, ...]}    one decision for them all
    POST /api/bulk     {"action": "approve", "status": "fail"}     farm approve RUN --failed
    POST /api/undo     {}                             farm approve --undo --yes

Each answers JSON ``{"ok", "message", "status"}`` (the trace's status afterwards; bulk and undo:
``"statuses": {key: [status, label]}``) with ``"head"`` (the verdict and counts,
farm.report.model.counts_view) so the page refreshes its counts, and rewrites the report, so a
reload shows the new state. A decision approves the bytes the run stored, the very image on the
page; a blank frame only with ``"allow_blank": true`` (as --allow-blank).

Robustness: a request line with a NUL byte is a 400; every connection has a read timeout
(`READ_TIMEOUT`), so a POST whose body is shorter than its Content-Length gets a 400 instead of
holding a handler thread forever; the temporary report folder is removed when the server stops
(Ctrl-C, SIGTERM) and when it cannot start (the port is taken).

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
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from farm import goldens as G
from farm.compare.runs import compare_run, results_for
from farm.compare.status import LABELS
from farm.report.html import write_report
from farm.report.model import counts_view

__all__ = ["ReportServer", "serve"]

MAX_BODY = 64 * 1024
READ_TIMEOUT = 10.0  # seconds a connection may take to send its request (line, headers, body)


class ReportServer:
    """The state behind the server: the run, its goldens, the current results and the report folder."""

    def __init__(self, job, goldens: str | Path, *, by: str | None = None, allow_new: bool = False,
                 folder: str | Path | None = None, token: str | None = None):
        self.job = job
        self.goldens = Path(goldens)
        self.by = G.default_user(by)
        self.allow_new = allow_new
        self.token = token or secrets.token_urlsafe(24)
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

    def answer(self, out: dict, keys=()) -> dict:
        """`out` with the statuses of `keys` and the header's counts (the page refreshes from them)."""
        head = counts_view(self.results)
        head["failed_with_image"] = sum(1 for t in self.results["traces"].values()
                                        if t["status"] == "fail" and t.get("png"))
        statuses = {}
        for k in keys:
            st = self.status_of(k)
            if st is not None:
                statuses[k] = [st, LABELS.get(st, st)]
        if "status" in out and out["status"]:
            out["label"] = LABELS.get(out["status"], out["status"])
        return {**out, "statuses": statuses, "head": head}

    # --- actions (called with self.lock held)
    def approve(self, key: str, env: bool = False, allow_blank: bool = False) -> dict:
        if key not in self.job.traces:
            return {"ok": False, "message": f"{key!r} is not a trace of run {self.job.id}"}
        before = self.index_digest()
        rec, skipped = G.approve(self.goldens, self.job, [key], by=self.by, env_scope=env, allow_blank=allow_blank)
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

    def bulk(self, action: str, keys: list[str] | None = None, status: str | None = None, env: bool = False,
             allow_blank: bool = False) -> dict:
        """One decision on many traces: `keys`, or every trace whose status is `status` (e.g. "fail")."""
        if keys is None:
            keys = sorted(k for k, t in self.results["traces"].items() if t["status"] == status)
        unknown = [k for k in keys if k not in self.job.traces]
        if unknown:
            return {"ok": False, "message": f"{unknown[0]!r} is not a trace of run {self.job.id}"}
        if not keys:
            return {"ok": False, "message": f"no trace is {LABELS.get(status or '', status)}: nothing to do"}
        before = self.index_digest()
        if action == "approve":
            rec, skipped = G.approve(self.goldens, self.job, keys, by=self.by, env_scope=env, allow_blank=allow_blank)
        else:
            rec, skipped = G.reject(self.goldens, self.job, keys, by=self.by, env_scope=env,
                                    reason=f"rejected in farm serve by {self.by}")
        self.recompare(keys, before)
        done = "approved" if action == "approve" else "rejected"
        n = len(rec["changes"]) if rec else 0
        msg = f"{n} trace(s) {done} as {self.by}" + (f"; decision #{rec['id']}" if rec else "")
        if skipped:
            msg += f"; {len(skipped)} skipped: " + "; ".join(skipped)
        return {"ok": rec is not None or not skipped, "message": msg, "log_id": rec["id"] if rec else None,
                "changed": [c["trace"] for c in rec["changes"]] if rec else [], "keys": keys}

    def undo(self) -> dict:
        before = self.index_digest()
        rec, notes = G.undo(self.goldens, by=self.by)
        if rec is None:
            return {"ok": False, "message": "; ".join(notes) or "nothing to undo"}
        self.recompare([c["trace"] for c in rec["changes"]], before)
        msg = f"undid {rec['undoes_action']} #{rec['undoes']} ({len(rec['changes'])} trace(s))"
        if notes:
            msg += "; " + "; ".join(notes)
        return {"ok": True, "message": msg, "keys": [c["trace"] for c in rec["changes"]]}

    def close(self) -> None:
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


TOKEN_COOKIE = "farm_token"


def _handler(state: ReportServer, allowed_hosts: set[str] | None):
    """`allowed_hosts` None: served beyond loopback (a container's interface), where every request
    must carry the token (the ?token= of the link once, then an HttpOnly cookie) instead."""
    class Handler(BaseHTTPRequestHandler):
        server_version = "modelfarm"
        protocol_version = "HTTP/1.1"
        timeout = READ_TIMEOUT  # socket timeout: a slow or short request never holds the thread forever

        def log_message(self, fmt, *args):  # quiet: one line per decision is printed instead
            pass

        def _host_ok(self) -> bool:
            if allowed_hosts is None:
                return True  # the token guards every request instead (a port mapping changes the Host)
            host = (self.headers.get("Host") or "").strip().lower()
            return host in allowed_hosts

        def _token_ok(self) -> bool:
            if allowed_hosts is not None:
                return True  # loopback: pages are open, decisions need the page's token (below)
            cookies = dict(c.strip().split("=", 1) for c in (self.headers.get("Cookie") or "").split(";") if "=" in c)
            given = self.headers.get("X-Farm-Token") or cookies.get(TOKEN_COOKIE, "")
            return secrets.compare_digest(given, state.token)

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
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            if "\x00" in path:
                return self._send(HTTPStatus.BAD_REQUEST, b"bad path\n", "text/plain")
            if allowed_hosts is None:
                query = dict(q.split("=", 1) for q in parts.query.split("&") if "=" in q)
                if secrets.compare_digest(unquote(query.get("token", "")), state.token):
                    return self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {
                        "Location": parts.path or "/",
                        "Set-Cookie": f"{TOKEN_COOKIE}={state.token}; HttpOnly; SameSite=Strict; Path=/"})
                if not self._token_ok():
                    return self._send(HTTPStatus.UNAUTHORIZED, b"open the link with ?token=... (FARM_SERVE_TOKEN)\n",
                                      "text/plain")
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
                raw = self.rfile.read(n)
            except (TimeoutError, OSError):
                raw = None
            if raw is None or len(raw) < n:
                self.close_connection = True
                return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": "the body is shorter than its"
                                                                                   " Content-Length"})
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": f"bad JSON: {e}"})
            path = urlsplit(self.path).path
            action = {"/api/approve": "approve", "/api/reject": "reject", "/api/undo": "undo",
                      "/api/bulk": "bulk"}.get(path)
            if action is None:
                return self._json(HTTPStatus.NOT_FOUND, {"ok": False, "message": "no such endpoint"})
            key = body.get("key")
            if action in ("approve", "reject") and not isinstance(key, str):
                return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": "say which trace: {\"key\": ...}"})
            if action == "bulk":
                keys, status = body.get("keys"), body.get("status")
                ok = body.get("action") in ("approve", "reject") and (
                    (isinstance(keys, list) and all(isinstance(k, str) for k in keys) and status is None)
                    or (keys is None and status == "fail"))
                if not ok:
                    return self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "message": "bulk: {\"action\":"
                                       " \"approve\"|\"reject\", \"keys\": [...]} or {\"action\": ...,"
                                       " \"status\": \"fail\"}"})
            env, allow_blank = bool(body.get("env")), bool(body.get("allow_blank"))
            try:
                with state.lock:
                    if action == "undo":
                        out = state.undo()
                        out = state.answer(out, out.get("keys", []))
                    elif action == "bulk":
                        out = state.bulk(body["action"], body.get("keys"), body.get("status"), env=env,
                                         allow_blank=allow_blank)
                        out = state.answer(out, out.get("keys", []))
                    elif action == "approve":
                        out = state.answer(state.approve(key, env=env, allow_blank=allow_blank), [key])
                    else:
                        out = state.answer(state.reject(key, env=env), [key])
            except G.GoldenError as e:
                return self._json(HTTPStatus.CONFLICT, {"ok": False, "message": str(e)})
            what = key or body.get("action") or ""
            print(f"farm serve: {action} {what}: {out['message']}", file=sys.stderr, flush=True)
            self._json(HTTPStatus.OK, out)

    return Handler


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def make_server(state: ReportServer, host: str = "127.0.0.1", port: int = 0, *,
                remote_token: str | None = None) -> ThreadingHTTPServer:
    """A server for `state` on host:port. Loopback: Host headers are checked and decisions need the
    page's token. Any other address (a container's interface) only with `remote_token`
    (FARM_SERVE_TOKEN), which then guards every request, pages included."""
    remote = not is_loopback(host)
    if remote and not remote_token:
        raise ValueError(f"farm serve binds {host!r} (beyond loopback) only with FARM_SERVE_TOKEN set: its buttons"
                         f" change the golden index")
    if remote and remote_token != state.token:
        raise ValueError("the server's token must be FARM_SERVE_TOKEN when it binds beyond loopback")
    bind = "127.0.0.1" if host == "localhost" else host
    server_cls = ThreadingHTTPServer
    if ":" in bind:
        import socket

        class V6(ThreadingHTTPServer):
            address_family = socket.AF_INET6

        server_cls = V6
    server = server_cls((bind, port), _handler(state, set()))
    if remote:
        server.RequestHandlerClass = _handler(state, None)
        server.daemon_threads = True
        return server
    real_port = server.server_address[1]
    names = {bind, "localhost", "127.0.0.1", f"[{bind}]"}
    allowed = {f"{n}:{real_port}" for n in names} | names
    server.RequestHandlerClass = _handler(state, allowed)
    server.daemon_threads = True
    return server


def serve(job, goldens: str | Path, *, host: str = "127.0.0.1", port: int = 8765, by: str | None = None,
          allow_new: bool = False, ready=None) -> None:
    """Serve until interrupted. `ready(url)` is called once the server listens. Beyond loopback
    (`--host 0.0.0.0` in a container) only with FARM_SERVE_TOKEN, which every request must carry."""
    token = os.environ.get("FARM_SERVE_TOKEN") or None
    if not is_loopback(host) and not token:
        raise ValueError(f"farm serve binds {host!r} (beyond loopback) only with FARM_SERVE_TOKEN set: its buttons"
                         f" change the golden index")
    state = ReportServer(job, goldens, by=by, allow_new=allow_new, token=token if not is_loopback(host) else None)
    try:
        server = make_server(state, host, port, remote_token=state.token if not is_loopback(host) else None)
    except BaseException:  # the port is taken (OSError), not loopback (ValueError): no temp folder left
        state.close()
        raise
    url = f"http://{'[' + host + ']' if ':' in host else host}:{server.server_address[1]}/"

    def stop(signum, frame):  # SIGTERM (kill, systemd, CI): stop like Ctrl-C, cleaning up
        raise KeyboardInterrupt

    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, stop)
    try:
        if ready:
            ready(url)
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        state.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
