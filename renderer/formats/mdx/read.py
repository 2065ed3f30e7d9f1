"""Read an MDX file into a Model: walk the chunks, read each with its codec, then check indices."""

from __future__ import annotations

import struct

import numpy as np

from renderer import rules
from renderer.errors import Diagnostic, FormatError
from renderer.model import TRACK_TYPES, Model, UnknownChunk

from . import layouts as L
from .binary import Reader
from .chunks import FIXED_CHUNKS, KNOWN_CHUNKS, RECORD_CHUNKS
from .geosets import read_geoset
from .records import FIXED_RECORDS

U32 = struct.Struct("<I")


def read_mdx(data: bytes, path: str = "<bytes>", *, strict: bool = False, check_indices: bool = True,
             resolver=None) -> Model:
    """Parse MDX bytes (renderer.formats' reader contract; an MDX refers to nothing while it loads,
    so `resolver` is unused).

    Structural problems always raise `FormatError`. Indices that point past what they index
    (PVTX, GNDX, MATS, layer textures, ...) raise too unless `check_indices` is False, when they
    become diagnostics: `farm convert` uses that so a broken model can be fixed in MDL by hand.
    `strict` turns every diagnostic into an error.
    """
    model = Model(path=path)
    r = Reader(data, path, "file header")
    if len(data) < 4 or data[:4] != b"MDLX":
        raise r.error(f"not an MDX file: starts with {bytes(data[:4])!r}, expected b'MDLX'", 0)
    r.pos = 4
    ctx = _Context(model)
    version_seen = False
    while r.pos < r.end:
        at = r.pos
        if r.remaining < 8:
            _trailing(model, data, at, "a partial chunk header")
            break
        tagb = bytes(data[at : at + 4])
        tag = tagb.decode("latin-1")
        size = U32.unpack_from(data, at + 4)[0]
        if size > r.remaining - 8:
            if tag in KNOWN_CHUNKS or (tagb.isalnum() and tagb.isupper()):
                raise FormatError(
                    path, f"chunk {tag}", at + 4,
                    f"chunk size {size} runs past the end of the file ({r.remaining - 8} bytes left)",
                )
            _trailing(model, data, at, f"bytes that are not a chunk (tag {tagb!r})")
            break
        cr = Reader(data, path, f"chunk {tag}", at + 8, at + 8 + size)
        r.pos = at + 8 + size
        if tag == "VERS":
            model.version = cr.u32("version")
            version_seen = True
            if model.version > rules.NEWEST_KNOWN_VERSION:
                ctx.diag(f"chunk {tag}", at + 8,
                         f"version {model.version} is newer than {rules.NEWEST_KNOWN_VERSION}; "
                         "loading what is known and keeping the rest as raw bytes")
            model.layout.append((tag, 1))
            _expect_consumed(cr, tag)
            continue
        if not version_seen and tag in KNOWN_CHUNKS:
            version_seen = True
            ctx.diag(f"chunk {tag}", at, "no VERS chunk before the first chunk; assuming version 800")
        if tag in TRACK_TYPES:
            prev = model.layout[-1][0] if model.layout else "header"
            raise FormatError(
                path, f"chunk {prev}", at,
                f"found track {tag} where a chunk should start: the size of the chunk {prev} before it "
                "is too small to hold its records",
            )
        if tag not in KNOWN_CHUNKS:
            ctx.diag(f"chunk {tag}", at, f"unknown chunk {tag!r} ({size} bytes) kept as raw bytes")
            ctx.keep_raw(tag, cr)
            continue
        if model.version > rules.NEWEST_KNOWN_VERSION:
            try:
                count = _read_chunk(ctx, tag, cr)
            except FormatError as e:
                ctx.diag(f"chunk {tag}", e.offset, f"not understood in version {model.version} "
                         f"({e.problem}); kept as raw bytes")
                cr.pos = at + 8
                ctx.keep_raw(tag, cr)
                continue
        else:
            count = _read_chunk(ctx, tag, cr)
        model.layout.append((tag, count))
    _finish(ctx, check_indices, strict)
    return model


def _finish(ctx: _Context, check_indices: bool, strict: bool) -> None:
    """After the chunks: index problems raised (or noted, without `check_indices`), extra bytes and
    invalid filter modes noted, and with `strict` the first diagnostic raised."""
    model, path = ctx.model, ctx.model.path
    problems = ctx.problems + _validate(ctx)
    if problems:
        if check_indices:
            raise problems[0]
        for e in problems:
            ctx.diag(e.where, e.offset, e.problem)
    for spec, obj in ctx.extras:
        if obj.extra:
            ctx.diag(spec, None, f"{len(obj.extra)} bytes past the known fields kept as raw bytes")
    for i, e in enumerate(model.particle_emitters2):
        if not 0 <= e.filter_mode < len(rules.PRE2_FILTER_MODES):
            ctx.diag(f"chunk PRE2 particle emitter 2 {i} ({e.name!r})", None,
                     f"invalid filter mode {e.filter_mode}; drawn as Blend")
    if strict and model.diagnostics:
        d = model.diagnostics[0]
        raise FormatError(path, d.where, d.offset, f"{d.message} (strict mode)")


class _Context:
    def __init__(self, model: Model):
        self.model = model
        self.offsets: dict[tuple[str, int], int] = {}
        self.geoset_offsets: list[dict[str, int]] = []
        self.extras: list = []
        self.problems: list[FormatError] = []

    def diag(self, where: str, offset: int | None, message: str) -> None:
        self.model.diagnostics.append(Diagnostic(where, offset, message))

    def keep_raw(self, tag: str, cr: Reader) -> None:
        self.model.unknown_chunks.append(UnknownChunk(tag, cr.rest()))
        self.model.layout.append((tag, -1))


def _trailing(model: Model, data: bytes, at: int, what: str) -> None:
    model.trailing = bytes(data[at:])
    model.diagnostics.append(Diagnostic("end of file", at, f"{len(data) - at} trailing bytes after the last chunk "
                                        f"({what}) kept as raw bytes"))


def _expect_consumed(cr: Reader, tag: str) -> None:
    if cr.remaining:
        raise cr.error(f"{cr.remaining} bytes left over at the end of chunk {tag}")


def _read_chunk(ctx: _Context, tag: str, cr: Reader) -> int:
    model, version = ctx.model, ctx.model.version
    if tag == "MODL":
        L.MODEL_INFO.read(cr, model, "model info")
        model.model_extra = cr.rest()
        return 1
    if tag in FIXED_CHUNKS:
        cls, layout, label = FIXED_RECORDS[tag]
        if cr.remaining % layout.size:
            raise cr.error(f"chunk size {cr.remaining} is not a multiple of the {layout.size}-byte {label} record")
        dest = getattr(model, FIXED_CHUNKS[tag])
        n = cr.remaining // layout.size
        for i in range(n):
            obj = cls()
            cr.where = f"chunk {tag} {label} {i}"
            layout.read(cr, obj, label)
            dest.append(obj)
        return n
    if tag == "GLBS":
        if cr.remaining % 4:
            raise cr.error(f"chunk size {cr.remaining} is not a multiple of 4")
        vals = cr.array("<u4", cr.remaining // 4, "global sequence durations").tolist()
        model.global_sequences.extend(vals)
        return len(vals)
    if tag == "PIVT":
        if cr.remaining % 12:
            raise cr.error(f"chunk size {cr.remaining} is not a multiple of the 12-byte pivot")
        n = cr.remaining // 12
        piv = cr.array("<f4", n * 3, "pivots").reshape(n, 3)
        model.pivots = piv if len(model.pivots) == 0 else np.concatenate([model.pivots, piv])
        return n
    if tag == "BPOS":
        n = cr.count("bind pose matrix", 48)
        mats = cr.array("<f4", n * 12, "bind pose matrices").reshape(n, 12)
        model.bind_pose = mats if model.bind_pose is None else np.concatenate([model.bind_pose, mats])
        _expect_consumed(cr, tag)
        return n
    spec = RECORD_CHUNKS[tag]
    dest = getattr(model, spec.attr)
    prefix = f"chunk {tag} {spec.label} "
    read = spec.read
    first = len(dest)
    while cr.pos < cr.end:
        i = len(dest)
        ctx.offsets[(tag, i)] = cr.pos
        cr.where = prefix + str(i)
        if tag == "GEOS":
            obj, offs, problems = read_geoset(cr, version)
            ctx.geoset_offsets.append(offs)
            ctx.problems.extend(problems)
        else:
            obj = read(cr, version)
        dest.append(obj)
    if dest and hasattr(dest[-1], "extra"):
        ctx.extras.extend((prefix + str(i), dest[i]) for i in range(first, len(dest)))
    return len(dest) - first


def _validate(ctx: _Context) -> list[FormatError]:
    """Cross-chunk index checks: each problem names the record and its byte offset."""
    m, path = ctx.model, ctx.model.path
    problems: list[FormatError] = []

    def fail(tag: str, i: int, label: str, problem: str, offset: int | None = None):
        at = ctx.offsets.get((tag, i)) if offset is None else offset
        problems.append(FormatError(path, f"chunk {tag} {label} {i}", at, problem))

    ntex = len(m.textures)
    for i, mat in enumerate(m.materials):
        for j, layer in enumerate(mat.layers):
            ids = [layer.texture_id] + [s.texture_id for s in layer.textures]
            track = layer.tracks.get("KMTF")
            if track is not None and len(track.keys):
                ids.append(int(track.values.max()))
            for tid in ids:
                if not 0 <= tid < ntex:
                    fail("MTLS", i, "material", f"layer {j} names texture {tid}, but the model has {ntex} textures")
    object_ids = {n.object_id for n in m.nodes()}
    for i, g in enumerate(m.geosets):
        offs = ctx.geoset_offsets[i] if i < len(ctx.geoset_offsets) else {}
        if m.materials and not 0 <= g.material_id < len(m.materials):
            fail("GEOS", i, "geoset", f"names material {g.material_id}, but the model has {len(m.materials)} materials",
                 offs.get("material"))
        if len(g.matrix_indices):
            missing = sorted(set(np.unique(g.matrix_indices).tolist()) - object_ids)
            if missing:
                fail("GEOS", i, "geoset", f"MATS names node {missing[0]}, but no node has that object id",
                     offs.get("MATS"))
    for i, ga in enumerate(m.geoset_animations):
        if not 0 <= ga.geoset_id < len(m.geosets) and ga.geoset_id != 0xFFFFFFFF:
            fail("GEOA", i, "geoset animation", f"names geoset {ga.geoset_id}, but the model has {len(m.geosets)}")
    return problems


def chunk_table(data: bytes) -> list[tuple[str, int, int]]:
    """(tag, offset, size) of each top-level chunk, for inspection; stops at the first bad header."""
    out = []
    pos = 4
    while pos + 8 <= len(data):
        tag = bytes(data[pos : pos + 4]).decode("latin-1")
        size = U32.unpack_from(data, pos + 4)[0]
        if size > len(data) - pos - 8:
            break
        out.append((tag, pos, size))
        pos += 8 + size
    return out
