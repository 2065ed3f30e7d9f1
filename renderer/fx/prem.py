"""PREM (ParticleEmitter): particles that are child model instances or textured quads.

Properties (static field or track; §2.5): emission rate KPEE (particles/s), gravity KPEG, longitude
KPLN and latitude KPLT (radians, `rules.PREM_ANGLES`), lifespan KPEL (s, captured per particle at
spawn), initial velocity KPES, visibility KPEV. Node flags: 0x8000 EmitterUsesMDL (each particle is
an instance of the model named by `path`, animated from its own first sequence at the particle's
age), 0x10000 EmitterUsesTGA (each particle is a camera-facing quad textured with `path`). With
neither flag the path's extension decides (.mdl/.mdx: model, else texture).

Each step: particles with age >= their lifespan are dropped; the rest move with exact
constant-gravity integration; while KPEV > 0 and the clock plays, `window.emission_count` particles
spawn (floor(rate t / 1000) - floor(rate (t - dt) / 1000), at most `window.per_step_cap(MAX_LIVE,
life_bound)`), each drawing 2 uniforms (u0, u1) from the step's generator (`renderer.fx.rng`):
    theta = (2 u0 - 1) latitude, phi = (2 u1 - 1) longitude
    direction = Rz(phi) Ry(theta) +Z = (sin theta cos phi, sin theta sin phi, cos theta)
    p = W pivot, v = W3 direction x KPES, g = KPEG x |W3 e_z|
and keeps W3 (the node's world rotation and scale at spawn) as the child instance's orientation.
A particle's lifespan is KPEL at spawn, clamped to `PremSpec.life_bound_ms`: the largest |value| KPEL
can take (`window.track_bound`), itself at most `window.MAX_LIFETIME_MS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from renderer.fx.buffer import EmitterState, ParticleBuffer, integrate_ballistic
from renderer.fx.params import finite
from renderer.fx.rng import step_generator
from renderer.fx.window import MAX_LIFETIME_MS, emission_count, per_step_cap, track_bound
from renderer.model import ParticleEmitter

USES_MDL = 0x8000
USES_TGA = 0x10000
TAGS = ("KPEE", "KPEG", "KPLN", "KPLT", "KPEL", "KPES", "KPEV")
RATE, GRAVITY, LONGITUDE, LATITUDE, LIFESPAN, SPEED, VISIBILITY = range(7)
MAX_LIVE = 10_000
FIELDS = {"pos": ((3,), "f8"), "vel": ((3,), "f8"), "birth": ((), "f8"), "life": ((), "f8"),
          "gravity": ((), "f8"), "basis": ((3, 3), "f8")}


def statics(e: ParticleEmitter) -> dict:
    return {"KPEE": e.emission_rate, "KPEG": e.gravity, "KPLN": e.longitude, "KPLT": e.latitude,
            "KPEL": e.lifespan, "KPES": e.speed, "KPEV": 1.0}


def uses_model(e: ParticleEmitter) -> bool:
    if e.flags & USES_MDL:
        return True
    if e.flags & USES_TGA:
        return False
    return str(e.path).lower().endswith((".mdl", ".mdx"))


@dataclass
class PremSpec:
    index: int
    record: ParticleEmitter
    node: int  # skeleton row of the emitter's node (`Skeleton.ids`)
    pivot: np.ndarray
    row: int
    model: bool  # child model instances (else textured quads)

    @property
    def life_bound_ms(self) -> float:
        """The longest a particle of this emitter lives (see the module docstring)."""
        e = self.record
        return min(track_bound(e.tracks.get("KPEL"), finite(e.lifespan)) * 1000.0, MAX_LIFETIME_MS)


class PremEmitter(EmitterState):
    kind = "PREM"

    def __init__(self, spec: PremSpec, key: int, global_driven: bool):
        self.spec = spec
        self.key = key  # generator key (renderer.fx.rng)
        self.global_driven = global_driven
        self.particles = ParticleBuffer(FIELDS, 16)
        self.life_bound_ms = spec.life_bound_ms
        self.cap = per_step_cap(MAX_LIVE, self.life_bound_ms)
        self.emitted = 0

    def step(self, t_ms: float, prev_ms: float | None, step: int, world: np.ndarray, params: np.ndarray,
             playing: bool) -> None:
        p = self.particles
        dt_ms = 0.0 if prev_ms is None else t_ms - prev_ms
        if len(p):
            p.keep(t_ms - p["birth"] < p["life"])
        integrate_ballistic(p, dt_ms)
        life_ms = min(params[LIFESPAN] * 1000.0, self.life_bound_ms)
        if params[VISIBILITY] <= 0 or not (playing or self.global_driven) or not life_ms > 0 or prev_ms is None:
            return
        n = emission_count(params[RATE], t_ms, prev_ms, self.cap)
        if n <= 0:
            return
        u = step_generator(self.key, step).random((n, 2))
        theta = (2.0 * u[:, 0] - 1.0) * params[LATITUDE]
        phi = (2.0 * u[:, 1] - 1.0) * params[LONGITUDE]
        direction = np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], axis=1)
        w3 = world[:3, :3]
        rows = p.append(n)
        arr = p.arrays
        arr["pos"][rows] = w3 @ self.spec.pivot + world[:3, 3]
        arr["vel"][rows] = (direction * params[SPEED]) @ w3.T
        arr["birth"][rows] = t_ms
        arr["life"][rows] = life_ms
        arr["gravity"][rows] = params[GRAVITY] * float(np.linalg.norm(w3[:, 2]))
        arr["basis"][rows] = w3
        self.emitted += n

    def instance_matrices(self) -> np.ndarray:
        """(n, 4, 4) world matrices of the live child instances: T(p) . W3 at spawn."""
        p = self.particles
        m = np.zeros((len(p), 4, 4))
        m[:, :3, :3] = p["basis"]
        m[:, :3, 3] = p["pos"]
        m[:, 3, 3] = 1.0
        return m

    def ages_ms(self, t_ms: float) -> np.ndarray:
        return t_ms - self.particles["birth"]

    def identities(self) -> np.ndarray:
        """A stable id per live particle: its spawn time (ms) x 4096 plus its rank among the particles
        spawned in the same step. Rows keep their spawn order, and particles of one step share their
        lifespan (KPEL at that step), so they die together and the ranks of the living never shift."""
        birth = np.rint(self.particles["birth"]).astype(np.int64)
        if len(birth) == 0:
            return birth
        _, first, inverse = np.unique(birth, return_index=True, return_inverse=True)
        return birth * 4096 + (np.arange(len(birth)) - first[inverse])
