"""Bounded little-endian reading for MDX: every read is checked against the bytes that remain.

A `Reader` covers one region of the file (the whole file, a chunk or a record). It knows the
file's path and a description of where it is, so every failure becomes a `FormatError` naming the
file, the place, the byte offset and the problem. Arrays are numpy views straight on the buffer.
"""

from __future__ import annotations

import struct

import numpy as np

from renderer.errors import FormatError

U32 = struct.Struct("<I")
I32 = struct.Struct("<i")
F32 = struct.Struct("<f")

# No plausible count exceeds this many elements; larger counts are rejected before the
# bytes-remaining check even runs, so a corrupt count never sizes an allocation.
MAX_COUNT = 1 << 28


class Reader:
    __slots__ = ("buf", "pos", "end", "path", "where")

    def __init__(self, buf: bytes | memoryview, path: str, where: str = "", pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.path = path
        self.where = where

    # -- errors ---------------------------------------------------------------------------
    def error(self, problem: str, offset: int | None = None) -> FormatError:
        return FormatError(self.path, self.where, self.pos if offset is None else offset, problem)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            left = self.end - self.pos
            raise self.error(f"{what} needs {n} bytes but only {left} remain{'s' if left == 1 else ''}")

    def sub(self, size: int, where: str) -> Reader:
        """A reader over the next `size` bytes; advances this reader past them."""
        self.need(size, where)
        r = Reader(self.buf, self.path, where, self.pos, self.pos + size)
        self.pos += size
        return r

    def inclusive(self, label: str, minimum: int = 4) -> Reader:
        """Read a record's inclusive size (a u32 that counts itself) and return a reader over the
        rest of the record; this reader moves past the whole record."""
        start = self.pos
        size = self.u32(f"{label} inclusive size")
        if size < minimum or size - 4 > self.end - self.pos:
            raise self.error(
                f"{label} inclusive size {size} is outside {minimum}..{self.end - self.pos + 4} "
                "(the bytes left in the chunk)", start)
        r = Reader(self.buf, self.path, self.where, self.pos, start + size)
        self.pos = start + size
        return r

    # -- scalars --------------------------------------------------------------------------
    def unpack(self, st: struct.Struct, what: str) -> tuple:
        self.need(st.size, what)
        v = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def u32(self, what: str) -> int:
        self.need(4, what)
        v = U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i32(self, what: str) -> int:
        self.need(4, what)
        v = I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def tag(self, what: str = "tag") -> str:
        self.need(4, what)
        v = bytes(self.buf[self.pos : self.pos + 4]).decode("latin-1")
        self.pos += 4
        return v

    def expect_tag(self, tag: str) -> None:
        """Read a 4-byte tag that must be `tag`."""
        at = self.pos
        got = self.tag(f"{tag} tag")
        if got != tag:
            raise self.error(f"expected {tag}, found {got!r}", at)

    def peek_tag(self) -> str | None:
        if self.end - self.pos < 4:
            return None
        return bytes(self.buf[self.pos : self.pos + 4]).decode("latin-1")

    def raw(self, n: int, what: str) -> bytes:
        self.need(n, what)
        v = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return v

    def rest(self) -> bytes:
        v = bytes(self.buf[self.pos : self.end])
        self.pos = self.end
        return v

    # -- arrays ---------------------------------------------------------------------------
    def count(self, what: str, itemsize: int) -> int:
        """Read a u32 element count and check that that many elements fit in what remains."""
        at = self.pos
        n = self.u32(f"{what} count")
        if n > MAX_COUNT or n * itemsize > self.end - self.pos:
            raise self.error(
                f"{what} count {n} needs {n * itemsize} bytes but only {self.end - self.pos} remain", at
            )
        return n

    def array(self, dtype: np.dtype | str, n: int, what: str) -> np.ndarray:
        dt = np.dtype(dtype)
        size = n * dt.itemsize
        self.need(size, f"{what} ({n} elements)")
        a = np.frombuffer(self.buf, dt, n, self.pos)
        self.pos += size
        return a


def append_sized(out: list, body: list, header: bytes = b"", inclusive: bool = True) -> None:
    """Append `header`, the body's byte length (+4 when the size counts itself), then the body.

    The pieces are appended, not joined: the file is joined once, at the end.
    """
    n = sum(map(len, body))
    out.append(header + U32.pack(n + 4 if inclusive else n))
    out.extend(body)


def fixed_string(raw: bytes) -> RawStr:
    """Decode a NUL-padded fixed-size name, keeping the exact bytes for a byte-exact rewrite."""
    cut = raw.find(b"\0")
    text = raw if cut < 0 else raw[:cut]
    s = RawStr(text.decode("utf-8", "surrogateescape"))
    s.raw = raw
    return s


def encode_fixed(s: str, size: int, what: str = "name") -> bytes:
    """Encode a name into its fixed field: the original bytes when unchanged, else NUL-padded."""
    raw = getattr(s, "raw", None)
    if raw is not None and len(raw) == size:
        return raw
    b = str(s).encode("utf-8", "surrogateescape")
    if len(b) >= size:
        raise ValueError(f"{what} {s!r} is {len(b)} bytes; the field holds at most {size - 1}")
    return b + b"\0" * (size - len(b))


class RawStr(str):
    """A str that remembers the fixed-size field it came from (padding bytes after the NUL).

    It compares and hashes as plain text; only the MDX writer looks at `raw`.
    """

    raw: bytes | None = None

    def __reduce__(self):  # pickles as text plus raw bytes
        return (_rawstr, (str(self), self.raw))


def _rawstr(text: str, raw: bytes | None) -> RawStr:
    s = RawStr(text)
    s.raw = raw
    return s
