"""Keyframe tracks (KGTR, KMTA, KP2E, ...): read as one numpy structured array per track."""

from __future__ import annotations

import struct

import numpy as np

from renderer.model import TRACK_TYPES, Track, key_dtype

from .binary import MAX_COUNT, Reader

TRACK_HEADER = struct.Struct("<4sIIi")
NODE_TRACKS = frozenset({"KGTR", "KGRT", "KGSC"})


_TAGS = {tag.encode("latin-1"): tag for tag in TRACK_TYPES}


def read_track(r: Reader) -> Track:
    at = r.pos
    if r.end - at < TRACK_HEADER.size:
        r.need(TRACK_HEADER.size, "track header")
    tagb, n, interp, gsid = TRACK_HEADER.unpack_from(r.buf, at)
    tag = _TAGS.get(tagb)
    if tag is None:
        raise r.error(f"expected a track, found {tagb!r}", at)
    return _track(r, at, tag, n, interp, gsid)


def _track(r: Reader, at: int, tag: str, n: int, interp: int, gsid: int) -> Track:
    """The keys after a track header read at `at` (one bounds check, a view on the buffer)."""
    if interp > 3:
        raise r.error(f"track {tag} has interpolation {interp}; expected 0 (none) to 3 (Bezier)", at + 8)
    dt = key_dtype(tag, interp)
    size = n * dt.itemsize
    left = r.end - at - TRACK_HEADER.size
    if n > MAX_COUNT or size > left:
        raise r.error(f"track {tag} declares {n} keys ({size} bytes) but only {left} bytes remain", at + 4)
    keys = np.frombuffer(r.buf, dt, n, at + TRACK_HEADER.size)
    r.pos = at + TRACK_HEADER.size + size
    return Track(tag, interp, gsid, keys)


def read_tracks(r: Reader, allowed: frozenset[str] | set[str], into: dict[str, Track]) -> None:
    """Read consecutive tracks whose tags are allowed here; stop at anything else."""
    buf, unpack = r.buf, TRACK_HEADER.unpack_from
    while r.end - r.pos >= TRACK_HEADER.size:
        at = r.pos
        tagb, n, interp, gsid = unpack(buf, at)
        tag = _TAGS.get(tagb)
        if tag is None or tag not in allowed or tag in into:
            return
        into[tag] = _track(r, at, tag, n, interp, gsid)


def write_track(t: Track, out: list) -> None:
    if t.tag not in TRACK_TYPES:
        raise ValueError(f"unknown track tag {t.tag!r}")
    keys = t.keys
    want = key_dtype(t.tag, t.interpolation)
    if keys.dtype != want:
        keys = keys.astype(want)
    out.append(TRACK_HEADER.pack(t.tag.encode("latin-1"), len(keys), t.interpolation, t.global_sequence_id))
    out.append(keys.tobytes())

