"""Node records (bones, lights, helpers, attachments, emitters, events, collision shapes) and cameras.

Every node block starts with the shared header:

    Bone "name" {
        ObjectId 3,
        Parent 0,                                   (omitted for roots)
        Billboarded, BillboardedLockX, BillboardedLockY, BillboardedLockZ, CameraAnchored,
        DontInherit { Translation, Rotation, Scaling },
        ... record properties ...
        Translation n { .. }, Rotation n { .. }, Scaling n { .. }     (KGTR KGRT KGSC)
    }

The node type bit (0x100 bone, 0x200 light, ...) follows from the block keyword. Record
properties, by block:

    Bone: GeosetId n|Multiple, GeosetAnimId n|None
    Light: Omnidirectional|Directional|Ambient, AttenuationStart, AttenuationEnd, Intensity, Color,
        AmbIntensity, AmbColor (static or animated), ShadowIntensity (1200+), Visibility
    Attachment: AttachmentID, Path, Visibility
    ParticleEmitter: EmitterUsesMDL, EmitterUsesTGA, EmissionRate, Gravity, Longitude, Latitude,
        Visibility, Particle { LifeSpan, InitVelocity, Path }
    ParticleEmitter2: Unshaded SortPrimsFarZ LineEmitter Unfogged ModelSpace XYQuad,
        Blend|Additive|Modulate|Modulate2x|AlphaKey, Head|Tail|Both, Squirt, Speed, Variation,
        Latitude, Gravity, Visibility, LifeSpan, EmissionRate, Length (N+24, KP2N), Width (N+28, KP2W),
        Rows, Columns, TailLength, Time, SegmentColor { Color { .. } x3 }, Alpha { a, b, c },
        ParticleScaling { .. }, LifeSpanUVAnim, DecayUVAnim, TailUVAnim, TailDecayUVAnim,
        TextureID, ReplaceableId, PriorityPlane
    RibbonEmitter: HeightAbove, HeightBelow, Alpha, Color, TextureSlot, Visibility, EmissionRate,
        LifeSpan, Gravity, Rows, Columns, MaterialID
    ParticleEmitterPopcorn (CORN): LifeSpan, EmissionRate, Speed, Color, Alpha, Visibility,
        ReplaceableId, Path, AnimVisibilityGuide
    EventObject: EventTrack n { [GlobalSeqId g,] frame, ... }
    CollisionShape: Box|Plane|Sphere|Cylinder, Vertices n { { x, y, z }, .. }, BoundsRadius r
    Camera "name" { Position { .. }, Translation (KCTR), Rotation (KCRL, roll), FieldOfView,
        FarClip, NearClip, Target { Position { .. }, Translation (KTTR) } }

Colours are written in the component order of the MDX bytes (see rules.GEOA_STATIC_COLOR_BGR).
"""

from __future__ import annotations

import numpy as np

from renderer import rules
from renderer.model import (
    Attachment,
    Bone,
    CollisionShape,
    EventObject,
    Helper,
    Light,
    ModelCamera,
    ParticleEmitter,
    ParticleEmitter2,
    PopcornEmitter,
    RibbonEmitter,
)

from .fields import Enum, Field, RecordState, Spec, read_named, write_record
from .text import Out, vec
from .tokens import I32_MIN, Parser

LENGTH, WIDTH = (name.capitalize() for name in rules.PRE2_FIELD_NAMES)  # N+24, N+28


def _vis(tag: str) -> Field:
    return Field("Visibility", None, "visibility", tag)


BONE = Spec(
    "Bone", Bone,
    (Field("GeosetId", "geoset_id", "multiple"), Field("GeosetAnimId", "geoset_animation_id", "none")),
    node=True, type_bit=0x100, label="bone",
)
HELPER = Spec("Helper", Helper, (), node=True, type_bit=0, label="helper")
LIGHT = Spec(
    "Light", Light,
    (
        Field("AttenuationStart", "attenuation_start", "f", "KLAS"),
        Field("AttenuationEnd", "attenuation_end", "f", "KLAE"),
        Field("Intensity", "intensity", "f", "KLAI"),
        Field("Color", "color", "vec3", "KLAC"),
        Field("AmbIntensity", "ambient_intensity", "f", "KLBI"),
        Field("AmbColor", "ambient_color", "vec3", "KLBC"),
        Field("ShadowIntensity", "shadow_intensity", "f", min_version=1200),
        _vis("KLAV"),
    ),
    node=True, type_bit=0x200,
    enums=(Enum("type", {0: "Omnidirectional", 1: "Directional", 2: "Ambient"}, "LightType"),),
    label="light",
)
ATTACHMENT = Spec(
    "Attachment", Attachment,
    (
        Field("AttachmentID", "attachment_id", "u32"),
        Field("Path", "path", "str", omit_default=True, size=260),
        _vis("KATV"),
    ),
    node=True, type_bit=0x800, label="attachment",
)
PARTICLE_EMITTER = Spec(
    "ParticleEmitter", ParticleEmitter,
    (
        Field("EmissionRate", "emission_rate", "f", "KPEE"),
        Field("Gravity", "gravity", "f", "KPEG"),
        Field("Longitude", "longitude", "f", "KPLN"),
        Field("Latitude", "latitude", "f", "KPLT"),
        _vis("KPEV"),
        Field("LifeSpan", "lifespan", "f", "KPEL", block="Particle"),
        Field("InitVelocity", "speed", "f", "KPES", block="Particle"),
        Field("Path", "path", "str", block="Particle", size=260),
    ),
    node=True, type_bit=0x1000, flag_words=(("EmitterUsesMDL", 0x8000), ("EmitterUsesTGA", 0x10000)),
    label="particle emitter",
)


def _read_segment_color(p: Parser, e: ParticleEmitter2, st: RecordState, static: bool) -> None:
    p.where.append("SegmentColor")
    p.expect("{", "'{' after SegmentColor")
    colors = []
    while not p.accept("}"):
        t = p.ident("Color or '}'")
        if t != "Color":
            raise p.error(f"expected Color in SegmentColor, found {t!r}", p.i - 1)
        colors.append(p.vector(3, "segment colour"))
    if len(colors) != 3:
        raise p.error(f"SegmentColor holds {len(colors)} colours, expected 3 (start, middle, end)")
    e.segment_colors = tuple(colors)
    p.where.pop()


def _write_segment_color(e: ParticleEmitter2, version: int, out: Out, items: list) -> None:
    def write(o: Out) -> None:
        o.open("SegmentColor")
        for c in e.segment_colors:
            o.line(f"Color {vec(c)},")
        o.close()

    at = next((k + 1 for k, (_, it) in enumerate(items) if isinstance(it, str) and it.startswith("Time ")), len(items))
    items.insert(at, (None, write))


PARTICLE_EMITTER2 = Spec(
    "ParticleEmitter2", ParticleEmitter2,
    (
        Field("Speed", "speed", "f", "KP2S"),
        Field("Variation", "variation", "f", "KP2R"),
        Field("Latitude", "latitude", "f", "KP2L"),
        Field("Gravity", "gravity", "f", "KP2G"),
        _vis("KP2V"),
        Field("LifeSpan", "lifespan", "f"),
        Field("EmissionRate", "emission_rate", "f", "KP2E"),
        Field(LENGTH, "length", "f", "KP2N"),
        Field(WIDTH, "width", "f", "KP2W"),
        Field("Rows", "rows", "u32"),
        Field("Columns", "columns", "u32"),
        Field("TailLength", "tail_length", "f"),
        Field("Time", "time", "f"),
        Field("Alpha", "segment_alphas", "u8x3"),
        Field("ParticleScaling", "segment_scaling", "vec3"),
        Field("LifeSpanUVAnim", "head_intervals", "u32x3", index=0),
        Field("DecayUVAnim", "head_intervals", "u32x3", index=1),
        Field("TailUVAnim", "tail_intervals", "u32x3", index=0),
        Field("TailDecayUVAnim", "tail_intervals", "u32x3", index=1),
        Field("TextureID", "texture_id", "i32"),
        Field("ReplaceableId", "replaceable_id", "u32", omit_default=True),
        Field("PriorityPlane", "priority_plane", "i32", omit_default=True),
    ),
    node=True, type_bit=0x1000,
    flag_words=(("Unshaded", 0x8000), ("SortPrimsFarZ", 0x10000), ("LineEmitter", 0x20000), ("Unfogged", 0x40000),
                ("ModelSpace", 0x80000), ("XYQuad", 0x100000)),
    enums=(
        Enum("filter_mode", dict(enumerate(rules.PRE2_FILTER_MODES)), "FilterMode"),
        Enum("head_or_tail", {0: "Head", 1: "Tail", 2: "Both"}, "HeadOrTail"),
        Enum("squirt", {1: "Squirt"}, "Squirt", write_default=False, optional_number=True),
    ),
    custom_read={"SegmentColor": _read_segment_color},
    custom_write=_write_segment_color,
    label="particle emitter 2",
)
RIBBON_EMITTER = Spec(
    "RibbonEmitter", RibbonEmitter,
    (
        Field("HeightAbove", "height_above", "f", "KRHA"),
        Field("HeightBelow", "height_below", "f", "KRHB"),
        Field("Alpha", "alpha", "f", "KRAL"),
        Field("Color", "color", "vec3", "KRCO"),
        Field("TextureSlot", "texture_slot", "u32", "KRTX"),
        _vis("KRVS"),
        Field("EmissionRate", "emission_rate", "u32"),
        Field("LifeSpan", "lifespan", "f"),
        Field("Gravity", "gravity", "f", omit_default=True),
        Field("Rows", "rows", "u32"),
        Field("Columns", "columns", "u32"),
        Field("MaterialID", "material_id", "i32"),
    ),
    node=True, type_bit=0x4000, label="ribbon emitter",
)
POPCORN_EMITTER = Spec(
    "ParticleEmitterPopcorn", PopcornEmitter,
    (
        Field("LifeSpan", "lifespan", "f", "KPPL"),
        Field("EmissionRate", "emission_rate", "f", "KPPE"),
        Field("Speed", "speed", "f", "KPPS"),
        Field("Color", "color", "vec3", "KPPC"),
        Field("Alpha", "alpha", "f", "KPPA"),
        _vis("KPPV"),
        Field("ReplaceableId", "replaceable_id", "u32", omit_default=True),
        Field("Path", "path", "str", size=260),
        Field("AnimVisibilityGuide", "animation_visibility_guide", "str", omit_default=True, size=260),
    ),
    node=True, type_bit=0x1000, label="popcorn emitter",
)


def _read_event_track(p: Parser, ev: EventObject, st: RecordState, static: bool) -> None:
    p.where.append("EventTrack")
    at = p.i
    n = p.integer("the number of event frames", 0, 1 << 24)
    p.expect("{", "'{' to start EventTrack")
    if p.accept("GlobalSeqId"):
        ev.global_sequence_id = p.i32("a global sequence id")
    frames = p.flat("EventTrack", "i", n)
    p.check_range(frames, I32_MIN, (1 << 31) - 1, "EventTrack", at)
    ev.frames = frames.astype("<i4")
    p.where.pop()


def _write_event_track(ev: EventObject, version: int, out: Out, items: list) -> None:
    if ev.frames is None:
        return

    def write(o: Out) -> None:
        frames = np.asarray(ev.frames).ravel()
        o.open(f"EventTrack {len(frames)}")
        if ev.global_sequence_id != -1:
            o.line(f"GlobalSeqId {int(ev.global_sequence_id)},")
        ind = "\t" * o.depth
        o.raw("".join(f"{ind}{int(f)},\n" for f in frames.tolist()))
        o.close()

    items.append((None, write))


EVENT_OBJECT = Spec(
    "EventObject", EventObject, (), node=True, type_bit=0x400,
    custom_read={"EventTrack": _read_event_track}, custom_write=_write_event_track, label="event object",
)

SHAPE_VERTICES = {0: 2, 1: 2, 2: 1, 3: 2}


def _read_shape_vertices(p: Parser, cs: CollisionShape, st: RecordState, static: bool) -> None:
    p.where.append("Vertices")
    n = p.integer("the number of collision shape vertices", 0, 16)
    p.expect("{", "'{' to start Vertices")
    cs.vertices = tuple(tuple(r) for r in p.rows(n, 3, "Vertices").astype(np.float64).tolist())
    p.where.pop()


def _write_shape_vertices(cs: CollisionShape, version: int, out: Out, items: list) -> None:
    def write(o: Out) -> None:
        o.open(f"Vertices {len(cs.vertices)}")
        for v in cs.vertices:
            o.line(vec(v) + ",")
        o.close()

    # before BoundsRadius, which field_items already placed: insert after the shape word
    items.insert(1 if items else 0, (None, write))


COLLISION_SHAPE = Spec(
    "CollisionShape", CollisionShape,
    (Field("BoundsRadius", "radius", "f", omit_default=True, force=lambda cs: cs.type in (2, 3)),),
    node=True, type_bit=0x2000,
    enums=(Enum("type", {0: "Box", 1: "Plane", 2: "Sphere", 3: "Cylinder"}, "ShapeType"),),
    custom_read={"Vertices": _read_shape_vertices}, custom_write=_write_shape_vertices,
    label="collision shape",
)

CAMERA = Spec(
    "Camera", ModelCamera,
    (
        Field("Position", "position", "vec3"),
        Field("Translation", None, "track", "KCTR"),
        Field("Rotation", None, "track", "KCRL"),
        Field("FieldOfView", "field_of_view", "f"),
        Field("FarClip", "far_clip", "f"),
        Field("NearClip", "near_clip", "f"),
        Field("Position", "target", "vec3", block="Target"),
        Field("Translation", None, "track", "KTTR", block="Target"),
    ),
    flags_attr=None, label="camera",
)

# block keyword -> (spec, model list)
NODE_BLOCKS: dict[str, tuple[Spec, str]] = {
    "Bone": (BONE, "bones"),
    "Light": (LIGHT, "lights"),
    "Helper": (HELPER, "helpers"),
    "Attachment": (ATTACHMENT, "attachments"),
    "ParticleEmitter": (PARTICLE_EMITTER, "particle_emitters"),
    "ParticleEmitter2": (PARTICLE_EMITTER2, "particle_emitters2"),
    "ParticleEmitterPopcorn": (POPCORN_EMITTER, "popcorn_emitters"),
    "RibbonEmitter": (RIBBON_EMITTER, "ribbon_emitters"),
    "EventObject": (EVENT_OBJECT, "event_objects"),
    "CollisionShape": (COLLISION_SHAPE, "collision_shapes"),
    "Camera": (CAMERA, "cameras"),
}


def read_node(p: Parser, model, keyword: str) -> tuple[object, RecordState, int]:
    """One node (or camera) block after its keyword; returns the record, what its text said and its start."""
    spec, attr = NODE_BLOCKS[keyword]
    dest = getattr(model, attr)
    start = p.i
    obj, st = read_named(p, spec, model.version, len(dest))
    if spec is COLLISION_SHAPE:
        want = SHAPE_VERTICES.get(obj.type)
        if want is None:
            raise p.error(f"collision shape {obj.name!r} has type {obj.type}; expected Box, Plane, Sphere or "
                          "Cylinder", start)
        if "Vertices" not in st.seen:
            obj.vertices = ((0.0, 0.0, 0.0),) * want
        elif len(obj.vertices) != want:
            raise p.error(f"collision shape {obj.name!r} ({COLLISION_SHAPE.enums[0].words[obj.type]}) needs {want} "
                          f"vertices, not {len(obj.vertices)}", start)
    dest.append(obj)
    return obj, st, start


# The order node lists are written in (and objectIds are conventionally assigned in).
WRITE_ORDER = ("Bone", "Light", "Helper", "Attachment")
WRITE_ORDER_EMITTERS = ("ParticleEmitter", "ParticleEmitter2", "ParticleEmitterPopcorn", "RibbonEmitter", "Camera",
                        "EventObject", "CollisionShape")


def write_nodes(out: Out, model, keywords) -> None:
    for kw in keywords:
        spec, attr = NODE_BLOCKS[kw]
        for i, obj in enumerate(getattr(model, attr)):
            write_record(out, spec, obj, model.version, f"{spec.label} {i}")
