"""Building real MPQ archives from folders for the asset tests and bench/assets.py: with `smpq`
(Debian package smpq: compressed, optionally encrypted, always with a (listfile)), or, for an
archive without a (listfile) (smpq always writes one), with StormLib's own writer through ctypes.
A map form prepends the 512-byte HM3W header Warcraft III maps start with.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from renderer.assets.mpq import storm

ROOT = Path(__file__).resolve().parents[1]
HM3W_SIZE = 512
MPQ_FILE_COMPRESS, MPQ_FILE_ENCRYPTED, MPQ_FILE_FIX_KEY = 0x200, 0x10000, 0x20000
MPQ_COMPRESSION_ZLIB, MPQ_COMPRESSION_NEXT_SAME = 0x02, 0xFFFFFFFF


def have_tools() -> str | None:
    """Why archives cannot be built here, or None."""
    try:
        storm()
    except Exception as e:  # noqa: BLE001
        return str(e)
    return None if shutil.which("smpq") else "smpq is not installed (scripts/system-deps.sh installs it)"


def files_of(folder: Path) -> list[str]:
    """Every file under `folder`, as relative paths with forward slashes, sorted."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def hm3w_header(name: str = "Test map") -> bytes:
    head = b"HM3W" + b"\0" * 4 + name.encode() + b"\0" + struct.pack("<II", 0, 1)
    return head.ljust(HM3W_SIZE, b"\0")


def build(folder: Path, dest: Path, *, encrypt: bool = False, listfile: bool = True, map_header: bool = False) -> Path:
    """An MPQ archive (format 1, zlib) holding every file under `folder` by its relative path."""
    folder, dest = Path(folder), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    raw = dest.with_name(dest.name + ".raw") if map_header else dest
    names = files_of(folder)
    if listfile:
        cmd = ["smpq", "-c", "-q", "-M", "1", "-C", "ZLIB", *(["-E", "-F"] if encrypt else []), str(raw.resolve()),
               *names]
        subprocess.run(cmd, cwd=folder, check=True, capture_output=True)
    else:
        # In a child process: after StormLib has written an archive in a process, closing an
        # archive opened earlier there breaks reads of encrypted entries of later ones (9.22).
        cmd = [sys.executable, __file__, str(folder), str(raw), "1" if encrypt else "0"]
        subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if map_header:
        dest.write_bytes(hm3w_header() + raw.read_bytes())
        raw.unlink()
    return dest


class _CreateInfo(ctypes.Structure):  # SFILE_CREATE_MPQ
    _fields_ = [("cbSize", ctypes.c_uint32), ("dwMpqVersion", ctypes.c_uint32), ("pvUserData", ctypes.c_void_p),
                ("cbUserData", ctypes.c_uint32), ("dwStreamFlags", ctypes.c_uint32),
                ("dwFileFlags1", ctypes.c_uint32), ("dwFileFlags2", ctypes.c_uint32),
                ("dwFileFlags3", ctypes.c_uint32), ("dwAttrFlags", ctypes.c_uint32),
                ("dwSectorSize", ctypes.c_uint32), ("dwRawChunkSize", ctypes.c_uint32),
                ("dwMaxFileCount", ctypes.c_uint32)]


def _build_unlisted(folder: Path, dest: Path, names: list[str], encrypt: bool) -> None:
    """SFileCreateArchive always adds a (listfile) in StormLib 9.22; SFileCreateArchive2 with
    dwFileFlags1 = 0 (and no attributes) does not."""
    lib = storm()
    lib.SFileCreateArchive2.restype = ctypes.c_bool
    lib.SFileCreateArchive2.argtypes = [ctypes.c_char_p, ctypes.POINTER(_CreateInfo), ctypes.POINTER(ctypes.c_void_p)]
    lib.SFileAddFileEx.restype = ctypes.c_bool
    lib.SFileAddFileEx.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
                                   ctypes.c_uint32, ctypes.c_uint32]
    if dest.exists():
        dest.unlink()
    handle = ctypes.c_void_p()
    size = 16
    while size < 2 * len(names):
        size *= 2
    info = _CreateInfo(cbSize=ctypes.sizeof(_CreateInfo), dwMpqVersion=0, dwSectorSize=0x1000, dwMaxFileCount=size)
    if not lib.SFileCreateArchive2(os.fsencode(dest), ctypes.byref(info), ctypes.byref(handle)):
        raise OSError(f"SFileCreateArchive2 {dest} failed ({lib.GetLastError()})")
    try:
        flags = MPQ_FILE_COMPRESS | ((MPQ_FILE_ENCRYPTED | MPQ_FILE_FIX_KEY) if encrypt else 0)
        for name in names:
            if not lib.SFileAddFileEx(handle, os.fsencode(folder / name), name.replace("/", "\\").encode(), flags,
                                      MPQ_COMPRESSION_ZLIB, MPQ_COMPRESSION_NEXT_SAME):
                raise OSError(f"SFileAddFileEx {name} failed ({lib.GetLastError()})")
    finally:
        lib.SFileCloseArchive(handle)


if __name__ == "__main__":
    src, out, enc = sys.argv[1:4]
    _build_unlisted(Path(src), Path(out), files_of(Path(src)), enc == "1")
