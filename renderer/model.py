"""The neutral in-memory model every loader produces and everything downstream speaks.

The records follow Warcraft III's MDX structure (the richest of the formats we read), named in the
model's own terms. Geometry and keyframes are numpy arrays. Fields that exist only to write a file
back byte for byte (chunk layout, bytes after a name's NUL, unknown chunks and record tails) are
marked `detail` and are ignored by `same()`, the model equality used by conversion tests.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np

from renderer.errors import Diagnostic


def detail(default=None, factory=None):
    """A field that carries file-format detail, not model content."""
    md = {"detail": True}
    if factory is not None:
        return field(default_factory=factory, metadata=md, compare=False)
    return field(default=default, metadata=md, compare=False)


# Value layout of every keyframe track: numpy base type and component count.
TRACK_TYPES: dict[str, tuple[str, int]] = {}
for _tags, _t in (
    ("KGTR KGSC KTAT KTAS KGAC KLAC KLBC KCTR KTTR KFC3 KPPC KRCO", ("<f4", 3)),
    ("KGRT KTAR", ("<f4", 4)),
    ("KMTF KRTX", ("<u4", 1)),
    (
        "KMTA KMTE KFCA KFTC KGAO KLAS KLAE KLAI KLBI KLAV KATV KPEE KPEG KPLN KPLT KPEL KPES KPEV "
        "KP2S KP2R KP2L KP2G KP2E KP2N KP2W KP2V KRHA KRHB KRAL KRVS KCRL KPPA KPPE KPPL KPPS KPPV",
        ("<f4", 1),
    ),
):
    for _tag in _tags.split():
        TRACK_TYPES[_tag] = _t

INTERPOLATIONS = ("DontInterp", "Linear", "Hermite", "Bezier")


@functools.cache
def key_dtype(tag: str, interpolation: int) -> np.dtype:
    base, k = TRACK_TYPES[tag]
    value = (base, (k,)) if k > 1 else base
    fields = [("frame", "<i4"), ("value", value)]
    if interpolation >= 2:
        fields += [("in_tan", value), ("out_tan", value)]
    return np.dtype(fields)


@dataclass(eq=False)
class Track:
    """One animated property: keys with frame (ms), value and, for Hermite/Bezier, tangents."""

    tag: str
    interpolation: int
    global_sequence_id: int
    keys: np.ndarray  # structured array, dtype key_dtype(tag, interpolation)

    @property
    def frames(self) -> np.ndarray:
        return self.keys["frame"]

    @property
    def values(self) -> np.ndarray:
        return self.keys["value"]

    @property
    def interpolation_name(self) -> str:
        i = self.interpolation
        return INTERPOLATIONS[i] if 0 <= i < 4 else f"Unknown({i})"


@dataclass
class Extent:
    radius: float = 0.0
    min: tuple = (0.0, 0.0, 0.0)
    max: tuple = (0.0, 0.0, 0.0)


@dataclass
class Sequence:
    name: str = ""
    interval: tuple = (0, 0)
    move_speed: float = 0.0
    flags: int = 0  # 1 = non-looping
    rarity: float = 0.0
    sync_point: int = 0
    extent: Extent = field(default_factory=Extent)


@dataclass
class Texture:
    replaceable_id: int = 0
    path: str = ""
    flags: int = 0  # 1 WrapWidth, 2 WrapHeight


@dataclass
class SoundTrack:
    path: str = ""
    volume: float = 0.0
    pitch: float = 0.0
    flags: int = 0


@dataclass
class TextureSlot:
    """A Reforged (1100+) layer texture: texture id, slot (0 diffuse .. 5 environment), KMTF."""

    texture_id: int = 0
    slot: int = 0
    texture_track: Track | None = None


@dataclass
class Layer:
    filter_mode: int = 0
    shading_flags: int = 0
    texture_id: int = 0
    texture_animation_id: int = -1
    coord_id: int = 0
    alpha: float = 1.0
    emissive_gain: float = 1.0  # 900+
    fresnel_color: tuple = (1.0, 1.0, 1.0)  # 1000+ (see rules.FRESNEL_IN_V900)
    fresnel_opacity: float = 0.0
    fresnel_team_color: float = 0.0
    shader_type_id: int = 0  # 1100+
    textures: list[TextureSlot] = field(default_factory=list)  # 1100+
    tracks: dict[str, Track] = field(default_factory=dict)
    has_fresnel: bool = detail(False)
    extra: bytes = detail(b"")


@dataclass
class Material:
    priority_plane: int = 0
    flags: int = 0
    shader: str = ""  # 900 and 1000 only
    layers: list[Layer] = field(default_factory=list)
    extra: bytes = detail(b"")


@dataclass
class TextureAnimation:
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass(eq=False)
class Geoset:
    vertices: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), "<f4"))
    normals: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), "<f4"))
    face_types: np.ndarray = field(default_factory=lambda: np.zeros(0, "<u4"))
    face_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, "<u4"))
    faces: np.ndarray = field(default_factory=lambda: np.zeros(0, "<u2"))
    vertex_groups: np.ndarray = field(default_factory=lambda: np.zeros(0, "u1"))
    matrix_group_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, "<u4"))
    matrix_indices: np.ndarray = field(default_factory=lambda: np.zeros(0, "<u4"))
    material_id: int = 0
    selection_group: int = 0
    selection_flags: int = 0
    lod: int = 0  # 900+
    lod_name: str = ""  # 900+
    extent: Extent = field(default_factory=Extent)
    sequence_extents: list[Extent] = field(default_factory=list)
    tangents: np.ndarray | None = None  # (n, 4), 900+
    skin: np.ndarray | None = None  # (n, 8) u8: 4 bone indices then 4 weights (w / 255)
    uv_sets: list[np.ndarray] = field(default_factory=list)  # each (n, 2)
    # Float skinning for formats that store real weights (Halo): (n, 4) node object ids and
    # (n, 4) float32 weights. MDX uses `skin` or the matrix groups instead and never writes these.
    bone_indices: np.ndarray | None = None
    bone_weights: np.ndarray | None = None
    extra: bytes = detail(b"")

    @property
    def triangles(self) -> np.ndarray:
        """(t, 3) vertex indices of the triangle groups (PTYP 4)."""
        if len(self.face_types) == 0 or np.all(self.face_types == 4):
            n = len(self.faces) // 3 * 3
            return self.faces[:n].reshape(-1, 3)
        parts, at = [], 0
        for kind, count in zip(self.face_types.tolist(), self.face_counts.tolist(), strict=False):
            if kind == 4:
                parts.append(self.faces[at : at + count // 3 * 3])
            at += count
        return np.concatenate(parts).reshape(-1, 3) if parts else np.zeros((0, 3), "<u2")


@dataclass
class GeosetAnimation:
    alpha: float = 1.0
    flags: int = 0  # 1 DropShadow, 2 colour used
    color: tuple = (1.0, 1.0, 1.0)
    geoset_id: int = 0
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class Node:
    """The shared node header: name, ids, flags and the KGTR/KGRT/KGSC tracks."""

    name: str = ""
    object_id: int = 0
    parent_id: int = -1
    flags: int = 0
    node_tracks: dict[str, Track] = field(default_factory=dict)
    node_extra: bytes = detail(b"")


@dataclass
class Bone(Node):
    geoset_id: int = -1
    geoset_animation_id: int = -1


@dataclass
class Helper(Node):
    pass


@dataclass
class Light(Node):
    type: int = 0
    attenuation_start: float = 0.0
    attenuation_end: float = 0.0
    color: tuple = (1.0, 1.0, 1.0)
    intensity: float = 0.0
    ambient_color: tuple = (1.0, 1.0, 1.0)
    ambient_intensity: float = 0.0
    shadow_intensity: float = 0.0  # 1200+
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class Attachment(Node):
    path: str = ""
    attachment_id: int = 0
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class ParticleEmitter(Node):
    """PREM: spawns models (or TGA particles) from a node."""

    emission_rate: float = 0.0
    gravity: float = 0.0
    longitude: float = 0.0
    latitude: float = 0.0
    path: str = ""
    lifespan: float = 0.0
    speed: float = 0.0
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class ParticleEmitter2(Node):
    speed: float = 0.0
    variation: float = 0.0
    latitude: float = 0.0
    gravity: float = 0.0
    lifespan: float = 0.0
    emission_rate: float = 0.0
    length: float = 0.0  # field at N+24, track KP2N (see rules.PRE2_FIELD_NAMES)
    width: float = 0.0  # field at N+28, track KP2W
    filter_mode: int = 0
    rows: int = 1
    columns: int = 1
    head_or_tail: int = 0
    tail_length: float = 0.0
    time: float = 0.5
    segment_colors: tuple = ((1.0, 1.0, 1.0),) * 3
    segment_alphas: tuple = (255, 255, 255)
    segment_scaling: tuple = (1.0, 1.0, 1.0)
    head_intervals: tuple = ((0, 0, 1), (0, 0, 1))  # life, decay: (start, end, repeat)
    tail_intervals: tuple = ((0, 0, 1), (0, 0, 1))
    texture_id: int = 0
    squirt: int = 0
    priority_plane: int = 0
    replaceable_id: int = 0
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class RibbonEmitter(Node):
    height_above: float = 0.0
    height_below: float = 0.0
    alpha: float = 1.0
    color: tuple = (1.0, 1.0, 1.0)
    lifespan: float = 0.0
    texture_slot: int = 0
    emission_rate: int = 0
    rows: int = 1
    columns: int = 1
    material_id: int = 0
    gravity: float = 0.0
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass(eq=False)  # holds an array: compare with `same`
class EventObject(Node):
    global_sequence_id: int = -1
    frames: np.ndarray | None = None  # KEVT frames; None when the KEVT block is absent


@dataclass
class CollisionShape(Node):
    type: int = 0  # 0 box, 1 plane, 2 sphere, 3 cylinder
    vertices: tuple = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    radius: float = 0.0


@dataclass
class ModelCamera:
    name: str = ""
    position: tuple = (0.0, 0.0, 0.0)
    field_of_view: float = 0.0
    far_clip: float = 0.0
    near_clip: float = 0.0
    target: tuple = (0.0, 0.0, 0.0)
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class FaceEffect:
    target: str = ""
    path: str = ""


@dataclass
class PopcornEmitter(Node):
    """CORN: a PopcornFX emitter (parsed and kept; not simulated)."""

    lifespan: float = 0.0
    emission_rate: float = 0.0
    speed: float = 0.0
    color: tuple = (1.0, 1.0, 1.0)
    alpha: float = 1.0
    replaceable_id: int = 0
    path: str = ""
    animation_visibility_guide: str = ""
    tracks: dict[str, Track] = field(default_factory=dict)
    extra: bytes = detail(b"")


@dataclass
class UnknownChunk:
    tag: str
    data: bytes


@dataclass(eq=False)
class Model:
    version: int = 800
    name: str = ""
    animation_file: str = ""
    extent: Extent = field(default_factory=Extent)
    blend_time: int = 0
    sequences: list[Sequence] = field(default_factory=list)
    global_sequences: list[int] = field(default_factory=list)
    textures: list[Texture] = field(default_factory=list)
    sounds: list[SoundTrack] = field(default_factory=list)
    materials: list[Material] = field(default_factory=list)
    texture_animations: list[TextureAnimation] = field(default_factory=list)
    geosets: list[Geoset] = field(default_factory=list)
    geoset_animations: list[GeosetAnimation] = field(default_factory=list)
    bones: list[Bone] = field(default_factory=list)
    lights: list[Light] = field(default_factory=list)
    helpers: list[Helper] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    pivots: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), "<f4"))
    particle_emitters: list[ParticleEmitter] = field(default_factory=list)
    particle_emitters2: list[ParticleEmitter2] = field(default_factory=list)
    ribbon_emitters: list[RibbonEmitter] = field(default_factory=list)
    cameras: list[ModelCamera] = field(default_factory=list)
    event_objects: list[EventObject] = field(default_factory=list)
    collision_shapes: list[CollisionShape] = field(default_factory=list)
    bind_pose: np.ndarray | None = None  # (n, 12) f32, 900+
    face_effects: list[FaceEffect] = field(default_factory=list)
    popcorn_emitters: list[PopcornEmitter] = field(default_factory=list)
    unknown_chunks: list[UnknownChunk] = field(default_factory=list)
    model_extra: bytes = detail(b"")  # MODL bytes past the known 372
    # (tag, number of records) for each chunk in file order: keeps order, empty and repeated chunks.
    layout: list[tuple[str, int]] = detail(factory=list)
    trailing: bytes = detail(b"")  # bytes after the last complete chunk
    diagnostics: list[Diagnostic] = detail(factory=list)
    path: str = detail("")
    format: str = detail("mdx")  # which loader produced this model: mdx, mdl, halo
    info: dict = detail(factory=dict)  # format-specific facts for `farm inspect` (Halo regions, ...)
    # Where the model came from and how its inputs are found is not model data: renderer.context.

    def nodes(self) -> list[Node]:
        """Every node record, in the order objectIds are conventionally assigned."""
        out: list[Node] = []
        for group in (
            self.bones, self.lights, self.helpers, self.attachments, self.particle_emitters,
            self.particle_emitters2, self.ribbon_emitters, self.event_objects, self.collision_shapes,
            self.popcorn_emitters,
        ):
            out.extend(group)
        return out

    def __eq__(self, other):
        return same(self, other)


def same(a, b) -> bool:
    """Deep model equality: arrays by shape and value, floats at float32 precision, detail fields ignored."""
    if a is b:
        return True
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            return False
        for f in dataclasses.fields(a):
            if f.metadata.get("detail"):
                continue
            if not same(getattr(a, f.name), getattr(b, f.name)):
                return False
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype.names or b.dtype.names:
            return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        # Every format stores these as float32: compare at that precision (NaN equals NaN).
        try:
            x, y = np.float32(a), np.float32(b)
        except (TypeError, ValueError):
            return False
        return bool(x == y or (x != x and y != y))
    return a == b
