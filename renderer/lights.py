"""A model's LITE lights at one pose: what the shader's light loop reads (rule: renderer.rules, "Model lights").

`frame_lights(model, pose)` samples each light's tracks (KLAS, KLAE, KLAC, KLAI, KLBC, KLBI; KLAV is
the pose's node visibility) at the pose's clock and places it with the posed node hierarchy. The
result is a `FrameLights` of fixed-size arrays (MAX_MODEL_LIGHTS rows) ready for uniform upload;
lights past the cap are dropped and named in `dropped`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from renderer.anim.tracks import value
from renderer.model import Model
from renderer.rules import (
    LIGHT_DIRECTION_LOCAL,
    LIGHT_STATIC_COLOR_BGR,
    LIGHT_TRACK_COLOR_BGR,
    MAX_MODEL_LIGHTS,
    light_attenuation,
)

OMNI, DIRECTIONAL, AMBIENT = 0, 1, 2


@dataclass
class FrameLights:
    count: int  # lights that add something this frame (rows 0..count-1)
    kind: np.ndarray  # (MAX,) int32: 0 omni, 1 directional, 2 ambient
    position: np.ndarray  # (MAX, 3) model space (omni, ambient)
    to_light: np.ndarray  # (MAX, 3) unit vector towards a directional light
    diffuse: np.ndarray  # (MAX, 3) RGB: C x I
    ambient: np.ndarray  # (MAX, 3) RGB: A x AI
    attenuation: np.ndarray  # (MAX, 2) start, end
    dropped: list[str] = field(default_factory=list)  # names of the lights past the cap

    def contribution(self, normal, position) -> np.ndarray:
        """The RGB the lights add to the lighting rule's factor at a model-space point (the shader's sum)."""
        n = np.asarray(normal, np.float64)
        x = np.asarray(position, np.float64)
        total = np.zeros(3)
        for i in range(self.count):
            if self.kind[i] == DIRECTIONAL:
                total += self.diffuse[i] * min(max(float(n @ self.to_light[i]), 0.0), 1.0) + self.ambient[i]
                continue
            d = self.position[i] - x
            dist = float(np.linalg.norm(d))
            att = light_attenuation(dist, *self.attenuation[i])
            if self.kind[i] == AMBIENT:
                total += self.ambient[i] * att
            else:
                nl = float(n @ d) / dist if dist > 0 else 0.0
                total += (self.diffuse[i] * min(max(nl, 0.0), 1.0) + self.ambient[i]) * att
        return total


def _color(light, tag: str, static, clock, gs) -> np.ndarray:
    track = light.tracks.get(tag)
    if track is None:
        c = np.asarray(static, np.float64).reshape(3)
        return c[::-1] if LIGHT_STATIC_COLOR_BGR else c
    c = np.asarray(value(light.tracks, tag, static, clock, global_sequences=gs), np.float64).reshape(3)
    return c[::-1] if LIGHT_TRACK_COLOR_BGR else c


def _scalar(light, tag: str, static, clock, gs) -> float:
    return float(value(light.tracks, tag, float(static), clock, global_sequences=gs))


def frame_lights(model: Model, pose) -> FrameLights:
    m = MAX_MODEL_LIGHTS
    out = FrameLights(0, np.zeros(m, np.int32), np.zeros((m, 3)), np.tile([0.0, 0.0, 1.0], (m, 1)),
                      np.zeros((m, 3)), np.zeros((m, 3)), np.zeros((m, 2)))
    out.dropped = [str(light.name) for light in model.lights[m:]]
    gs = model.global_sequences
    clock = pose.clock
    pivots = np.asarray(model.pivots, np.float64).reshape(-1, 3)
    nodes = pose.node_matrices
    for light in model.lights[:m]:
        oid = light.object_id
        if not 0 <= oid < len(nodes):
            continue
        if oid < len(pose.node_visibility) and not pose.node_visible[oid]:
            continue
        kind = int(light.type)
        if kind not in (OMNI, DIRECTIONAL, AMBIENT):
            continue
        world = nodes[oid]
        pivot = pivots[oid] if oid < len(pivots) else np.zeros(3)
        i = out.count
        out.kind[i] = kind
        out.position[i] = (world @ np.append(pivot, 1.0))[:3]
        direction = world[:3, :3] @ np.asarray(LIGHT_DIRECTION_LOCAL, np.float64)
        norm = float(np.linalg.norm(direction))
        out.to_light[i] = -direction / norm if norm > 0 else (0.0, 0.0, 1.0)
        out.diffuse[i] = _color(light, "KLAC", light.color, clock, gs) * _scalar(light, "KLAI", light.intensity,
                                                                                   clock, gs)
        out.ambient[i] = (_color(light, "KLBC", light.ambient_color, clock, gs)
                          * _scalar(light, "KLBI", light.ambient_intensity, clock, gs))
        out.attenuation[i] = (_scalar(light, "KLAS", light.attenuation_start, clock, gs),
                              _scalar(light, "KLAE", light.attenuation_end, clock, gs))
        out.count += 1
    return out


__all__ = ["AMBIENT", "DIRECTIONAL", "OMNI", "FrameLights", "frame_lights"]
