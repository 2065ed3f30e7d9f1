"""A model that exercises every MDX chunk and record kind, built with our own model classes."""

from __future__ import annotations

import numpy as np

from renderer.model import (
    Attachment,
    CollisionShape,
    EventObject,
    FaceEffect,
    Helper,
    Layer,
    Light,
    Model,
    ModelCamera,
    ParticleEmitter,
    PopcornEmitter,
    SoundTrack,
    TextureAnimation,
    TextureSlot,
)
from renderer.samples.build import crate, effects, track


def everything(version: int) -> Model:
    m, _ = crate()
    fx, _ = effects()
    m.version = version
    m.global_sequences = [1000, 333]
    base = len(m.textures)
    m.textures += fx.textures
    m.sounds = [SoundTrack(path="Sound\\Boom.wav", volume=0.5, pitch=1.0, flags=1)]
    m.texture_animations = [TextureAnimation(tracks={
        "KTAT": track("KTAT", [0, 1000], [[0, 0, 0], [1, 0, 0]], global_sequence_id=0),
        "KTAR": track("KTAR", [0, 500], [[0, 0, 0, 1], [0, 0, 1, 0]], interpolation=2)})]
    m.materials[0].layers[0].texture_animation_id = 0
    m.materials[0].layers[1].tracks["KMTA"] = track("KMTA", [0, 1000], [1.0, 0.5], interpolation=3)
    m.materials[0].layers[1].tracks["KMTF"] = track("KMTF", [0, 500], [0, 2], interpolation=0)
    if version >= 900:
        m.materials[0].layers[0].emissive_gain = 0.75
        m.materials[0].layers[0].tracks["KMTE"] = track("KMTE", [0, 10], [1.0, 2.0])
    if version >= 1000:
        lay = m.materials[1].layers[0]
        lay.fresnel_color, lay.fresnel_opacity, lay.fresnel_team_color = (0.5, 0.25, 1.0), 0.3, 0.7
        lay.tracks["KFC3"] = track("KFC3", [0, 10], [[1, 0, 0], [0, 1, 0]])
    if 900 <= version <= 1000:
        m.materials[0].shader = "Shader_HD_DefaultUnit"
    if version >= 1100:
        for mat in m.materials:
            for lay in mat.layers:
                lay.shader_type_id = 1
                lay.textures = [TextureSlot(lay.texture_id, 0),
                                TextureSlot(0, 1, track("KMTF", [0, 100], [0, 1], interpolation=0))]
    m.materials.append(fx.materials[1])
    m.materials[-1].layers = [Layer(filter_mode=3, texture_id=base + 3)]
    if version >= 900:
        g = m.geosets[0]
        g.lod, g.lod_name = 1, "LOD1"
        n = len(g.vertices)
        g.tangents = np.tile(np.array([1, 0, 0, 1], "<f4"), (n, 1))
        g.skin = np.tile(np.array([0, 0, 0, 0, 255, 0, 0, 0], "u1"), (n, 1))
        m.bind_pose = np.tile(np.eye(4, 3, dtype="<f4").T.reshape(1, 12), (6, 1)).astype("<f4")
        m.face_effects = [FaceEffect(target="Head", path="FaceFX\\Smile.facefx")]
    nodes = [m.bones[0]]
    lights = [Light(name="Lamp", object_id=1, flags=0x200, type=1, attenuation_start=10, attenuation_end=200,
                    color=(1.0, 0.8, 0.6), intensity=2.0, shadow_intensity=0.5 if version >= 1200 else 0.0,
                    tracks={"KLAV": track("KLAV", [0, 500], [1.0, 0.0], interpolation=0)})]
    atch = [Attachment(name="Origin Ref", object_id=2, flags=0x800, attachment_id=0,
                       tracks={"KATV": track("KATV", [0], [1.0], interpolation=0)})]
    prem = [ParticleEmitter(name="Spawner", object_id=3, flags=0x1000 | 0x8000, emission_rate=2, gravity=1,
                            longitude=0.5, latitude=0.25, path="Abilities\\Spark.mdl", lifespan=1.0, speed=3.0,
                            tracks={"KPEE": track("KPEE", [0, 100], [1.0, 2.0])})]
    pre2 = fx.particle_emitters2
    for i, e in enumerate(pre2):
        e.object_id = 4 + i
        e.parent_id = 0
        e.texture_id = base + i
    ribb = fx.ribbon_emitters
    ribb[0].object_id, ribb[0].parent_id, ribb[0].material_id = 6, 0, len(m.materials) - 1
    ribb[0].tracks["KRTX"] = track("KRTX", [0, 100], [0, 1], interpolation=0)
    events = [EventObject(name="SNDxBOOM", object_id=7, flags=0x400, global_sequence_id=-1,
                          frames=np.array([100, 1500], "<i4"))]
    shapes = [CollisionShape(name="Box", object_id=8, flags=0x2000, type=0, vertices=((0, 0, 0), (1, 2, 3))),
              CollisionShape(name="Ball", object_id=9, flags=0x2000, type=2, vertices=((0, 0, 5),), radius=7.5)]
    m.bones, m.lights, m.attachments = nodes, lights, atch
    m.particle_emitters, m.particle_emitters2, m.ribbon_emitters = prem, pre2, ribb
    m.event_objects, m.collision_shapes = events, shapes
    count = 10
    if version >= 900:
        m.popcorn_emitters = [PopcornEmitter(name="Popcorn", object_id=10, path="fx\\x.pkfx",
                                             tracks={"KPPA": track("KPPA", [0], [1.0])})]
        count = 11
    m.helpers = [Helper(name="Mount", object_id=count, parent_id=0)]
    count += 1
    m.pivots = np.arange(count * 3, dtype="<f4").reshape(count, 3)
    m.cameras = [ModelCamera(name="Portrait", position=(100, 0, 50), field_of_view=0.8, far_clip=1000, near_clip=8,
                        target=(0, 0, 40), tracks={"KCRL": track("KCRL", [0], [0.1])})]
    return m
