"""Reading MPQ archives (Warcraft III maps `.w3x`/`.w3m`, game archives `war3.mpq` ...) through
StormLib (Debian: libstorm9), with a small ctypes binding.

`MpqArchive(path, listfile=None)` opens an archive read-only; StormLib finds the MPQ header itself,
so a map's 512-byte HM3W header needs nothing special. Names inside are backslash paths, matched
case-insensitively by the MPQ hash, so `has`/`read` work by name even without a `(listfile)`;
`names()` needs the archive's `(listfile)` or an external listfile (`listfile=` or `add_listfile`),
otherwise it raises `MpqError` suggesting `--listfile FILE`. Every failure is an `MpqError` whose
message is one sentence naming the archive and the problem; handles are always closed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fnmatch
import os
import re
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

SONAMES = ("libstorm.so.9", "libstorm.so")
LISTFILE = "(listfile)"
MPQ_OPEN_READ_ONLY = 0x00000100  # STREAM_FLAG_READ_ONLY
SFILE_OPEN_FROM_MPQ = 0
MAX_PATH = 1024  # StormPort.h on non-Windows systems
MAX_ENTRY_SIZE = 1 << 30  # one entry larger than this is treated as corruption
# Entries read are kept, decompressed, up to this many bytes per open archive (least recently used
# dropped first): the archive's equivalent of the page cache a folder gets from the OS, so models
# sharing a map's textures decompress each once.
ENTRY_CACHE_BYTES = 64 * 1024 * 1024
ERRORS = {  # StormPort.h's error codes on Linux (errno values, then StormLib's own from 1000)
    1: "access denied", 2: "no such file", 9: "invalid handle", 12: "out of memory", 22: "invalid parameter",
    28: "disk full", 95: "not supported", 105: "buffer too small",
    1000: "not an MPQ archive, or its header or tables are damaged",
    1002: "unexpected end of data", 1003: "cannot complete", 1004: "corrupt archive data",
}


class MpqError(Exception):
    """One sentence: the archive, then the problem."""

    def __init__(self, archive: str | os.PathLike, problem: str):
        self.archive, self.problem = str(archive), problem
        super().__init__(f"{self.archive}: {problem}")


class _FindData(ctypes.Structure):
    _fields_ = [
        ("cFileName", ctypes.c_char * MAX_PATH),
        ("szPlainName", ctypes.c_char_p),
        ("dwHashIndex", ctypes.c_uint32),
        ("dwBlockIndex", ctypes.c_uint32),
        ("dwFileSize", ctypes.c_uint32),
        ("dwFileFlags", ctypes.c_uint32),
        ("dwCompSize", ctypes.c_uint32),
        ("dwFileTimeLo", ctypes.c_uint32),
        ("dwFileTimeHi", ctypes.c_uint32),
        ("lcLocale", ctypes.c_uint32),
        ("_spare", ctypes.c_uint8 * 64),  # room for fields newer StormLib versions append
    ]


_lib = None
_lib_lock = threading.Lock()


def storm():
    """The loaded StormLib with argument types set; MpqError when it is not installed."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        names = [*SONAMES, ctypes.util.find_library("storm")]
        for name in filter(None, names):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise MpqError("StormLib", "libstorm is not installed (Debian package libstorm9; "
                                       "scripts/system-deps.sh installs it)")
        H, B, S, U = ctypes.c_void_p, ctypes.c_bool, ctypes.c_char_p, ctypes.c_uint32
        sig = {
            "SFileOpenArchive": (B, [S, U, U, ctypes.POINTER(H)]),
            "SFileCloseArchive": (B, [H]),
            "SFileHasFile": (B, [H, S]),
            "SFileOpenFileEx": (B, [H, S, U, ctypes.POINTER(H)]),
            "SFileGetFileSize": (U, [H, ctypes.POINTER(U)]),
            "SFileReadFile": (B, [H, ctypes.c_void_p, U, ctypes.POINTER(U), ctypes.c_void_p]),
            "SFileCloseFile": (B, [H]),
            "SFileFindFirstFile": (H, [H, S, ctypes.POINTER(_FindData), S]),
            "SFileFindNextFile": (B, [H, ctypes.POINTER(_FindData)]),
            "SFileFindClose": (B, [H]),
            "SFileAddListFile": (U, [H, S]),
            "GetLastError": (U, []),
        }
        for fn, (res, args) in sig.items():
            f = getattr(lib, fn)
            f.restype, f.argtypes = res, args
        _lib = lib
        return lib


def _why(code: int) -> str:
    return ERRORS.get(code, f"StormLib error {code}")


def entry_name(name: str) -> str:
    """The archive's spelling of an entry name: backslash separators, no leading separator."""
    return re.sub(r"[\\/]+", "\\\\", str(name)).lstrip("\\")


def _encode(name: str) -> bytes:
    return os.fsencode(name) if isinstance(name, os.PathLike) else str(name).encode("utf-8", "surrogateescape")


def glob_to_regex(pattern: str) -> re.Pattern:
    """A case-insensitive regex for a glob over entry names: `**` any folders, `*`/`?` within one."""
    parts = entry_name(pattern).split("\\")
    out, i = "", 0
    while i < len(parts):
        if parts[i] == "**":
            out += r".*" if i == len(parts) - 1 else r"(?:[^\\]*\\)*"
        else:
            out += fnmatch.translate(parts[i]).removeprefix("(?s:").removesuffix(")\\Z").replace(".*", r"[^\\]*")
            out += r"\\" if i < len(parts) - 1 else ""
        i += 1
    return re.compile(out + r"\Z", re.IGNORECASE | re.DOTALL)


class MpqArchive:
    """One MPQ archive opened read-only. Use as a context manager, or call `close()`."""

    def __init__(self, path: str | os.PathLike, listfile: str | os.PathLike | None = None):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._handle = None
        self._names: list[str] | None = None
        self._stored_names: dict[str, str] = {}  # backslash form (upper case) -> the name as stored
        self.listfiles: list[Path] = []
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._entry_bytes = 0
        if not self.path.is_file():
            raise MpqError(self.path, "no such file" if not self.path.exists() else "not a file")
        lib = storm()
        handle = ctypes.c_void_p()
        if not lib.SFileOpenArchive(_encode(os.fspath(self.path)), 0, MPQ_OPEN_READ_ONLY, ctypes.byref(handle)):
            code = lib.GetLastError()
            raise MpqError(self.path, f"cannot be opened as an MPQ archive: {_why(code)}")
        self._handle = handle
        if listfile is not None:
            self.add_listfile(listfile)

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                storm().SFileCloseArchive(self._handle)
                self._handle = None
            self._entries.clear()
            self._entry_bytes = 0

    def __enter__(self) -> MpqArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    def _open_handle(self):
        if self._handle is None:
            raise MpqError(self.path, "the archive is closed")
        return self._handle

    # -- by name ----------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        """Whether the archive holds `name` (slashes or backslashes, any case; StormLib's hash folds
        case but not '/', so a name is tried as given, then with backslashes, then as the listing
        spells it: `x/y.mdx`, `x\\y.mdx` and `/x/y.mdx` are each found however they were stored)."""
        return self._stored(name) is not None

    def _stored(self, name: str) -> str | None:
        """The name StormLib opens `name` by (the spelling the archive stored), or None."""
        given = str(name)
        lib = storm()
        for candidate in dict.fromkeys((given, entry_name(given))):
            raw = _encode(candidate)
            if len(raw) >= MAX_PATH:
                continue
            with self._lock:
                if lib.SFileHasFile(self._open_handle(), raw):
                    return candidate
        listed = self._spellings().get(entry_name(given).upper())
        if listed is not None and len(_encode(listed)) >= MAX_PATH:
            return listed  # held, but too long to open: _read says so
        if listed is not None:
            with self._lock:
                return listed if lib.SFileHasFile(self._open_handle(), _encode(listed)) else None
        return None

    @staticmethod
    def name_problem(name: str) -> str | None:
        """Why an entry listed under `name` cannot be opened, or None (its name is too long)."""
        size = len(_encode(name))
        if size >= MAX_PATH:
            return f"has a name of {size:,} bytes, longer than the {MAX_PATH - 1:,} StormLib can open"
        return None

    def _spellings(self) -> dict[str, str]:
        """Each listed entry's stored name by its backslash form (upper case); {} when unlisted."""
        try:
            self.names()
        except MpqError:
            return {}
        return self._stored_names

    def read(self, name: str) -> bytes:
        """The bytes of entry `name`; MpqError when it is missing or cannot be read."""
        wanted = entry_name(name)
        key = wanted.upper()  # the MPQ hash's own case folding
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
                return data
        data = self._read(self._stored(name) or wanted)
        with self._lock:
            if key not in self._entries and len(data) <= ENTRY_CACHE_BYTES:
                self._entries[key] = data
                self._entry_bytes += len(data)
                while self._entry_bytes > ENTRY_CACHE_BYTES:
                    self._entry_bytes -= len(self._entries.popitem(last=False)[1])
        return data

    def _read(self, wanted: str) -> bytes:
        lib = storm()
        with self._lock:
            archive = self._open_handle()
            fh = ctypes.c_void_p()
            raw = _encode(wanted)
            if self.name_problem(wanted):
                raise MpqError(self.path, f"entry {wanted[:60]!r}... {self.name_problem(wanted)}")
            if not lib.SFileOpenFileEx(archive, raw, SFILE_OPEN_FROM_MPQ, ctypes.byref(fh)):
                raise MpqError(self.path, f"cannot open entry {wanted!r} ({_why(lib.GetLastError())})")
            try:
                high = ctypes.c_uint32(0)
                size = lib.SFileGetFileSize(fh, ctypes.byref(high))
                if size == 0xFFFFFFFF or high.value or size > MAX_ENTRY_SIZE:
                    raise MpqError(self.path, f"entry {wanted!r} has an impossible size")
                buf = ctypes.create_string_buffer(size)
                got = ctypes.c_uint32(0)
                ok = lib.SFileReadFile(fh, buf, size, ctypes.byref(got), None) if size else True
                if not ok or got.value != size:
                    code = lib.GetLastError()
                    raise MpqError(self.path, f"entry {wanted!r} is corrupt: read {got.value} of {size} bytes "
                                              f"({_why(code)})")
                return buf.raw[:size]
            finally:
                lib.SFileCloseFile(fh)

    # -- listing ----------------------------------------------------------------------------------
    def add_listfile(self, listfile: str | os.PathLike) -> None:
        """Use an external listfile (one name a line) to name the entries of the archive."""
        listfile = Path(listfile)
        try:
            lines = listfile.read_bytes().replace(b"/", b"\\").splitlines()
        except OSError as e:
            raise MpqError(self.path, f"cannot read listfile {listfile} ({e.strerror or e})") from e
        # StormLib hashes names as written: give it backslash names, one per line.
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as tmp:
            tmp.write(b"\r\n".join(line.strip() for line in lines if line.strip()) + b"\r\n")
        try:
            with self._lock:
                code = storm().SFileAddListFile(self._open_handle(), _encode(tmp.name))
        finally:
            os.unlink(tmp.name)
        if code not in (0, 2):  # 2: none of its names is in the archive; that is still fine
            raise MpqError(self.path, f"cannot use listfile {listfile} ({_why(code)})")
        self.listfiles.append(listfile)
        self._names = None

    def has_listfile(self) -> bool:
        with self._lock:
            return bool(storm().SFileHasFile(self._open_handle(), _encode(LISTFILE)))

    def names(self) -> list[str]:
        """Every named entry (backslash paths, sorted case-insensitively), the archive's own
        `(listfile)` and any external listfiles together; MpqError when the archive has no listfile.
        A name StormLib's listing drops (one of MAX_PATH bytes or more) is taken from the (listfile)
        itself, so it is listed, and fails with its problem when read."""
        if self._names is not None:
            return self._names
        if not self.listfiles and not self.has_listfile():
            raise MpqError(self.path, "the archive has no (listfile), so its entries cannot be listed "
                                      "(names still work); give one with --listfile FILE")
        found = self._found() + self._too_long()
        stored: dict[str, str] = {}
        for n in found:
            if not _unnamed(n):
                stored.setdefault(entry_name(n).upper(), n)
        names = sorted((entry_name(n) for n in found if not _unnamed(n)), key=lambda n: (n.lower(), n))
        self._stored_names, self._names = stored, list(dict.fromkeys(names))
        return self._names

    def _found(self) -> list[str]:
        """The names StormLib's own listing gives, sorted (stored names first by their backslash form)."""
        lib = storm()
        found: set[str] = set()
        data = _FindData()
        with self._lock:
            find = lib.SFileFindFirstFile(self._open_handle(), b"*", ctypes.byref(data), None)
            if find:
                try:
                    while True:
                        found.add(os.fsdecode(data.cFileName))
                        if not lib.SFileFindNextFile(find, ctypes.byref(data)):
                            break
                finally:
                    lib.SFileFindClose(find)
        return sorted(found, key=lambda n: ("/" in n, n))

    def _too_long(self) -> list[str]:
        """The (listfile)'s names of MAX_PATH bytes or more, which StormLib's listing leaves out."""
        if not self.has_listfile():
            return []
        try:
            lines = self._read(LISTFILE).splitlines()
        except MpqError:
            return []
        return [os.fsdecode(line.strip()) for line in lines if len(line.strip()) >= MAX_PATH]

    def glob(self, pattern: str) -> list[str]:
        """Entry names matching a glob (`**/*.mdx`; slashes or backslashes; case-insensitive)."""
        rx = glob_to_regex(pattern)
        return [n for n in self.names() if rx.match(n)]

    def __repr__(self) -> str:
        return f"MpqArchive({str(self.path)!r})"


def _unnamed(name: str) -> bool:
    """StormLib's made-up names for entries no listfile names, and the special files."""
    return bool(re.fullmatch(r"File\d{8}\.\w+", name)) or name.startswith("(")
