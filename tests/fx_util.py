"""Helpers for the particle/ribbon tests: tiny effect models written with our own MDX writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.model import (
    Bone,
    Extent,
    Helper,
    Layer,
    Material,
    Model,
    ParticleEmitter,
    ParticleEmitter2,
    RibbonEmitter,
    Sequence,
    Texture,
)
from renderer.samples.build import track

__all__ = ["fx_model", "pre2", "ribbon", "prem", "orbit", "track", "static_pre2", "white"]


def white(size=4, rgba=(255, 255, 255, 255)) -> np.ndarray:
    img = np.empty((size, size, 4), np.uint8)
    img[...] = rgba
    return img


def pre2(object_id: int, **kw) -> ParticleEmitter2:
    e = ParticleEmitter2(name=f"pre2-{object_id}", object_id=object_id, parent_id=0, flags=0x1000 | 0x8000,
                         lifespan=1.0, emission_rate=10.0, rows=1, columns=1, time=0.5)
    for k, v in kw.items():
        setattr(e, k, v)
    return e


def static_pre2(object_id: int, color, alpha: int, filter_mode: int, half: float = 1000.0, texture_id: int = 0,
                **kw) -> ParticleEmitter2:
    """One huge, still particle every second that lives 100 s: at t = 1500 ms exactly one is alive."""
    return pre2(object_id, speed=0.0, variation=0.0, latitude=0.0, gravity=0.0, lifespan=100.0, emission_rate=1.0,
                length=0.0, width=0.0, filter_mode=filter_mode, segment_colors=(tuple(color),) * 3,
                segment_alphas=(alpha,) * 3, segment_scaling=(half,) * 3, texture_id=texture_id, **kw)


def ribbon(object_id: int, parent: int, **kw) -> RibbonEmitter:
    e = RibbonEmitter(name=f"ribbon-{object_id}", object_id=object_id, parent_id=parent, flags=0x4000,
                      height_above=5.0, height_below=5.0, alpha=1.0, color=(1.0, 1.0, 1.0), lifespan=0.5,
                      emission_rate=50, material_id=0)
    for k, v in kw.items():
        setattr(e, k, v)
    return e


def prem(object_id: int, **kw) -> ParticleEmitter:
    e = ParticleEmitter(name=f"prem-{object_id}", object_id=object_id, parent_id=0, flags=0x1000 | 0x8000,
                        emission_rate=2.0, lifespan=10.0, speed=0.0)
    for k, v in kw.items():
        setattr(e, k, v)
    return e


def orbit(object_id: int, period_ms: int = 1000) -> Helper:
    """A helper turning about +Z once per period (linear quarter-turn keys): its children circle."""
    h = Helper(name="Orbit", object_id=object_id, parent_id=0)
    angles = np.radians([0, 90, 180, 270, 360])
    frames = [round(period_ms * a / (2 * np.pi)) for a in angles]
    h.node_tracks["KGRT"] = track("KGRT", frames, [[0, 0, np.sin(a / 2), np.cos(a / 2)] for a in angles])
    return h


def fx_model(tmp: Path, name: str, *, pre2s=(), ribbons=(), prems=(), helpers=(), pivots=None,
             textures: dict | None = None, materials=None, geosets=(), sequences=None,
             global_sequences=(), extent=None) -> Path:
    """Write a model (bone 0 at the origin, plus the given nodes) and its TGA textures; returns the path."""
    m = Model(version=800, name=name)
    m.sequences = sequences if sequences is not None else [Sequence(name="Stand", interval=(0, 10000))]
    m.global_sequences = list(global_sequences)
    textures = {"white.tga": white()} if textures is None else textures
    for rel, rgba in textures.items():
        m.textures.append(Texture(path=rel))
        Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(tmp / rel)
    m.materials = materials if materials is not None else [Material(layers=[Layer(filter_mode=2, texture_id=0,
                                                                                  shading_flags=0x11)])]
    m.geosets = list(geosets)
    m.bones = [Bone(name="Root", object_id=0, flags=0x100)]
    m.helpers = list(helpers)
    m.particle_emitters = list(prems)
    m.particle_emitters2 = list(pre2s)
    m.ribbon_emitters = list(ribbons)
    n = max(node.object_id for node in m.nodes()) + 1
    m.pivots = np.zeros((n, 3), "<f4")
    for oid, p in (pivots or {}).items():
        m.pivots[oid] = p
    m.extent = extent or Extent(100.0, (-50.0, -50.0, -50.0), (50.0, 50.0, 50.0))
    path = tmp / f"{name}.mdx"
    save_mdx(m, path)
    return path


def load(path: Path) -> Model:
    return load_model(path)
