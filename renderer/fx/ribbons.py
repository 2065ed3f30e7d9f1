"""RIBB adapter: samples the record's tracks, computes the world edge, advances the trail and turns
the strip into vertices. The trail rules live in `renderer.fx.trail` (engine-level, no MDX).

Per step, for each ribbon emitter (one `Trail` per emitter per model instance):
  * edge = the node's world matrix W applied to pivot + (0, KRHA, 0) (above) and
    pivot - (0, KRHB, 0) (below): the node's local Y;
  * colour KRCO (R, G, B) and alpha KRAL (default 0 when the track has no key in the sequence, §2.9)
    are captured by the edges emitted now;
  * the trail advances to the step's stamp and emits only while KRVS > 0 (default 1), alpha > 0
    and the clock plays (a non-looping sequence past its end stops emitting);
  * emissionRate x `rules.RIBBON_EMISSION_RATE_SCALE` edges per second, counted from the step's
    times (`window.emission_count`, at most the trail's `burst_cap`), lifespan seconds
    (clamped to `window.MAX_LIFETIME_MS`), gravity along world -Z.
Hidden emitters (KRVS <= 0, alpha <= 0) still advance their trail (edges age and expire) but emit
nothing. The fixed-step simulation advances every trail exactly once per step, so stamps never jump
by more than `STEP_MS`: the trail's 250 ms stale rule only acts for callers that skip time.
Drawing (at the frame's time): the strip of live edges, oldest first, two vertices per edge
(above, below). UV cell: KRTX (or the static textureSlot) at the frame's time picks cell
slot mod (rows x columns), row-major; U = cell left + (age / lifespan) x cell width,
V = cell top (above) / cell bottom (below). Vertex colour = the edge's colour and alpha. The strip
draws with the first layer of material `materialId`: its texture (KMTF), filter mode (the layer blend
table), texture animation and alpha (KMTA); culling off; unshaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from renderer.fx.params import finite
from renderer.fx.trail import Trail, burst_cap
from renderer.fx.window import clamp_lifetime_ms, emission_count
from renderer.model import RibbonEmitter
from renderer.rules import RIBBON_EMISSION_RATE_SCALE

TAGS = ("KRHA", "KRHB", "KRAL", "KRCO", "KRVS", "KRTX")
VERTEX_FLOATS = 9  # position 3, rgba 4, uv 2


def statics(e: RibbonEmitter) -> dict:
    return {"KRHA": e.height_above, "KRHB": e.height_below, "KRAL": e.alpha, "KRCO": e.color, "KRVS": 1.0,
            "KRTX": e.texture_slot}


@dataclass
class RibbonSpec:
    index: int
    record: RibbonEmitter
    node: int  # skeleton row of the emitter's node (`Skeleton.ids`)
    pivot: np.ndarray
    row: int
    rows: int
    columns: int
    material_id: int


def lifetime_ms(e: RibbonEmitter) -> float:
    """How long an edge of this emitter lives (the clamped lifespan)."""
    return clamp_lifetime_ms(finite(e.lifespan) * 1000.0)


class RibbonState:
    """One ribbon emitter of one model instance: its trail, advanced once per step."""

    kind = "RIBB"

    def __init__(self, spec: RibbonSpec, global_driven: bool = False):
        e = spec.record
        self.spec = spec
        self.global_driven = global_driven
        self.trail = Trail(lifetime_ms(e) / 1000.0,
                           finite(e.emission_rate) * RIBBON_EMISSION_RATE_SCALE, finite(e.gravity))

    def copy(self) -> RibbonState:
        other = RibbonState.__new__(RibbonState)
        other.__dict__.update(self.__dict__)
        other.trail = self.trail.copy()
        return other

    def edge(self, world: np.ndarray, above: float, below: float) -> tuple[np.ndarray, np.ndarray]:
        c = self.spec.pivot
        w3, t = world[:3, :3], world[:3, 3]
        return w3 @ (c + [0.0, above, 0.0]) + t, w3 @ (c - [0.0, below, 0.0]) + t

    def step(self, t_ms: float, world: np.ndarray, params: np.ndarray, cols: dict, playing: bool) -> None:
        above, below = self.edge(world, params[cols["KRHA"]], params[cols["KRHB"]])
        alpha = params[cols["KRAL"]]
        color = params[cols["KRCO"]:cols["KRCO"] + 3]
        emit = params[cols["KRVS"]] > 0 and alpha > 0 and (playing or self.global_driven)
        prev = self.trail.stamp
        count = 0 if prev is None else emission_count(self.trail.rate, t_ms, prev, burst_cap(self.trail.rate,
                                                                                            t_ms - prev))
        self.trail.advance(t_ms, above, below, color, alpha, emit, count)

    def vertices(self, params: np.ndarray, cols: dict) -> np.ndarray:
        """(2n, VERTEX_FLOATS) float32 triangle-strip vertices of the live strip (empty below 2 edges)."""
        strip = self.trail.strip()
        n = len(strip)
        if n < 2:
            return np.zeros((0, VERTEX_FLOATS), np.float32)
        s = self.spec
        cells = s.rows * s.columns
        slot = int(round(params[cols["KRTX"]])) % cells
        u0, v0 = (slot % s.columns) / s.columns, (slot // s.columns) / s.rows
        du, dv = 1.0 / s.columns, 1.0 / s.rows
        out = np.zeros((n, 2, VERTEX_FLOATS), np.float64)
        out[:, 0, 0:3] = strip.above
        out[:, 1, 0:3] = strip.below
        out[:, :, 3:6] = strip.color[:, None, :]
        out[:, :, 6] = strip.alpha[:, None]
        out[:, :, 7] = (u0 + np.clip(strip.u, 0.0, 1.0) * du)[:, None]
        out[:, 0, 8] = v0
        out[:, 1, 8] = v0 + dv
        out = out.reshape(2 * n, VERTEX_FLOATS)
        out[~np.isfinite(out)] = 0.0
        return out.astype(np.float32)
