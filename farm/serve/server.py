"""`farm serve RUN`: the report of a run on http://127.0.0.1:PORT/, with Approve and Reject buttons.

The page is the static report (farm.report) written to a temporary folder and served from there,
plus three endpoints that change the golden index exactly as the commands do:

    POST /api/approve  {"key": TRACE, "env": false}   farm approve RUN --trace TRACE [--env]
    POST /api/reject   {"key": TRACE, "env": false}   farm reject RUN --trace TRACE [--env]
    POST /api/bulk     {"action": "approve"|"reject", "keys": [TRACE, ...]}    one decision for them all
    POST /api/bulk     {"action": "approve", "status": "fail"}     farm approve RUN --failed
    POST /api/undo     {}                             farm approve --undo --yes
    GET  /api/state                                   the header and index digest, after catching up

Each answers JSON ``{"ok", "message", "status"}`` (the trace's status afterwards; bulk and undo:
``"statuses": {key: [status, label]}``) with ``"head"`` (everything in the header a decision
changes: verdict, counts and filter labels, problem lines, bulk commands; farm.report.model.counts_view)
so the page refreshes it in place, and rewrites the report, so a reload shows the new state.

Never stale: before every decision, on every page load and on the page's poll of /api/state (every
few seconds while it is visible), the server catches up with the golden index
(farm.serve.index_watch): the traces whose lines changed since its results, whoever changed them (a
`farm approve --undo` in a terminal), are compared again, the report rewritten, and the page told
("elsewhere" / "changed": it shows a banner and the new statuses). So "Approve all failed" always
means the traces failed now, and the comparison the server saves is the one `farm compare` would make.

A decision approves the bytes the run stored, the very image on the
page; a blank frame only with ``"allow_blank": true`` (as --allow-blank).

Robustness: a request line with a NUL byte is a 400; a JSON body is at most `MAX_BODY` bytes and
`MAX_DEPTH` levels deep (checked before it is parsed: a 400, never a RecursionError); tokens are
compared as bytes (`hmac.compare_digest`), so a non-ASCII one is simply wrong. At most
`MAX_CONNECTIONS` connections have a handler thread at a time (`LimitedServer`): a client gets
`READ_TIMEOUT` seconds in all to send its request (line, headers, body; again between the requests
of a kept-alive connection), then it is dropped, and when every slot is taken a new connection
drops the connection that has waited longest for its client's bytes, so slow clients (slowloris)
can neither pile up threads nor keep a quick request out. A client that does not read its answers
waits the same way (its turn to take them: `_send`), and a connection serves at most
`MAX_REQUESTS_PER_CONNECTION` requests, so 40 connections pipelining thousands of GETs without
reading cannot keep a normal GET waiting (issue 34 item 9). The temporary report folder is removed
when the server stops (Ctrl-C, SIGTERM) and when it cannot start (the port is taken).

Only this machine can reach it: the server binds 127.0.0.1 (or another loopback address given
with --host), answers only requests whose Host header names that address or ``localhost``
(DNS rebinding), and takes a POST only with the page's token in an ``X-Farm-Token`` header
(another web page the browser has open cannot set it without a CORS preflight, which this server
never grants), and refuses, token or not, a POST whose Origin (else Referer) is not this server or
whose Sec-Fetch-Site is not same-origin (`_same_origin`).
The token is random per start, or FARM_SERVE_TOKEN when that is set: then, on any
bind (loopback too), every request needs it, pages included (the link's ``?token=`` once, then an
HttpOnly cookie), because the page carries the token for its POSTs.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import mimetypes
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from farm import goldens as G
from farm.compare.runs import compare_run, results_for
from farm.compare.status import LABELS
from farm.environment import env_str
from farm.report.html import write_report
from farm.report.model import counts_view
from farm.serve.index_watch import IndexWatch
from farm.settings import SettingError

__all__ = ["LimitedServer", "ReportServer", "make_server", "serve", "serve_token"]

MAX_BODY = 64 * 1024
MAX_DEPTH = 32  # nesting of a JSON body (the endpoints take flat objects; json.loads recurses per level)
READ_TIMEOUT = 10.0  # seconds a connection may take to send its request (line, headers, body)
MAX_CONNECTIONS = 32  # connections with a handler thread at a time
MAX_REQUESTS_PER_CONNECTION = 100  # then the connection closes: pipelined thousands cannot hold a slot


def same_token(given: str, token: str) -> bool:
    """Constant-time comparison of a token as bytes: any text (a non-ASCII header) is just wrong."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass"))


def serve_token(environ=None) -> str | None:
    """FARM_SERVE_TOKEN, checked: it travels in a header and a cookie, so printable ASCII without
    spaces, quotes, ',', ';' or '\\' (a SettingError naming the variable, never the value)."""
    token = env_str("FARM_SERVE_TOKEN", environ)  # farm.environment reads FARM_* (unset or empty: None)
    if token is not None and not all(33 <= ord(c) <= 126 and c not in "\"',;\\" for c in token):
        raise SettingError(f"FARM_SERVE_TOKEN must be printable ASCII without spaces, quotes, ',', ';' or '\\'"
                           f" (it is sent as a header and a cookie); the one set has {len(token)} character(s)"
                           f" and is not")
    return token


def json_too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when `raw` (JSON text) nests arrays/objects deeper than `limit` (strings skipped)."""
    depth, in_str, escaped = 0, False, False
    for b in raw:
        if in_str:
            if escaped:
                escaped = False
            elif b == 0x5C:  # backslash
                escaped = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif b in (0x5D, 0x7D):
            depth -= 1
    return False


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
        self.watch = IndexWatch(self.goldens)
        index, digest = self.watch.look()
        self.results = results_for(job, self.goldens, allow_new=allow_new)
        if self.results.get("goldens_digest") == digest:
            self.watch.saw(index, digest)
        self.caught: list[str] = []  # traces the last catch_up compared again (the page refreshes them)
        if not self.catch_up():
            self.write()

    def write(self) -> None:
        write_report(self.results, self.folder, serve={"token": self.token, "digest": self.digest()})

    def digest(self) -> str | None:
        """The digest of the golden index the results are current with (the page keeps it to tell a
        change made elsewhere from its own)."""
        return self.watch.seen[0] if self.watch.seen else None

    def catch_up(self, cheap: bool = False) -> list[str]:
        """Compare again every trace whose golden lines changed since the results were made, by this
        server or anyone else (a `farm approve` in a terminal), and rewrite the report when some did;
        returns their keys. `cheap`: trust the index file's stat (page loads and the page's polls)."""
        if cheap and self.watch.quiet():
            return []
        changed: list[str] = []
        for _ in range(3):  # the index may change again while a comparison runs: look once more
            index, digest = self.watch.look()
            keys = self.watch.changes(index, digest)
            if keys == set():
                self.watch.saw(index, digest)  # the same lines: keep the stat, to skip reading next time
                break
            if keys is not None and keys <= self.job.traces.keys():
                self.results = compare_run(self.job, self.goldens, allow_new=self.allow_new, keys=sorted(keys),
                                           previous=self.results)
            else:  # nothing seen yet, or a line of a legacy key: everything
                keys = set(self.job.traces)
                self.results = compare_run(self.job, self.goldens, allow_new=self.allow_new)
            changed += sorted(keys - set(changed))
            self.watch.saw(index, digest)  # compared against `index` or newer: the next look tells
        else:
            self.watch.forget()  # still changing: compare everything next time
        if changed:
            self.write()
        self.caught = list(dict.fromkeys([*self.caught, *changed]))
        return changed

    def status_of(self, key: str) -> str | None:
        t = self.results["traces"].get(key)
        return t["status"] if t else None

    def answer(self, out: dict, keys=()) -> dict:
        """`out` with the statuses of `keys` and of every trace compared again meanwhile (a decision made
        elsewhere), the header as the page shows it (farm.report.model.counts_view) and the index
        digest the page is now current with: the page refreshes all of it in place."""
        statuses = {}
        for k in dict.fromkeys([*keys, *self.caught]):
            st = self.status_of(k)
            if st is not None:
                statuses[k] = [st, LABELS.get(st, st)]
        if "status" in out and out["status"]:
            out["label"] = LABELS.get(out["status"], out["status"])
        self.caught = []
        return {**out, "statuses": statuses, "head": counts_view(self.results), "digest": self.digest()}

    # --- actions (called with self.lock held)
    def approve(self, key: str, env: bool = False, allow_blank: bool = False) -> dict:
        if key not in self.job.traces:
            return {"ok": False, "message": f"{key!r} is not a trace of run {self.job.id}"}
        rec, skipped = G.approve(self.goldens, self.job, [key], by=self.by, env_scope=env, allow_blank=allow_blank)
        self.catch_up()
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
        rec, skipped = G.reject(self.goldens, self.job, [key], by=self.by, env_scope=env,
                                reason=f"rejected in farm serve by {self.by}")
        self.catch_up()
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
        if action == "approve":
            rec, skipped = G.approve(self.goldens, self.job, keys, by=self.by, env_scope=env, allow_blank=allow_blank)
        else:
            rec, skipped = G.reject(self.goldens, self.job, keys, by=self.by, env_scope=env,
                                    reason=f"rejected in farm serve by {self.by}")
        self.catch_up()
        done = "approved" if action == "approve" else "rejected"
        n = len(rec["changes"]) if rec else 0
        msg = f"{n} trace(s) {done} as {self.by}" + (f"; decision #{rec['id']}" if rec else "")
        if skipped:
            msg += f"; {len(skipped)} skipped: " + "; ".join(skipped)
        return {"ok": rec is not None or not skipped, "message": msg, "log_id": rec["id"] if rec else None,
                "changed": [c["trace"] for c in rec["changes"]] if rec else [], "keys": keys}

    def undo(self) -> dict:
        rec, notes = G.undo(self.goldens, by=self.by)
        if rec is None:
            return {"ok": False, "message": "; ".join(notes) or "nothing to undo"}
        self.catch_up()
        msg = f"undid {rec['undoes_action']} #{rec['undoes']} ({len(rec['changes'])} trace(s))"
        if notes:
            msg += "; " + "; ".join(notes)
        return {"ok": True, "message": msg, "keys": [c["trace"] for c in rec["changes"]]}

    def close(self) -> None:
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


TOKEN_COOKIE = "farm_token"


class _Refused(Exception):
    """A POST the server answers with an error: the HTTP status and the message of its JSON."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


_ACTIONS = {"/api/approve": "approve", "/api/reject": "reject", "/api/undo": "undo", "/api/bulk": "bulk"}
_BULK_USAGE = ("bulk: {\"action\": \"approve\"|\"reject\", \"keys\": [...]} or {\"action\": ..., \"status\":"
               " \"fail\"}")


class ReportHandler(BaseHTTPRequestHandler):
    """One request to `farm serve`: pages and images (GET, HEAD) and decisions (POST /api/...).
    `_handler` makes a subclass bound to its server's `state`, `allowed_hosts` and `guarded`."""

    server_version = "modelfarm"
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT  # socket timeout: a slow or short request never holds the thread forever
    state: ReportServer
    allowed_hosts: set[str] | None = None
    guarded: bool = False

    def log_message(self, fmt, *args):  # quiet: one line per decision is printed instead
        pass

    def handle_one_request(self):
        self.server.waiting(self.connection)  # the client's turn to send: READ_TIMEOUT in all
        self.requests_served = getattr(self, "requests_served", 0) + 1
        super().handle_one_request()
        if self.requests_served >= MAX_REQUESTS_PER_CONNECTION:
            self.close_connection = True  # bounded work per connection; the client reconnects

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok and self.command != "POST":
            self.server.working(self.connection)  # the whole request is in: no client deadline
        return ok

    def _host_ok(self) -> bool:
        if self.allowed_hosts is None:
            return True  # the token guards every request instead (a port mapping changes the Host)
        host = (self.headers.get("Host") or "").strip().lower()
        return host in self.allowed_hosts

    def _token_ok(self) -> bool:
        if not self.guarded:
            return True  # a random token: pages are open, decisions need the page's token (below)
        cookies = dict(c.strip().split("=", 1) for c in (self.headers.get("Cookie") or "").split(";") if "=" in c)
        given = self.headers.get("X-Farm-Token") or cookies.get(TOKEN_COOKIE, "")
        return same_token(given, self.state.token)

    def _same_origin(self) -> bool:
        """A POST from a browser names where it comes from: its Origin (every POST a browser makes),
        else its Referer, must be this server as the request's Host names it (already checked
        against the bind on loopback), and Sec-Fetch-Site, when sent, "same-origin". A client
        that sends none of them is no browser, so no other page can be making it: the token decides."""
        host = (self.headers.get("Host") or "").strip().lower()
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in ("same-origin", "none"):
            return False
        for name in ("Origin", "Referer"):
            value = self.headers.get(name)
            if value is not None:
                parts = urlsplit(value.strip())
                return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host
        return True

    def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        # same-origin, not no-referrer: no address goes to another site, and the page's own POSTs may
        # carry a Referer (the Fetch standard lets a browser send "Origin: null" under no-referrer)
        self.send_header("Referrer-Policy", "same-origin")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        # The client's turn again: to take the answer. One that does not read (pipelining without
        # reading) waits like a slow sender: dropped after READ_TIMEOUT, or first when slots run out.
        self.server.waiting(self.connection)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.server.working(self.connection)

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
        if self.guarded and not self._guard_page(parts):
            return None
        if path in ("/", "/index.html"):
            path = "/index.html"
        if path == "/favicon.ico":
            return self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        if path == "/api/state":
            return self._state()
        if path.endswith(".html"):
            with self.state.lock:
                self.state.catch_up(cheap=True)  # a page load shows decisions made elsewhere
        return self._send_file(path)

    def _state(self) -> None:
        """GET /api/state: the header and the index digest the results are current with, after
        catching up with decisions made elsewhere (the page polls it and says when it changed)."""
        with self.state.lock:
            changed = self.state.catch_up(cheap=True)
            out = self.state.answer({"ok": True, "changed": changed}, changed)
        self._json(HTTPStatus.OK, out)

    def _guard_page(self, parts) -> bool:
        """With FARM_SERVE_TOKEN: the link's ?token= becomes the cookie (a redirect), a request without
        the token is refused. False when this answered the request."""
        query = dict(q.split("=", 1) for q in parts.query.split("&") if "=" in q)
        if same_token(unquote(query.get("token", "")), self.state.token):
            self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {
                "Location": parts.path or "/",
                "Set-Cookie": f"{TOKEN_COOKIE}={self.state.token}; HttpOnly; SameSite=Strict; Path=/"})
            return False
        if not self._token_ok():
            self._send(HTTPStatus.UNAUTHORIZED, b"open the link with ?token=... (FARM_SERVE_TOKEN)\n", "text/plain")
            return False
        return True

    def _send_file(self, path: str) -> None:
        """A file of the report folder (nothing outside it), with its type."""
        root = self.state.folder.resolve()
        target = (root / path.lstrip("/")).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            ctype += "; charset=utf-8"
        with self.state.lock:
            body = target.read_bytes()
        self._send(HTTPStatus.OK, body, ctype)

    def do_POST(self):  # noqa: N802
        try:
            body = self._json_body()
            action = _ACTIONS.get(urlsplit(self.path).path)
            if action is None:
                raise _Refused(HTTPStatus.NOT_FOUND, "no such endpoint")
            _check_decision(action, body)
            out = self._decide(action, body)
        except _Refused as e:
            return self._json(e.code, {"ok": False, "message": e.message})
        what = body.get("key") or body.get("action") or ""
        print(f"farm serve: {action} {what}: {out['message']}", file=sys.stderr, flush=True)
        self._json(HTTPStatus.OK, out)

    def _json_body(self) -> dict:
        """The POST's JSON object, after the Host, token, type, length and depth checks (_Refused)."""
        if not self._host_ok():
            raise _Refused(HTTPStatus.MISDIRECTED_REQUEST, "wrong Host")
        if not self._same_origin():
            raise _Refused(HTTPStatus.FORBIDDEN, "the request comes from another origin (Origin, Referer or"
                                                 " Sec-Fetch-Site): only this server's own page may decide")
        if not same_token(self.headers.get("X-Farm-Token", ""), self.state.token):
            raise _Refused(HTTPStatus.FORBIDDEN, "missing or wrong X-Farm-Token")
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            raise _Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send JSON")
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if not 0 <= n <= MAX_BODY:
            raise _Refused(HTTPStatus.BAD_REQUEST, "bad Content-Length")
        try:
            raw = self.rfile.read(n)
        except (TimeoutError, OSError):
            raw = None
        if raw is None or len(raw) < n:
            self.close_connection = True
            raise _Refused(HTTPStatus.BAD_REQUEST, "the body is shorter than its Content-Length")
        self.server.working(self.connection)
        if json_too_deep(raw):
            raise _Refused(HTTPStatus.BAD_REQUEST, f"bad JSON: nested deeper than {MAX_DEPTH} levels")
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as e:
            raise _Refused(HTTPStatus.BAD_REQUEST, f"bad JSON: {e}") from None
        return body

    def _decide(self, action: str, body: dict) -> dict:
        """The decision taken (under the server's lock) and the page's answer, with "elsewhere": the
        traces that decisions made outside this server changed meanwhile; a GoldenError is a 409."""
        state, key = self.state, body.get("key")
        env, allow_blank = bool(body.get("env")), bool(body.get("allow_blank"))
        try:
            with state.lock:
                elsewhere = state.catch_up()  # decisions made elsewhere first: "--failed" means failed now
                if action in ("undo", "bulk"):
                    out = state.undo() if action == "undo" else state.bulk(
                        body["action"], body.get("keys"), body.get("status"), env=env, allow_blank=allow_blank)
                    keys = out.get("keys", [])
                elif action == "approve":
                    out, keys = state.approve(key, env=env, allow_blank=allow_blank), [key]
                else:
                    out, keys = state.reject(key, env=env), [key]
                return {**state.answer(out, keys), "elsewhere": elsewhere}
        except G.GoldenError as e:
            raise _Refused(HTTPStatus.CONFLICT, str(e)) from None


def _check_decision(action: str, body: dict) -> None:
    """What a decision must say: approve and reject a trace's key; bulk an action and keys or status."""
    if action in ("approve", "reject") and not isinstance(body.get("key"), str):
        raise _Refused(HTTPStatus.BAD_REQUEST, "say which trace: {\"key\": ...}")
    if action == "bulk":
        keys, status = body.get("keys"), body.get("status")
        ok = body.get("action") in ("approve", "reject") and (
            (isinstance(keys, list) and all(isinstance(k, str) for k in keys) and status is None)
            or (keys is None and status == "fail"))
        if not ok:
            raise _Refused(HTTPStatus.BAD_REQUEST, _BULK_USAGE)


def _handler(state: ReportServer, allowed_hosts: set[str] | None, guarded: bool):
    """`allowed_hosts` None: served beyond loopback (a container's interface; a port mapping changes
    the Host), else the Host names a request must carry. `guarded` (FARM_SERVE_TOKEN is set): every
    request must carry the token (the ?token= of the link once, then an HttpOnly cookie), pages too."""
    return type("Handler", (ReportHandler,), {"state": state, "allowed_hosts": allowed_hosts, "guarded": guarded,
                                              "timeout": READ_TIMEOUT})  # as the module has it now


def check_bind(host: str, token: str | None) -> None:
    """Beyond loopback only with FARM_SERVE_TOKEN (ValueError, one sentence): the buttons change the goldens."""
    if not is_loopback(host) and not token:
        raise ValueError(f"farm serve binds {host!r} (beyond loopback) only with FARM_SERVE_TOKEN set: its buttons"
                         f" change the golden index")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class LimitedServer(ThreadingHTTPServer):
    """A threading HTTP server with at most `max_connections` handler threads (see the module
    docstring): a connection waiting for its client's bytes longer than `read_timeout` is shut
    down, and a new connection when every slot is taken shuts down the one that has waited
    longest, so it gets a slot at once (a quick request is answered while slow clients queue)."""

    daemon_threads = True
    request_queue_size = 128
    max_connections = MAX_CONNECTIONS
    read_timeout = READ_TIMEOUT

    def __init__(self, *args, **kwargs):
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._holding: set[socket.socket] = set()  # connections that hold a slot (each gives it back once)
        self._waiting: OrderedDict[socket.socket, float] = OrderedDict()  # connection -> its deadline
        self._watch = threading.Lock()
        super().__init__(*args, **kwargs)

    def waiting(self, conn: socket.socket) -> None:
        with self._watch:
            self._waiting.pop(conn, None)
            self._waiting[conn] = time.monotonic() + self.read_timeout

    def working(self, conn: socket.socket) -> None:
        with self._watch:
            self._waiting.pop(conn, None)

    def _drop(self, conn: socket.socket) -> None:
        """Wake the handler thread blocked on `conn` (its read sees the end) so it finishes."""
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _drop_late(self) -> None:
        now = time.monotonic()
        with self._watch:
            late = [c for c, deadline in self._waiting.items() if deadline <= now]
            for c in late:
                del self._waiting[c]
        for c in late:
            self._drop(c)

    def handle_error(self, request, client_address) -> None:
        """A client that went away or was dropped (its socket shut down mid-answer) is no error."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def service_actions(self) -> None:  # serve_forever calls it every poll_interval
        super().service_actions()
        self._drop_late()

    def process_request(self, request, client_address) -> None:
        self._drop_late()
        if not self._slots.acquire(blocking=False):
            with self._watch:
                oldest = next(iter(self._waiting), None)
                if oldest is not None:
                    del self._waiting[oldest]
            if oldest is not None:
                self._drop(oldest)
            if not self._slots.acquire(timeout=self.read_timeout):  # every slot busy working: refuse
                self.shutdown_request(request)
                return
        with self._watch:
            self._holding.add(request)
        try:
            self.waiting(request)
            super().process_request(request, client_address)  # a thread for it (ThreadingMixIn)
        except BaseException:  # no thread, or SIGTERM's stop landed after its start: one of us gives it back
            self._release(request)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def _release(self, request) -> None:
        """The connection's slot back, once, whichever of its thread and `process_request` comes first."""
        self.working(request)
        with self._watch:
            if request not in self._holding:
                return
            self._holding.discard(request)
        self._slots.release()


class _LimitedServerV6(LimitedServer):
    address_family = socket.AF_INET6


def make_server(state: ReportServer, host: str = "127.0.0.1", port: int = 0, *,
                token: str | None = None) -> LimitedServer:
    """A server for `state` on host:port. `token` (FARM_SERVE_TOKEN) must be the state's token and
    then guards every request, pages included, on any bind. Loopback: Host headers are checked, and
    without `token` decisions need the page's random token. Any other address (a container's
    interface) only with `token`."""
    remote = not is_loopback(host)
    check_bind(host, token)
    if token and token != state.token:
        raise ValueError("the server's token must be FARM_SERVE_TOKEN when it is set")
    bind = "127.0.0.1" if host == "localhost" else host
    server = (_LimitedServerV6 if ":" in bind else LimitedServer)((bind, port), _handler(state, set(), bool(token)))
    if remote:
        server.RequestHandlerClass = _handler(state, None, True)
        return server
    real_port = server.server_address[1]
    names = {bind, "localhost", "127.0.0.1", f"[{bind}]"}
    allowed = {f"{n}:{real_port}" for n in names} | names
    server.RequestHandlerClass = _handler(state, allowed, bool(token))
    return server


def serve(job, goldens: str | Path, *, host: str = "127.0.0.1", port: int = 8765, by: str | None = None,
          allow_new: bool = False, ready=None) -> None:
    """Serve until interrupted. `ready(url)` is called once the server listens. Beyond loopback
    (`--host 0.0.0.0` in a container) only with FARM_SERVE_TOKEN; when it is set, on any bind, every
    request must carry it."""
    token = serve_token()
    check_bind(host, token)  # before the comparison and the report folder are made
    state = ReportServer(job, goldens, by=by, allow_new=allow_new, token=token)
    try:
        server = make_server(state, host, port, token=token)
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
