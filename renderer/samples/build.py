"""Builders for the sample models. Everything is deterministic: same code, same bytes."""

from __future__ import annotations

import numpy as np

from renderer.model import (
    Bone,
    Extent,
    Geoset,
    GeosetAnimation,
    Helper,
    Layer,
    Material,
    Model,
    ParticleEmitter2,
    RibbonEmitter,
    Sequence,
    Texture,
    Track,
    key_dtype,
)


def track(tag: str, frames, values, interpolation: int = 1, global_sequence_id: int = -1,
          in_tans=None, out_tans=None) -> Track:
    dt = key_dtype(tag, interpolation)
    keys = np.zeros(len(frames), dt)
    keys["frame"] = frames
    keys["value"] = np.asarray(values, np.float32).reshape(keys["value"].shape)
    if interpolation >= 2:
        keys["in_tan"] = keys["value"] if in_tans is None else np.asarray(in_tans).reshape(keys["value"].shape)
        keys["out_tan"] = keys["value"] if out_tans is None else np.asarray(out_tans).reshape(keys["value"].shape)
    return Track(tag, interpolation, global_sequence_id, keys)


def checker(size: int = 64, cells: int = 8, a=(230, 230, 230, 255), b=(40, 90, 200, 255)) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size] * cells // size
    img = np.empty((size, size, 4), np.uint8)
    img[...] = np.where(((x + y) % 2 == 0)[..., None], np.array(a), np.array(b))
    return img


def radial(size: int = 64, color=(255, 200, 80)) -> np.ndarray:
    y, x = (np.mgrid[0:size, 0:size] + 0.5) / size * 2 - 1
    fall = np.clip(1 - np.sqrt(x * x + y * y), 0, 1)
    img = np.zeros((size, size, 4), np.uint8)
    img[..., :3] = color
    img[..., 3] = np.round(fall * 255)
    return img


def solid(color, size: int = 8) -> np.ndarray:
    img = np.empty((size, size, 4), np.uint8)
    img[...] = color
    return img


def box(center, half) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """24 vertices (4 per face, outward normals), 12 triangles, per-face UVs 0..1."""
    c, h = np.asarray(center, np.float32), np.asarray(half, np.float32)
    verts, norms, uvs, faces = [], [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3, np.float32)
            n[axis] = sign
            u_axis, v_axis = [a for a in range(3) if a != axis]
            base = len(verts)
            for du, dv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                p = np.zeros(3, np.float32)
                p[axis], p[u_axis], p[v_axis] = sign, du, dv
                verts.append(c + p * h)
                norms.append(n)
                uvs.append(((du + 1) / 2, 1 - (dv + 1) / 2))
            tri = [(0, 1, 2), (0, 2, 3)]
            # Keep counter-clockwise winding seen from outside.
            if (sign > 0) != (axis == 1):
                tri = [(0, 1, 2), (0, 2, 3)]
            else:
                tri = [(0, 2, 1), (0, 3, 2)]
            for t in tri:
                faces.extend(base + i for i in t)
    return (np.array(verts, "<f4"), np.array(norms, "<f4"), np.array(uvs, "<f4"), np.array(faces, "<u2"))


def geoset(verts, norms, uv_sets, faces, material_id: int, bone_groups=None) -> Geoset:
    n = len(verts)
    g = Geoset()
    g.vertices, g.normals = np.ascontiguousarray(verts, "<f4"), np.ascontiguousarray(norms, "<f4")
    g.face_types = np.array([4], "<u4")
    g.face_counts = np.array([len(faces)], "<u4")
    g.faces = np.ascontiguousarray(faces, "<u2")
    if bone_groups is None:
        g.vertex_groups = np.zeros(n, "u1")
        g.matrix_group_sizes = np.array([1], "<u4")
        g.matrix_indices = np.array([0], "<u4")
    else:
        groups, sizes, indices = bone_groups
        g.vertex_groups = np.asarray(groups, "u1")
        g.matrix_group_sizes = np.asarray(sizes, "<u4")
        g.matrix_indices = np.asarray(indices, "<u4")
    g.material_id = material_id
    g.uv_sets = [np.ascontiguousarray(uv, "<f4") for uv in uv_sets]
    g.extent = extent_of(verts)
    return g


def extent_of(verts) -> Extent:
    v = np.asarray(verts, np.float64)
    lo, hi = v.min(0), v.max(0)
    radius = float(np.linalg.norm(hi - lo) / 2)
    return Extent(float(np.float32(radius)), tuple(float(x) for x in np.float32(lo)),
                  tuple(float(x) for x in np.float32(hi)))


def _model(name: str, sequences) -> Model:
    m = Model(version=800, name=name)
    m.sequences = [Sequence(name=n, interval=iv, flags=f) for n, iv, f in sequences]
    return m


def crate() -> tuple[Model, dict]:
    """A textured, spinning crate with a second UV set, team-colour trim and a fading lid."""
    m = _model("Crate", [("Stand", (0, 2000), 0), ("Spin", (3000, 5000), 0), ("Death", (6000, 7000), 1)])
    m.textures = [Texture(path="Textures\\Crate.tga", flags=3), Texture(replaceable_id=1),
                  Texture(path="Textures\\Glow.tga")]
    m.materials = [
        Material(layers=[Layer(filter_mode=0, texture_id=1),
                         Layer(filter_mode=2, texture_id=0, coord_id=1)]),
        Material(layers=[Layer(filter_mode=3, texture_id=2, shading_flags=0x11)]),
    ]
    v, n, uv, f = box((0, 0, 40), (40, 40, 40))
    uv2 = uv * 2.0  # the second set tiles the crate texture twice
    m.geosets = [geoset(v, n, [uv, uv2], f, 0)]
    lv, ln, luv, lf = box((0, 0, 90), (30, 30, 4))
    m.geosets.append(geoset(lv, ln, [luv], lf, 1))
    m.geoset_animations = [GeosetAnimation(geoset_id=1, tracks={
        "KGAO": track("KGAO", [6000, 7000], [1.0, 0.0])})]
    bone = Bone(name="Root", object_id=0, flags=0x100)
    angle = np.radians([0, 120, 240, 360])
    bone.node_tracks["KGRT"] = track(
        "KGRT", [3000, 3666, 4333, 5000],
        [[0, 0, np.sin(a / 2), np.cos(a / 2)] for a in angle])
    bone.node_tracks["KGSC"] = track("KGSC", [6000, 7000], [[1, 1, 1], [1, 1, 0.2]])
    m.bones = [bone]
    m.pivots = np.zeros((1, 3), "<f4")
    m.extent = extent_of(np.vstack([v, lv]))
    # Clear cells in the crate texture let the team colour layer underneath show through.
    return m, {"Textures\\Crate.tga": checker(a=(230, 230, 230, 255), b=(0, 0, 0, 0)), "Textures\\Glow.tga": radial()}


FILTER_COLORS = ((220, 60, 60, 255), (60, 200, 60, 128), (60, 90, 230, 128), (240, 200, 40, 200),
                 (200, 60, 220, 160), (128, 128, 128, 255), (100, 180, 200, 255))


def filter_modes() -> tuple[Model, dict]:
    """Seven quads over a mid-grey backing plate, one per layer filter mode 0..6, left to right."""
    m = _model("FilterModes", [("Stand", (0, 1000), 0)])
    textures = {}
    m.textures.append(Texture(path="Textures\\Backing.tga"))
    textures["Textures\\Backing.tga"] = solid((128, 128, 128, 255))
    m.materials.append(Material(layers=[Layer(filter_mode=0, texture_id=0, shading_flags=0x1)]))
    for mode, color in enumerate(FILTER_COLORS):
        rel = f"Textures\\Mode{mode}.tga"
        textures[rel] = solid(color)
        m.textures.append(Texture(path=rel))
        m.materials.append(Material(layers=[Layer(filter_mode=mode, texture_id=mode + 1, shading_flags=0x11)]))
    # Backing plate in the plane x = 0 facing +X, quads slightly in front of it.
    def quad(x, y0, y1, z0, z1, material):
        verts = np.array([[x, y0, z0], [x, y1, z0], [x, y1, z1], [x, y0, z1]], "<f4")
        norms = np.tile(np.array([1, 0, 0], "<f4"), (4, 1))
        uvs = np.array([[0, 1], [1, 1], [1, 0], [0, 0]], "<f4")
        return geoset(verts, norms, [uvs], np.array([0, 1, 2, 0, 2, 3], "<u2"), material)
    m.geosets.append(quad(0.0, -140, 140, -20, 20, 0))
    for mode in range(7):
        y0 = -140 + mode * 40 + 5
        m.geosets.append(quad(2.0, y0, y0 + 30, -15, 15, mode + 1))
    m.bones = [Bone(name="Root", object_id=0, flags=0x100)]
    m.pivots = np.zeros((1, 3), "<f4")
    m.extent = extent_of(np.vstack([g.vertices for g in m.geosets]))
    return m, textures


def effects() -> tuple[Model, dict]:
    """A brazier: an additive flame (PRE2), blended grey smoke (PRE2) and a ribbon on a circling helper."""
    m = _model("Effects", [("Stand", (0, 3000), 0), ("Birth", (4000, 5000), 1)])
    m.textures = [Texture(path="Textures\\Flame.tga"), Texture(path="Textures\\Smoke.tga"),
                  Texture(path="Textures\\Stone.tga"), Texture(path="Textures\\Trail.tga")]
    m.materials = [Material(layers=[Layer(filter_mode=0, texture_id=2)]),
                   Material(layers=[Layer(filter_mode=3, texture_id=3, shading_flags=0x11)])]
    v, n, uv, f = box((0, 0, 10), (25, 25, 10))
    m.geosets = [geoset(v, n, [uv], f, 0)]
    m.bones = [Bone(name="Base", object_id=0, flags=0x100)]
    flame = ParticleEmitter2(
        name="Flame", object_id=1, parent_id=0, flags=0x1000 | 0x8000, speed=60, variation=0.2, latitude=10,
        gravity=-20, lifespan=1.0, emission_rate=30, length=20, width=20, filter_mode=1, rows=1, columns=1,
        head_or_tail=0, time=0.3, segment_colors=((1.0, 0.9, 0.4), (1.0, 0.5, 0.1), (0.6, 0.1, 0.0)),
        segment_alphas=(255, 200, 0), segment_scaling=(10.0, 14.0, 4.0), texture_id=0)
    smoke = ParticleEmitter2(
        name="Smoke", object_id=2, parent_id=0, flags=0x1000, speed=40, variation=0.1, latitude=20,
        gravity=-5, lifespan=2.5, emission_rate=8, length=30, width=30, filter_mode=0, rows=1, columns=1,
        head_or_tail=0, time=0.5, segment_colors=((0.25, 0.25, 0.25), (0.35, 0.35, 0.35), (0.4, 0.4, 0.4)),
        segment_alphas=(200, 150, 0), segment_scaling=(15.0, 30.0, 45.0), texture_id=1)
    smoke.tracks["KP2V"] = track("KP2V", [0, 4000], [1.0, 0.0], interpolation=0)
    m.particle_emitters2 = [flame, smoke]
    orbit = Helper(name="Orbit", object_id=3, parent_id=0)
    angle = np.radians([0, 90, 180, 270, 360])
    orbit.node_tracks["KGRT"] = track("KGRT", [0, 750, 1500, 2250, 3000],
                                      [[0, 0, np.sin(a / 2), np.cos(a / 2)] for a in angle])
    ribbon = RibbonEmitter(name="Trail", object_id=4, parent_id=3, flags=0x4000, height_above=8, height_below=8,
                           alpha=1.0, color=(1.0, 1.0, 1.0), lifespan=0.6, emission_rate=30, material_id=1)
    m.helpers = [orbit]
    m.ribbon_emitters = [ribbon]
    m.pivots = np.array([[0, 0, 0], [0, 0, 20], [0, 0, 30], [0, 0, 40], [50, 0, 40]], "<f4")
    m.extent = Extent(120.0, (-60.0, -60.0, 0.0), (60.0, 60.0, 160.0))
    return m, {"Textures\\Flame.tga": radial(color=(255, 220, 120)),
               "Textures\\Smoke.tga": radial(color=(255, 255, 255)),
               "Textures\\Stone.tga": checker(a=(120, 110, 100, 255), b=(80, 70, 60, 255)),
               "Textures\\Trail.tga": solid((120, 200, 255, 255))}


SAMPLES = {"crate": crate, "filter_modes": filter_modes, "effects": effects}
