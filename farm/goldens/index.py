"""The golden index: which images are approved (and which are known bad) for each trace.

A goldens folder holds

    index.jsonl        one line per (trace key, environment scope), sorted: the approved and
                       rejected digests, who decided, when, from which run, and the GL environment
                       that rendered each approved image
    approvals.jsonl    the log: one line per approve, reject, undo or prune, with every index line
                       it changed before and after (so `farm approve --undo` is exact)
    images/<png>.png   each approved image once: the PNG file exactly as the run stored it (never
                       a re-render, never re-encoded), under the same name, the sha256 of its bytes

**What a digest identifies.** A golden digest is `farm.images.image_digest` of the pixels
(sha256 of the canonical RGBA bytes and the size), not the sha256 of the PNG file the store names
images by. The PNG's text chunk carries the whole trace (model hash, renderer version, GL
environment), so two renders with the same pixels on two machines, or before and after an edit
that did not change the picture, are different files but the same image: comparing pixel digests
makes "exact match" mean what a reviewer means. Each approval also records `png`, the sha256 of the
file: the golden's image file is that file, byte for byte (its embedded trace says what rendered it
and agrees with the index line), and the store of the run it came from has it under the same name.

**Index lines.** The first line is the header ``{"format": "modelfarm.goldens/1"}``; then one JSON
object per line, sorted by trace key, the generic scope first::

    {"trace": "models/crate.mdx|Stand|0ms|...", "env": "*", "approved": [{"digest": ..., "png": ...,
     "size": [128, 128], "by": ..., "at": ..., "run": ..., "gl": {...}}], "rejected": [{"digest": ...,
     "by": ..., "at": ..., "run": ..., "reason": ...}]}

Keys are always written in that order, so a change to one trace is a one-line diff. An approval
of a frame that drew placeholders for missing assets, or of a blank one (approved only when asked:
farm.goldens.decisions.approve), also has ``"missing": [asset names]`` and/or ``"blank": reason``
after ``gl``; lines without them (all lines written before) mean a frame drawn as it should be.
`GoldenIndex.marked` lists such goldens.

**Environments.** `env_key(gl)` names a GL environment by what makes llvmpipe and GPU output
differ: GL_RENDERER (for llvmpipe it includes the LLVM version and vector width), the driver and its
version (Mesa 22.3.6) and the CPU vendor, e.g. ``llvmpipe (LLVM 15.0.6, 256 bits) / Mesa 22.3.6 /
AuthenticAMD``. A trace's line with ``"env": "*"`` is its generic golden; a line with an env key
holds goldens for that environment only. `GoldenIndex.lookup` looks at the frame's own environment
first and then the generic line: an approved digest in either is an exact match, a rejected digest
in either is a known-bad image (the environment's own decision wins when both name the digest),
and the inexact comparison uses the environment's approved images when it has any, else the
generic ones.

**Legacy keys.** A trace whose time is a fraction of its sequence (``...|Stand|50%|...``, farm.plan.keys)
was keyed by its resolved ms before (``...|Stand|1000ms|...``). In a scope where the index has no line
for such a trace, `lookup` answers from the line of its legacy key (`farm.plan.keys.legacy_key`, from
the ms this run resolved), so goldens approved then still compare. A decision on such a trace starts
from that line (farm.goldens.decisions: `--add` keeps its approvals, an image approved there keeps its
record) and writes the trace's own key; the legacy line is then stale (`in_use`; `farm goldens
--stale MANIFEST --prune` removes it).

Writers take an exclusive lock on the folder (flock), reload, change the index, append one line
to the log (farm.files.append_line: whole or absent, fsync'd) and then rewrite the index atomically,
so `farm serve` and a `farm approve` in a terminal never lose each other's decisions.

**A decision takes effect with its index change, or not at all.** A process killed (or a disk
that fills up) after the log line and before the index rename leaves a last log record whose
index lines are all still as they were before it (its changes' `before`): `GoldenIndex.log` drops
such a record (with a warning) and the next decision cuts it off the file, so `--undo` and
`farm goldens log` see what the index saw. A failed write cuts the log back at once. Only the last
record can be in that state (writers hold the lock), and the file formats are unchanged. The
decisions themselves are farm.goldens.decisions.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import functools
import getpass
import hashlib
import json
import logging
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from farm.environment import default_goldens, env_given
from farm.files import append_line, atomic_write, read_json_lines_at
from farm.images import png_pixel_digest

__all__ = [
    "FORMAT",
    "GENERIC",
    "GoldenError",
    "GoldenIndex",
    "Lookup",
    "default_user",
    "entry_order",
    "env_key",
    "canonical_entry",
    "find_goldens",
    "locked",
    "now",
    "png_pixel_digest",
]

FORMAT = "modelfarm.goldens/1"
GENERIC = "*"
INDEX_NAME = "index.jsonl"
LOG_NAME = "approvals.jsonl"
IMAGES_DIR = "images"
_log = logging.getLogger("farm.goldens")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_APPROVAL_KEYS = ("digest", "png", "size", "by", "at", "run", "gl", "missing", "blank")
_REJECTION_KEYS = ("digest", "png", "by", "at", "run", "reason")


class GoldenError(RuntimeError):
    """A golden folder that cannot be read or changed; the message says what to do."""


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def env_key(gl: Mapping | None) -> str:
    """The environment a golden belongs to: ``GL_RENDERER / driver version / CPU vendor``."""
    if not gl:
        return "unknown"
    try:  # a run's frames and goldens name a few environments: each is spelled once (a comparison asks twice a trace)
        return _env_key_of(tuple(gl.get(k) for k in _ENV_FIELDS))
    except TypeError:  # a value that is not hashable: spelled each time
        return _env_key(gl)


_ENV_FIELDS = ("renderer", "driver", "driver_version", "cpu_vendor")


@functools.lru_cache(maxsize=256)
def _env_key_of(values: tuple) -> str:
    return _env_key(dict(zip(_ENV_FIELDS, values, strict=True)))


def _env_key(gl: Mapping) -> str:
    def clean(v) -> str:
        return re.sub(r"\s+", " ", str(v or "")).strip().replace("/", "-")

    renderer = clean(gl.get("renderer")) or "-"
    driver = " ".join(x for x in (clean(gl.get("driver")), clean(gl.get("driver_version"))) if x) or "-"
    cpu = clean(gl.get("cpu_vendor")) or "-"
    return f"{renderer} / {driver} / {cpu}"


def default_user(by: str | None = None) -> str:
    """Who decides: `by`, else $FARM_USER, else git's user.name <user.email>, else $USER."""
    if by:
        return by
    if env_given("FARM_USER"):
        return env_given("FARM_USER")
    parts = []
    for key in ("user.name", "user.email"):
        try:
            out = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            break
        if out.returncode == 0 and out.stdout.strip():
            parts.append(out.stdout.strip())
    if parts:
        return parts[0] if len(parts) == 1 else f"{parts[0]} <{parts[1]}>"
    try:
        return os.environ.get("USER") or os.environ.get("LOGNAME") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def find_goldens(manifest: str | Path | None, explicit: str | Path | None = None) -> Path | None:
    """The goldens folder for a manifest: `explicit`, else $FARM_GOLDENS, else farm.toml's goldens,
    else the manifest's own folder when it holds an index.jsonl, else its goldens/ subfolder when
    that does; else None."""
    if explicit:
        return Path(explicit)
    configured = default_goldens()  # FARM_GOLDENS, else farm.toml's goldens
    if configured:
        return Path(configured)
    if manifest:
        folder = Path(manifest).parent
        for cand in (folder, folder / "goldens"):
            if (cand / INDEX_NAME).is_file():
                return cand
    return None


# --------------------------------------------------------------------------------------------
# Lines


def _ordered(d: Mapping, keys: tuple[str, ...]) -> dict:
    out = {k: d[k] for k in keys if k in d}
    out.update({k: d[k] for k in sorted(d) if k not in out})
    return out


def canonical_entry(entry: Mapping) -> dict:
    return {
        "trace": entry["trace"],
        "env": entry["env"],
        "approved": [_ordered(a, _APPROVAL_KEYS) for a in entry.get("approved", [])],
        "rejected": [_ordered(r, _REJECTION_KEYS) for r in entry.get("rejected", [])],
    }


_SHARED = ("by", "at", "run")  # a record's values that most records of an index repeat


def _shared(entry: dict, memo: dict) -> dict:
    """`entry` with the values its index repeats (the scope, who approved when in which run, the GL
    environment) as one object each for the whole index, not one per line: at 100k lines about 40% of
    the index's memory. The records are read, never changed in place (a decision replaces them)."""
    entry["env"] = memo.setdefault(entry["env"], entry["env"])
    for record in (*entry["approved"], *entry["rejected"]):
        for name in _SHARED:
            value = record.get(name)
            if type(value) is str:
                record[name] = memo.setdefault(value, value)
        gl = record.get("gl")
        if type(gl) is dict and all(type(v) in (str, int) for v in gl.values()):
            record["gl"] = memo.setdefault(("gl", *sorted(gl.items())), gl)
    return entry


def entry_line(entry: Mapping) -> str:
    return json.dumps(canonical_entry(entry), ensure_ascii=False)


def entry_order(key: tuple[str, str]) -> tuple:
    """The order of the index's lines: by trace, the generic scope first, then the environments."""
    trace, env = key
    return (trace, env != GENERIC, env)


def _lines(text: str) -> Iterator[str]:
    """`text.splitlines()` one line at a time (never a list of every line of a large index)."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        end = size if end < 0 else end
        piece = text[start:end]
        yield from piece.splitlines() or [""]
        if end < size and piece and piece[-1] != "\r" and piece[-1].splitlines() == [""]:  # a break, then \n
            yield ""
        start = end + 1


def _check_entry(obj, where: str) -> dict:
    if not isinstance(obj, dict):
        raise GoldenError(f"{where}: expected a JSON object")
    for name in ("trace", "env"):
        if not isinstance(obj.get(name), str) or not obj[name]:
            raise GoldenError(f"{where}: {name!r} must be a non-empty string")
    for name in ("approved", "rejected"):
        items = obj.get(name, [])
        if not isinstance(items, list):
            raise GoldenError(f"{where}: {name!r} must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not _HEX64.fullmatch(str(item.get("digest", ""))):
                raise GoldenError(f"{where}: {name}[{i}] needs 'digest', 64 lowercase hex digits")
            if name == "approved" and not _HEX64.fullmatch(str(item.get("png", ""))):
                raise GoldenError(f"{where}: {name}[{i}] needs 'png' (the image file's sha256), 64 lowercase"
                                  f" hex digits")
            missing, blank = item.get("missing", []), item.get("blank", "")
            if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
                raise GoldenError(f"{where}: {name}[{i}]: 'missing' must be a list of asset names")
            if not isinstance(blank, str):
                raise GoldenError(f"{where}: {name}[{i}]: 'blank' must be a string (why the frame is blank)")
    return obj


# --------------------------------------------------------------------------------------------
# The index


@dataclass
class Lookup:
    """What the index says about one trace in one environment."""

    trace: str
    env: str
    env_entry: dict | None
    generic_entry: dict | None

    def approved_in(self, scope: str) -> list[dict]:
        entry = self.env_entry if scope == "env" else self.generic_entry
        return list(entry.get("approved", [])) if entry else []

    def rejected_in(self, scope: str) -> list[dict]:
        entry = self.env_entry if scope == "env" else self.generic_entry
        return list(entry.get("rejected", [])) if entry else []

    def exact(self, digest: str) -> tuple[str, str, dict] | None:
        """("approved" | "rejected", scope, record) when `digest` is named; the env's line first."""
        for scope in ("env", "generic"):
            for a in self.approved_in(scope):
                if a["digest"] == digest:
                    return "approved", scope, a
            for r in self.rejected_in(scope):
                if r["digest"] == digest:
                    return "rejected", scope, r
        return None

    @property
    def scope(self) -> str | None:
        """Where the goldens for an inexact comparison come from: "env", "generic" or None (new)."""
        if self.approved_in("env"):
            return "env"
        if self.approved_in("generic"):
            return "generic"
        return None

    def candidates(self) -> list[dict]:
        """The approved images to compare with, newest first."""
        scope = self.scope
        return list(reversed(self.approved_in(scope))) if scope else []


@dataclass
class GoldenIndex:
    root: Path
    entries: dict[tuple[str, str], dict] = field(default_factory=dict)
    _journal: tuple[list[dict], int | None] | None = field(default=None, repr=False, compare=False)  # log read
    _pending: dict | None = field(default=None, repr=False, compare=False)  # a record append_log staged

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    @property
    def log_path(self) -> Path:
        return self.root / LOG_NAME

    @property
    def images_dir(self) -> Path:
        return self.root / IMAGES_DIR

    def image_path(self, png: str) -> Path:
        """The file of an approved image, by its `png` (the sha256 of its bytes)."""
        return self.images_dir / f"{png}.png"

    # --- reading and writing
    @classmethod
    def load(cls, root: str | Path) -> GoldenIndex:
        root = Path(root)
        index = cls(root)
        try:
            text = index.index_path.read_text("utf-8")
        except FileNotFoundError:
            return index
        index.entries = cls.parse(text, str(index.index_path))
        return index

    @staticmethod
    def parse(text: str, where: str = INDEX_NAME) -> dict[tuple[str, str], dict]:
        entries: dict[tuple[str, str], dict] = {}
        memo: dict = {}
        for no, line in enumerate(_lines(text), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise GoldenError(f"{where}:{no}: not valid JSON: {e}") from None
            if no == 1 and isinstance(obj, dict) and "format" in obj:
                if obj["format"] != FORMAT:
                    raise GoldenError(f"{where}: format {obj['format']!r}; this modelfarm reads {FORMAT!r}")
                continue
            obj = _check_entry(obj, f"{where}:{no}")
            key = (obj["trace"], obj["env"])
            if key in entries:
                raise GoldenError(f"{where}:{no}: a second line for trace {obj['trace']!r} in env {obj['env']!r}")
            entries[key] = _shared(canonical_entry(obj), memo)
        return entries

    def lines(self) -> Iterator[str]:
        """The index file's lines (without their newlines): the header, then each entry in order."""
        yield json.dumps({"format": FORMAT})
        for key in sorted(self.entries, key=entry_order):
            entry = self.entries[key]
            if entry.get("approved") or entry.get("rejected"):
                yield entry_line(entry)

    def text(self) -> str:
        return "".join(f"{line}\n" for line in self.lines())

    def digest(self) -> str:
        """sha256 of the index text (what a comparison was made against), hashed a line at a time (the text
        of a 100k-trace index is about 50 MB)."""
        h = hashlib.sha256()
        for line in self.lines():
            h.update(f"{line}\n".encode())
        return h.hexdigest()

    def save(self) -> None:
        atomic_write(self.index_path, self.text().encode("utf-8"))

    # --- queries
    def entry(self, trace: str, env: str = GENERIC) -> dict | None:
        return self.entries.get((trace, env))

    def line(self, trace: str, env: str, legacy: str | None = None) -> dict | None:
        """The line of `trace` in scope `env`, else the one of its `legacy` key (farm.plan.keys.legacy_key)."""
        own = self.entries.get((trace, env))
        return own if own is not None or legacy is None else self.entries.get((legacy, env))

    def lookup(self, trace: str, env: str, legacy: str | None = None) -> Lookup:
        """What the index says about `trace` in `env`. `legacy`: the key a percent trace had before keys
        named fractions; a scope with no line for `trace` uses that key's line (see **Legacy keys**)."""
        own = self.line(trace, env, legacy) if env != GENERIC else None
        return Lookup(trace, env, own, self.line(trace, GENERIC, legacy))

    def in_use(self, legacy: Mapping[str, str | None]) -> set[tuple[str, str]]:
        """The lines (trace, env) that a lookup of the traces `legacy` (trace key -> its legacy key or
        None) can answer from: each trace's own lines and, in a scope where it has none, its legacy key's."""
        envs = self.envs()
        used = {(t, e) for t in legacy for e in envs if (t, e) in self.entries}
        used |= {(old, e) for t, old in legacy.items() if old for e in envs if (t, e) not in self.entries
                 and (old, e) in self.entries}
        return used

    def traces(self) -> set[str]:
        return {t for t, _ in self.entries}

    def envs(self) -> set[str]:
        return {e for _, e in self.entries}

    def referenced_images(self) -> set[str]:
        """The `png` names of every approved image."""
        return {a["png"] for e in self.entries.values() for a in e.get("approved", [])}

    def marked(self) -> list[dict]:
        """The approved images drawn with placeholders for missing assets or blank, sorted by trace:
        ``{"trace", "env", "digest", "run", "missing": [...], "blank": reason | None}``."""
        out = []
        for key in sorted(self.entries, key=entry_order):
            for a in self.entries[key].get("approved", []):
                if a.get("missing") or a.get("blank"):
                    out.append({"trace": key[0], "env": key[1], "digest": a["digest"], "run": a.get("run"),
                                "missing": list(a.get("missing") or []), "blank": a.get("blank") or None})
        return out

    def missing_images(self) -> list[str]:
        return sorted(d for d in self.referenced_images() if not self.image_path(d).is_file())

    def unreferenced_images(self) -> list[Path]:
        used = self.referenced_images()
        return sorted(p for p in self.images_dir.glob("*.png") if p.stem not in used)

    def log(self) -> list[dict]:
        """The log records that took effect (read once per loaded index: as it was when loaded)."""
        return list(self._read_journal()[0])

    def _read_journal(self) -> tuple[list[dict], int | None]:
        """The log records that took effect, and the length to cut the log file back to before the
        next append (None: only a torn last line to drop, which farm.files.append_line does)."""
        if self._journal is None:
            try:
                lines = read_json_lines_at(self.log_path)  # a torn last line is left out, with a warning
            except ValueError as e:
                raise GoldenError(str(e)) from None
            keep = None
            if lines and not self._took_effect(lines[-1][1]):
                keep, rec = lines.pop()
                _log.warning("%s: decision #%s (%s) at byte offset %d never reached %s (the command stopped between"
                             " its two writes); it is ignored and cut off at the next decision", self.log_path,
                             rec.get("id"), rec.get("action"), keep, self.index_path)
            self._journal = ([rec for _, rec in lines], keep)
        return self._journal

    def _took_effect(self, record: dict) -> bool:
        """False when every line `record` changed is still as it was before (its change never
        reached the index); True otherwise, and for a record that changed no line."""
        try:
            changes = [(c["trace"], c["env"], c.get("before")) for c in record.get("changes") or ()]
            pairs = [(self.entries.get((t, e)), canonical_entry(b) if b else None) for t, e, b in changes]
        except (KeyError, TypeError, AttributeError):
            return True  # not a record we wrote: leave it to the reader
        return not pairs or any(current != was for current, was in pairs)

    # --- changing
    def put_image(self, data: bytes, png: str, digest: str) -> Path:
        """Store approved PNG bytes as images/<png>.png, checking both names they go by."""
        path = self.image_path(png)
        if path.is_file() and path.stat().st_size == len(data):
            return path
        if hashlib.sha256(data).hexdigest() != png:
            raise GoldenError(f"refusing to store an image whose bytes are not {png[:12]}...")
        got, _, _ = png_pixel_digest(data)
        if got != digest:
            raise GoldenError(f"refusing to store an image whose pixels ({got[:12]}...) are not {digest[:12]}...")
        atomic_write(path, data)
        return path

    def set_entry(self, trace: str, env: str, entry: dict | None) -> None:
        if entry is None or not (entry.get("approved") or entry.get("rejected")):
            self.entries.pop((trace, env), None)
        else:
            self.entries[(trace, env)] = canonical_entry({**entry, "trace": trace, "env": env})

    def append_log(self, record: dict) -> dict:
        """Give `record` the next id and stage it: `locked` writes it, then the index, when its
        block ends (one record per block)."""
        if self._pending is not None:
            raise GoldenError("one log record per change of the index")  # a bug of ours, not of the user
        ids = [r.get("id", 0) for r in self.log() if isinstance(r.get("id"), int)]
        self._pending = {"id": max(ids, default=0) + 1, **record}
        return self._pending

    def _commit(self, before: str) -> None:
        """The log line, then the index: a failure in between cuts the log line back off (and a
        reader ignores it when even that fails: see `_took_effect`)."""
        record, self._pending = self._pending, None
        if record is None:
            if self.text() != before or not self.index_path.exists():
                self.save()
            return
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        size = append_line(self.log_path, line, keep=self._read_journal()[1], sync=True)
        try:
            self.save()
        except BaseException:
            with contextlib.suppress(OSError):  # else a reader finds it did not take effect (_took_effect)
                os.truncate(self.log_path, size)
            raise


@contextlib.contextmanager
def locked(root: str | Path) -> Iterator[GoldenIndex]:
    """The index, loaded under an exclusive lock on its folder; when the block ends normally, the
    record it staged (`append_log`) is appended to the log and then the index saved. A full disk
    is one GoldenError sentence naming the file; nothing is changed then."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        index = GoldenIndex.load(root)
        index._read_journal()  # as it was before this change (what took effect is judged on that index)
        before = index.text()
        yield index
        index._commit(before)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise GoldenError(f"{e.filename or root}: no space left on the device; nothing was decided (the golden index"
                          f" and its log are as they were)") from None
    finally:
        os.close(fd)
