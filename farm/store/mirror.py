"""A folder's files kept as objects in a store (farm thumbnails -o s3://...): `TreeMirror`.

`pull` copies the store's files into a local folder, the command writes there, `push` puts back
what changed (`last` after the rest, so an index never names a file not yet there) and deletes
what the folder no longer has. `hold` takes the lock object (LOCK) so that two commands never write
one prefix at once; `release` drops it.

The lock is a lease: it names its holder (host, pid, a token) and when the holder last renewed it,
and a thread renews it every LEASE_S / 4 seconds while the holder lives (compare-and-swap on the
lock, so a renewal never overwrites another's lock). A lock is stale, and is taken over (with one
line on stderr saying whose it was) when its holder is a process of this host that no longer runs,
or when it was not renewed for LEASE_S seconds; the takeover is a compare-and-swap too, so two
commands taking over one stale lock cannot both win. A live holder's lock is refused, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from pathlib import Path

from farm.files import atomic_write
from farm.store.documents import StoreError

__all__ = ["LEASE_S", "TreeMirror"]

LEASE_S = 60.0  # a lock not renewed for this long is stale (renewed every LEASE_S / 4 while held)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


def _read_lock(data: bytes) -> dict | None:
    """A lock's fields: JSON, or an older version's "HOST PID TIME" line (no lease); None: neither."""
    try:
        held = json.loads(data)
        return held if isinstance(held, dict) else None
    except ValueError:
        fields = data.decode("utf-8", "replace").split()
        return {"host": fields[0], "pid": int(fields[1])} if len(fields) == 3 and fields[1].isdigit() else None


class TreeMirror:
    """A folder's files as objects under a store's root (see the module docstring)."""

    LOCK = ".farm/lock"

    def __init__(self, store, lease_s: float | None = None):
        self.store = store
        self.objects = store.objects
        self.lease_s = LEASE_S if lease_s is None else lease_s
        self.known: dict[str, str] = {}  # relative path -> sha256 of its bytes, as pulled
        self._token = secrets.token_hex(8)
        self._tag: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _lock_bytes(self) -> bytes:
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": self._token,
                           "renewed": round(time.time(), 3), "lease_s": self.lease_s}).encode() + b"\n"

    def _stale(self, held: dict) -> str | None:
        """Why a lock another wrote is stale (a sentence), or None while its holder may live."""
        host, pid = held.get("host"), held.get("pid")
        if host == socket.gethostname() and isinstance(pid, int) and pid > 0 and not _alive(pid):
            return f"process {pid} on {host} no longer runs"
        renewed, lease = held.get("renewed"), held.get("lease_s", self.lease_s)
        if not isinstance(renewed, (int, float)) or not isinstance(lease, (int, float)):
            return None  # a lock of an older version (no lease): only its own host can tell
        age = time.time() - renewed
        return f"not renewed for {age:.0f} s (lease {lease:.0f} s)" if age > lease else None

    def hold(self) -> None:
        """Take the lock (a stale one is taken over, saying so) and keep it renewed; StoreError when
        another command that still lives holds it."""
        self._tag = self.objects.swap(self.LOCK, self._lock_bytes(), None)
        if self._tag is None:
            self._take_over()
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="farm-lock-lease", daemon=True)
        self._renewer.start()

    def _take_over(self) -> None:
        url = self.objects.url(self.LOCK)
        try:
            data, tag = self.objects.get_tagged(self.LOCK)
        except FileNotFoundError:  # released since: take it as new
            data, tag = b"{}", None
        held = _read_lock(data)
        why = self._stale(held) if held else None
        if held == {} or why:
            self._tag = self.objects.swap(self.LOCK, self._lock_bytes(), tag)
        if self._tag is None:
            who = f" for {held.get('host')} pid {held.get('pid')}" if held else ""
            raise StoreError(f"another command is writing {self.store.location} (it holds {url}{who}, renewed"
                             f" within its lease); wait for it, or delete that object if none runs") from None
        if why:
            print(f"took over the stale lock {url} of {held.get('host')} pid {held.get('pid')}: {why}",
                  file=sys.stderr)

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                tag = self.objects.swap(self.LOCK, self._lock_bytes(), self._tag)
            except Exception:  # noqa: BLE001 - the store unreachable for a moment: try again next time
                continue
            if tag is None:  # taken over (we were thought dead): stop renewing what is not ours
                return
            self._tag = tag

    def release(self) -> None:
        """Stop renewing and delete the lock if it is still this holder's."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        with contextlib.suppress(FileNotFoundError):
            held = _read_lock(self.objects.get(self.LOCK))
            if held and held.get("token") == self._token:
                self.objects.delete([self.LOCK])

    def pull(self, dest: Path, skip) -> None:
        names = [rel for rel in self.objects.list("") if not skip(rel)]
        for rel, data in zip(names, self.store._map(self.objects.get, names), strict=True):
            atomic_write(dest / rel, data, dest / ".farm" / "tmp")
            self.known[rel] = hashlib.sha256(data).hexdigest()

    def push(self, src: Path, skip, last: tuple[str, ...]) -> None:
        files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
        files = [f for f in files if not skip(f)]
        changed = [f for f in files if self.known.get(f) != hashlib.sha256((src / f).read_bytes()).hexdigest()]
        first = [f for f in changed if f not in last]
        self.store._map(lambda rel: self.objects.put(rel, (src / rel).read_bytes()), first)
        for rel in sorted((f for f in changed if f in last), key=last.index):
            self.objects.put(rel, (src / rel).read_bytes())
        self.objects.delete(sorted(set(self.known) - set(files)))
