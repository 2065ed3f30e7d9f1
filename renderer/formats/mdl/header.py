"""Model-wide blocks: Version, Model, Sequences, GlobalSequences, Textures, SoundTracks,
PivotPoints, BindPose and FaceFX.

    Version { FormatVersion 800, }
    Model "name" { NumGeosets 1, BlendTime 150, MinimumExtent { .. }, MaximumExtent { .. },
                   BoundsRadius r, AnimationFile "path", }
    Sequences 1 { Anim "Stand" { Interval { 0, 1000 }, NonLooping, MoveSpeed 0, Rarity 0,
                  SyncPoint 0, MinimumExtent { .. }, MaximumExtent { .. }, BoundsRadius r, } }
    GlobalSequences 2 { Duration 1000, Duration 333, }
    Textures 1 { Bitmap { Image "path", ReplaceableId 1, WrapWidth, WrapHeight, } }
    SoundTracks 1 { SoundTrack { Path "x.wav", Volume 1, Pitch 1, } }      (pre-release SNDS)
    PivotPoints 2 { { x, y, z }, { x, y, z }, }
    BindPose { Matrices 2 { { 12 numbers }, { 12 numbers }, } }
    FaceFX "target" { Path "path", }

Counted containers whose count disagrees with what they hold load what they hold, with a
diagnostic (real files have this); counted arrays (PivotPoints, Matrices) must match exactly.
"""

from __future__ import annotations

import numpy as np

from renderer.model import FaceEffect, Model, Sequence, SoundTrack, Texture

from .fields import Field, Spec, check_size, emit, field_items, flag_items, read_named, read_record, write_record
from .text import Out, rows_text
from .tokens import Parser

EXTENT_FIELDS = (
    Field("MinimumExtent", "extent.min", "vec3", omit_default=True),
    Field("MaximumExtent", "extent.max", "vec3", omit_default=True),
    Field("BoundsRadius", "extent.radius", "f", omit_default=True),
)

MODEL = Spec(
    "Model", Model,
    (Field("BlendTime", "blend_time", "u32"),) + EXTENT_FIELDS
    + (Field("AnimationFile", "animation_file", "str", omit_default=True, size=260),),
    flags_attr=None, ignore_prefix="Num", label="Model",
)
SEQUENCE = Spec(
    "Anim", Sequence,
    (
        Field("Interval", "interval", "u32x2"),
        Field("MoveSpeed", "move_speed", "f", omit_default=True),
        Field("Rarity", "rarity", "f", omit_default=True),
        Field("SyncPoint", "sync_point", "u32", omit_default=True),
    ) + EXTENT_FIELDS,
    flag_words=(("NonLooping", 1),), flags_after=("Interval",), label="sequence",
)
TEXTURE = Spec(
    "Bitmap", Texture,
    (
        Field("Image", "path", "str", omit_default=True, size=260),
        Field("ReplaceableId", "replaceable_id", "u32", omit_default=True),
    ),
    flag_words=(("WrapWidth", 1), ("WrapHeight", 2)), flags_after=("Image", "ReplaceableId"), named=False,
    label="texture",
)
SOUND_TRACK = Spec(
    "SoundTrack", SoundTrack,
    (Field("Path", "path", "str", size=260), Field("Volume", "volume"), Field("Pitch", "pitch")),
    flags_after=("Pitch",), named=False, label="sound track",
)
FACE_EFFECT = Spec(
    "FaceFX", FaceEffect, (Field("Path", "path", "str", size=260),),
    flags_attr=None, name_attr="target", label="face effect",
)

COUNTS = (
    ("NumGeosets", "geosets"), ("NumGeosetAnims", "geoset_animations"), ("NumHelpers", "helpers"),
    ("NumLights", "lights"), ("NumBones", "bones"), ("NumAttachments", "attachments"),
    ("NumParticleEmitters", "particle_emitters"), ("NumParticleEmitters2", "particle_emitters2"),
    ("NumRibbonEmitters", "ribbon_emitters"), ("NumEvents", "event_objects"),
)


# -- reading ----------------------------------------------------------------------------------
def read_container(p: Parser, keyword: str, item: str, read_item) -> list:
    """`Keyword <count> { Item ... Item ... }`; the cursor is on the count."""
    at = p.i
    count = p.integer(f"the number of entries in {keyword}", 0)
    p.where.append(keyword)
    p.expect("{", f"'{{' to start {keyword}")
    out: list = []
    while not p.accept("}"):
        t = p.ident(f"{item} or '}}'")
        if t != item:
            raise p.error(f"expected {item} or '}}' in {keyword}, found {t!r}", p.i - 1)
        out.append(read_item(len(out)))
    p.where.pop()
    if count != len(out):
        p.diag(f"{keyword} declares {count} entries but holds {len(out)}; loaded {len(out)}", at)
    return out


def read_version(p: Parser, model: Model) -> None:
    p.where.append("Version")
    p.expect("{", "'{' after Version")
    while not p.accept("}"):
        t = p.ident("FormatVersion or '}'")
        if t != "FormatVersion":
            raise p.error(f"{t!r} is not a property of Version", p.i - 1)
        model.version = p.u32("the format version")
    p.where.pop()


def read_model_info(p: Parser, model: Model) -> None:
    at = p.i
    name = p.string("the model name")
    check_size(p, name, 80, "model name", at)
    model.name = name
    p.where.append(f'Model "{name}"')
    read_record(p, MODEL, model, model.version)
    p.where.pop()


def read_sequences(p: Parser, model: Model) -> None:
    model.sequences += read_container(
        p, "Sequences", "Anim", lambda i: read_named(p, SEQUENCE, model.version, i)[0])


def read_global_sequences(p: Parser, model: Model) -> None:
    def duration(i: int) -> int:
        return p.u32("a global sequence duration")

    model.global_sequences += read_container(p, "GlobalSequences", "Duration", duration)


def read_textures(p: Parser, model: Model) -> None:
    model.textures += read_container(
        p, "Textures", "Bitmap", lambda i: read_named(p, TEXTURE, model.version, i)[0])


def read_sound_tracks(p: Parser, model: Model) -> None:
    model.sounds += read_container(
        p, "SoundTracks", "SoundTrack", lambda i: read_named(p, SOUND_TRACK, model.version, i)[0])


def read_pivots(p: Parser, model: Model) -> None:
    n = p.integer("the number of pivot points", 0, 1 << 24)
    p.where.append("PivotPoints")
    p.expect("{", "'{' to start PivotPoints")
    piv = p.rows(n, 3, "PivotPoints")
    p.where.pop()
    model.pivots = piv if len(model.pivots) == 0 else np.concatenate([model.pivots, piv])


def read_bind_pose(p: Parser, model: Model) -> None:
    p.where.append("BindPose")
    p.expect("{", "'{' after BindPose")
    while not p.accept("}"):
        t = p.ident("Matrices or '}'")
        if t != "Matrices":
            raise p.error(f"{t!r} is not a property of BindPose", p.i - 1)
        n = p.integer("the number of bind pose matrices", 0, 1 << 24)
        p.expect("{", "'{' to start the bind pose matrices")
        p.where.append("Matrices")
        mats = p.rows(n, 12, "BindPose Matrices")
        p.where.pop()
        model.bind_pose = mats if model.bind_pose is None else np.concatenate([model.bind_pose, mats])
    p.where.pop()


def read_face_effect(p: Parser, model: Model) -> None:
    model.face_effects.append(read_named(p, FACE_EFFECT, model.version, len(model.face_effects))[0])


# -- writing ----------------------------------------------------------------------------------
def write_header(out: Out, model: Model) -> None:
    out.open("Version")
    out.line(f"FormatVersion {int(model.version)},")
    out.close()
    out.open(f"Model {out.quote(model.name, 'model name')}")
    for word, attr in COUNTS:
        n = len(getattr(model, attr))
        if n:
            out.line(f"{word} {n},")
    emit(out, flag_items(out, MODEL, model, set()) + field_items(out, MODEL, model, model.version))
    out.close()
    v = model.version
    if model.sequences:
        out.open(f"Sequences {len(model.sequences)}")
        for i, s in enumerate(model.sequences):
            write_record(out, SEQUENCE, s, v, f"sequence {i}")
        out.close()
    if model.global_sequences:
        out.open(f"GlobalSequences {len(model.global_sequences)}")
        for d in model.global_sequences:
            out.line(f"Duration {int(d)},")
        out.close()
    if model.textures:
        out.open(f"Textures {len(model.textures)}")
        for i, t in enumerate(model.textures):
            write_record(out, TEXTURE, t, v, f"texture {i}")
        out.close()
    if model.sounds:
        out.open(f"SoundTracks {len(model.sounds)}")
        for i, s in enumerate(model.sounds):
            write_record(out, SOUND_TRACK, s, v, f"sound track {i}")
        out.close()


def write_pivots(out: Out, model: Model) -> None:
    if len(model.pivots) == 0:
        return
    out.open(f"PivotPoints {len(model.pivots)}")
    out.raw(rows_text(np.asarray(model.pivots).reshape(-1, 3), 3, "\t" * out.depth))
    out.close()


def write_tail(out: Out, model: Model) -> None:
    for i, fx in enumerate(model.face_effects):
        write_record(out, FACE_EFFECT, fx, model.version, f"face effect {i}")
    if model.bind_pose is not None:
        bp = np.asarray(model.bind_pose).reshape(-1, 12)
        out.open("BindPose")
        out.open(f"Matrices {len(bp)}")
        out.raw(rows_text(bp, 12, "\t" * out.depth))
        out.close()
        out.close()
