"""Keyframe tracks (KGTR, KMTA, KP2E, ...): read as one numpy structured array per track."""

from __future__ import annotations

import struct

from renderer.model import TRACK_TYPES, Track, key_dtype

from .binary import MAX_COUNT, Reader

TRACK_HEADER = struct.Struct("<4sIIi")
NODE_TRACKS = frozenset({"KGTR", "KGRT", "KGSC"})


def read_track(r: Reader) -> Track:
    at = r.pos
    tagb, n, interp, gsid = r.unpack(TRACK_HEADER, "track header")
    tag = tagb.decode("latin-1")
    if interp > 3:
        raise r.error(f"track {tag} has interpolation {interp}; expected 0 (none) to 3 (Bezier)", at + 8)
    dt = key_dtype(tag, interp)
    if n > MAX_COUNT or n * dt.itemsize > r.remaining:
        raise r.error(
            f"track {tag} declares {n} keys ({n * dt.itemsize} bytes) but only {r.remaining} bytes remain",
            at + 4,
        )
    return Track(tag, interp, gsid, r.array(dt, n, f"track {tag} keys"))


def read_tracks(r: Reader, allowed: frozenset[str] | set[str], into: dict[str, Track]) -> None:
    """Read consecutive tracks whose tags are allowed here; stop at anything else."""
    while r.remaining >= TRACK_HEADER.size:
        tag = r.peek_tag()
        if tag not in allowed or tag in into:
            return
        into[tag] = read_track(r)


def write_track(t: Track, out: list) -> None:
    if t.tag not in TRACK_TYPES:
        raise ValueError(f"unknown track tag {t.tag!r}")
    keys = t.keys
    want = key_dtype(t.tag, t.interpolation)
    if keys.dtype != want:
        keys = keys.astype(want)
    out.append(TRACK_HEADER.pack(t.tag.encode("latin-1"), len(keys), t.interpolation, t.global_sequence_id))
    out.append(keys.tobytes())

