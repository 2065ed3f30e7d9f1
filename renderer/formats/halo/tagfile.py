"""HEK tag files: the 64-byte header, a bounded big-endian cursor, tag references, the tag root.

A loose tag file is big-endian throughout: a 64-byte header, the tag's root struct, then every
child (block elements, then each element's own children; tag-reference paths; raw data) appended
depth-first in field order (see ../shared/docs/halo-tags.md §1.3). `TagCursor` walks that layout:
every read is checked against the bytes that remain, so a corrupt count or length becomes a
`FormatError` naming the file, the block, the byte offset and the problem, never an allocation.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from renderer.assets.search import Asset
from renderer.assets.trees import AssetFolder
from renderer.errors import Diagnostic, FormatError

HEADER_SIZE = 64
ENGINE_BLAM = b"blam"
HEADER = struct.Struct(">I32s4sIIQHBB4s")  # id, name, class, checksum, header size, pad, version, i0, i1, engine
REFLEXIVE = struct.Struct(">III")  # count, pointer (junk in tag files), definition
DEPENDENCY = struct.Struct(">4sIII")  # class, path pointer (junk), path length, tag id
MAX_PATH = 255  # the HEK's tag path limit (without the extension)

# Tag-class FourCC -> file extension, for the classes a model tag refers to.
EXTENSIONS = {
    b"mode": ".model",
    b"mod2": ".gbxmodel",
    b"bitm": ".bitmap",
    b"soso": ".shader_model",
    b"schi": ".shader_transparent_chicago",
    b"scex": ".shader_transparent_chicago_extended",
    b"sotr": ".shader_transparent_generic",
    b"senv": ".shader_environment",
    b"sgla": ".shader_transparent_glass",
    b"smet": ".shader_transparent_meter",
    b"spla": ".shader_transparent_plasma",
    b"swat": ".shader_transparent_water",
    b"shdr": ".shader",
}


@dataclass
class TagHeader:
    tag_class: bytes
    version: int
    checksum: int
    computed_checksum: int
    header_size: int
    engine: bytes

    @property
    def checksum_ok(self) -> bool | None:
        """True/False when a checksum is stored; None when the field is zero (no checksum written)."""
        if self.checksum == 0:
            return None
        return self.checksum == self.computed_checksum


def tag_checksum(data: bytes | memoryview) -> int:
    """The header checksum the HEK writes: the bitwise NOT of the CRC-32 of everything after the header."""
    return zlib.crc32(data[HEADER_SIZE:]) ^ 0xFFFFFFFF


def read_header(data: bytes | memoryview, path: str, classes: dict[bytes, int]) -> tuple[TagHeader, list[Diagnostic]]:
    """Parse and validate the 64-byte header. `classes` maps each accepted class to its version.

    The engine id, the class and the version must match (else `FormatError`). A stored checksum that
    differs from ~CRC32(data[64:]) is a diagnostic; so is an odd header size or integrity byte.
    """
    notes: list[Diagnostic] = []
    if len(data) < HEADER_SIZE:
        raise FormatError(path, "tag header", 0, f"a tag file needs a {HEADER_SIZE}-byte header but the file has "
                          f"{len(data)} bytes")
    _id, _name, cls, checksum, header_size, _pad, version, i0, i1, engine = HEADER.unpack_from(data, 0)
    if engine != ENGINE_BLAM:
        raise FormatError(path, "tag header", 0x3C, f"engine id is {engine!r}, expected b'blam': not a Halo tag file")
    if cls not in classes:
        want = " or ".join(repr(c.decode()) for c in classes)
        raise FormatError(path, "tag header", 0x24, f"tag class is {cls!r}, expected {want}")
    if version != classes[cls]:
        raise FormatError(path, "tag header", 0x38,
                          f"class {cls.decode()!r} version {version} is not supported (expected {classes[cls]})")
    computed = tag_checksum(data)
    header = TagHeader(cls, version, checksum, computed, header_size, engine)
    if checksum != 0 and checksum != computed:
        notes.append(Diagnostic("tag header", 0x28, f"checksum 0x{checksum:08x} does not match "
                                f"~crc32 of the tag data 0x{computed:08x}"))
    if header_size not in (HEADER_SIZE, 0):
        notes.append(Diagnostic("tag header", 0x2C, f"header size field is {header_size}, expected 64"))
    if (i0, i1) not in ((0, 255), (0, 0)):
        notes.append(Diagnostic("tag header", 0x3A, f"integrity bytes are {i0}, {i1}, expected 0, 255"))
    return header, notes


def tag_string(raw: bytes) -> str:
    """A TagString (char[32]): the bytes before the first NUL, latin-1."""
    return raw.split(b"\0", 1)[0].decode("latin-1")


class TagCursor:
    """Walks the children appended after a tag's root struct, in order, never past the end."""

    __slots__ = ("data", "pos", "end", "path")

    def __init__(self, data: bytes | memoryview, path: str, pos: int = HEADER_SIZE):
        self.data = data
        self.pos = pos
        self.end = len(data)
        self.path = path

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def error(self, where: str, problem: str, offset: int | None = None) -> FormatError:
        return FormatError(self.path, where, self.pos if offset is None else offset, problem)

    def take(self, size: int, where: str, what: str = "") -> int:
        """Advance past `size` bytes and return where they start; FormatError when they are not there."""
        if size < 0:
            raise self.error(where, f"{what or 'data'} has a negative size {size}")
        if size > self.end - self.pos:
            left = self.end - self.pos
            raise self.error(where, f"{what or 'data'} needs {size} bytes but only {left} remain in the file")
        at = self.pos
        self.pos += size
        return at

    def array(self, count: int, dtype: np.dtype, where: str, what: str) -> tuple[np.ndarray, int]:
        """`count` elements of `dtype` (a read-only view on the file bytes) and their offset.

        The count is checked against the bytes that remain before anything is allocated."""
        size = count * dtype.itemsize
        if size > self.end - self.pos:
            left = self.end - self.pos
            raise self.error(where, f"{count} {what} of {dtype.itemsize} bytes need {size} bytes but only "
                             f"{left} remain in the file")
        at = self.take(size, where, what)
        return np.frombuffer(self.data, dtype, count, at), at

    def dependency_path(self, length: int, where: str, notes: list[Diagnostic]) -> str:
        """The path string of a tag reference whose length field is `length` (nothing when 0)."""
        if length == 0:
            return ""
        if length > MAX_PATH:
            raise self.error(where, f"tag reference path length {length} is over the limit of {MAX_PATH}")
        at = self.take(length + 1, where, "tag reference path")
        raw = bytes(self.data[at : at + length + 1])
        if raw[-1] != 0:
            notes.append(Diagnostic(where, at + length, "tag reference path is not NUL-terminated"))
        return raw[:length].split(b"\0", 1)[0].decode("latin-1")


def reflexive(raw: bytes | memoryview, offset: int) -> int:
    """The element count of the 12-byte block header at `offset` of a struct's bytes."""
    return REFLEXIVE.unpack_from(raw, offset)[0]


def dependency(raw: bytes | memoryview, offset: int) -> tuple[bytes, int]:
    """(class FourCC, path length) of the 16-byte tag reference at `offset` of a struct's bytes."""
    cls, _ptr, length, _id = DEPENDENCY.unpack_from(raw, offset)
    return cls, length


# -- the tag root ------------------------------------------------------------------------------------

_DRIVE = re.compile(r"^[A-Za-z]:")
_SEPARATORS = re.compile(r"[\\/]+")


def find_tag_root(path: Path) -> Path | None:
    """The nearest folder named `tags` (any case) above `path`, or None."""
    for parent in Path(os.path.abspath(path)).parents:
        if parent.name.lower() == "tags":
            return parent
    return None


def path_refusal(tag_path: str) -> str | None:
    """Why a tag path may not be looked up under the tag root, or None when it may."""
    if not tag_path:
        return "the path is empty"
    if "\0" in tag_path:
        return "the path contains a NUL byte"
    if _DRIVE.match(tag_path) or tag_path[0] in "\\/":
        return "absolute paths are refused"
    for part in _SEPARATORS.split(tag_path):
        if part and not part.strip(". "):
            return f"component {part!r} is a parent reference or only dots and spaces"
        if ":" in part:
            return f"component {part!r} contains ':'"
    return None


class TagRoot:
    """The Halo reader's resolver (renderer.formats' contract): tag paths looked up case-insensitively
    under one tag root, never outside it (the matching is the asset search's,
    `renderer.assets.trees.AssetFolder`: exact case first, then sorted). `find` answers with the
    tag's bytes, read once; `record` lists every answer the way the asset search records a lookup
    (kind "halo tag"), and `assets` keeps the bytes found, so the renderer decodes and records them
    without reading the tag tree again, and a coordinator can pin them for a worker that cannot see it
    (renderer.assets.pins)."""

    kind = "halo tag"

    def __init__(self, root: Path):
        self.root = Path(root)
        self._store = AssetFolder(self.root)
        self._real = self._store.real
        self.record: list[dict] = []
        self.assets: dict[str, Asset] = {}  # asked (tag path + extension) -> what was found
        self._answers: dict[str, tuple[Asset | None, str, str]] = {}  # lower-case asked -> (asset, why, missing)

    @property
    def label(self) -> str:
        return str(self.root)

    def find(self, tag_path: str, extension: str) -> tuple[Asset | None, str]:
        """The tag `tag_path` + `extension` under the root (its bytes, as an Asset), or None and why not."""
        asked = tag_path + extension
        key = asked.lower()
        if key not in self._answers:
            self._answers[key] = answer = self._lookup(tag_path, extension)
            asset, _, missing = answer
            if asset is not None:
                self.assets[asked] = asset
                self.record.append({"kind": self.kind, "asked": asked, "found": asset.where, "sha256": asset.sha256,
                                    "how": "exact"})
            else:
                looked = [] if missing.startswith("refused") else [self.label]
                self.record.append({"kind": self.kind, "asked": asked, "missing": True, "why": missing,
                                    "looked": looked, "said": answer[1]})
        asset, why, _ = self._answers[key]
        return asset, why

    def missing_why(self, tag_path: str, extension: str = "") -> str:
        """Why `find` found no tag for `tag_path` (as the asset search records a missing asset: refused
        paths are "refused: ...", the rest name what was searched)."""
        answer = self._answers.get((tag_path + extension).lower())
        if answer is not None:
            return answer[2]
        why = path_refusal(tag_path)
        if why is not None:
            return f"refused: {why}"
        if self._real is None:
            return "was not found: the tag root is not a folder"
        return "was not found under the tag root"

    def _lookup(self, tag_path: str, extension: str) -> tuple[Asset | None, str, str]:
        why = path_refusal(tag_path)
        if why is not None:
            return None, f"refused {tag_path!r}: {why}", f"refused: {why}"
        if self._real is None:
            return None, f"tag root {self.root} is not a folder", "was not found: the tag root is not a folder"
        parts = [p for p in _SEPARATORS.split(tag_path + extension) if p not in ("", ".")]
        hit = self._store.find((), parts, [], [self._real])
        if hit is None:
            return (None, f"{tag_path + extension!r} not found under the tag root {self.root}",
                    "was not found under the tag root")
        try:
            data = hit[1]()
        except OSError as e:
            return None, f"{hit[0]}: cannot read: {e.strerror or e}", f"cannot be read: {e.strerror or e}"
        return Asset(self.kind, tag_path + extension, hit[0], data, hashlib.sha256(data).hexdigest()), "", ""


NO_TAG_ROOT = "has no tag root (no folder named 'tags' above the model and no tag_root option)"
