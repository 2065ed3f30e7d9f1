"""PRE2 (ParticleEmitter2): fixed-step simulation and the per-particle quads it draws.

Units: positions in model units, times in ms for ages and births, seconds for physics. Every update
and every appearance computation is vectorised over the emitter's live particles.

Properties (static field, or its track at the step's clock; §2.6):
  speed KP2S, variation KP2R (fraction), latitude KP2L (degrees), gravity KP2G, emission rate
  KP2E (particles/s x `rules.PRE2_EMISSION_RATE_SCALE`), length KP2N (spawn area along the
  emitter's local X), width KP2W (along local Y; `rules.PRE2_FIELD_NAMES`), visibility KP2V.
  lifespan (s), filter mode, rows/columns, head/tail/both, tail length, time split, segment colours
  (R, G, B), alphas (0..255), scaling, the four atlas intervals, texture id, squirt, priority plane
  and replaceable id are static fields.

Each step (t - dt, t]:
  1. Particles with age >= lifespan are dropped.
  2. The survivors move with exact constant-gravity integration over dt:
     p += v dt - (0, 0, g dt^2 / 2), v.z -= g dt (so trajectories do not depend on the step).
  3. Emission, only while KP2V > 0 and the emitter's clock plays (a non-looping sequence past its
     end stops emitting unless the emitter's rate or visibility runs on a global sequence):
     floor(rate t / 1000) - floor(rate (t - dt) / 1000) emissions (`window.emission_count`, rate
     sampled at the step); squirt emitters (`rules.PRE2_SQUIRT`): floor(S(t)) - floor(S(t - dt))
     with S(t) the sum of the schedule's amounts fired in [0, t] (the first step at t = 0 fires
     what is scheduled at 0; a simulation's first step at a window start emits nothing). At most
     `window.per_step_cap(MAX_LIVE, lifespan)` emissions per step (so never more than MAX_LIVE
     alive). An emission spawns a head particle, a tail particle, or both (headOrTail 0 / 1 / 2),
     each drawing 5 uniforms u0..u4 from the step's generator (`renderer.fx.rng`), in spawn order:
        local position = pivot + ((u0 - 1/2) length, (u1 - 1/2) width, 0)
        a = (2 u2 - 1) latitude, b = (2 u3 - 1) latitude (b = 0 for LineEmitter)
        direction = Rz(90 deg) Ry(a) Rx(b) +Z = (sin b, cos b sin a, cos a cos b)
        speed' = speed (1 + (2 u4 - 1) variation)
     World-space particles (no ModelSpace flag) are placed through the node's world matrix W:
     p = W (local), v = W3 direction speed', gravity g = KP2G x |W3 e_z|, size factor = the node's
     scale cbrt|det W3|. ModelSpace particles keep local coordinates (g = KP2G, factor 1) and are
     drawn through the node's *current* world matrix, so they follow the node. New particles have
     age 0 at t. The lifespan is clamped to `window.MAX_LIFETIME_MS`.
  Each particle carries the emitter's filter mode (`blend`), copied at spawn.

Appearance at age fraction f = age / lifespan, time split s = `time`:
  segment 0 while f < s, factor f / s, between segment values 0 and 1; then segment 1, factor
  (f - s) / (1 - s), between values 1 and 2: colour, alpha / 255 and scaling interpolate linearly.
  Head: a quad of half-size scaling x size factor, facing the camera (camera right/up from the view
  matrix); XYQuad: lying in the world XY plane, turned by atan2(vy, vx) - pi + pi/8 (viewer).
  Tail: a quad from p back to p - tailLength v (world velocity), half-width scaling x size factor,
  turned to face the camera about its own axis (XYQuad: lying flat, widened along v x Z).
  Atlas cell: head particles use the head life interval in segment 0 and the head decay interval
  in segment 1, tails the tail intervals, with the segment factor; see `atlas_cells`
  (`rules.PRE2_ATLAS_END`). The cell (row-major over rows x columns) selects the UV rectangle.
Node flags: Unshaded (no light factor), SortPrimsFarZ (back-to-front by view depth; otherwise
spawn order, oldest first), LineEmitter, Unfogged (no fog in this renderer: no effect), ModelSpace,
XYQuad. Replaceable id 1 / 2 draws with the team colour / glow texture, other non-zero ids with
`texture_set.REPLACEABLE_PATHS`, 0 with the model texture `textureId`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from renderer.fx.buffer import EmitterState, ParticleBuffer, integrate_ballistic
from renderer.fx.params import finite
from renderer.fx.rng import step_generator
from renderer.fx.window import clamp_lifetime_ms, emission_count, per_step_cap
from renderer.model import ParticleEmitter2
from renderer.rules import PRE2_EMISSION_RATE_SCALE, PRE2_FILTER_MODES, PRE2_INVALID_FILTER_MODE

UNSHADED = 0x8000
SORT_PRIMS_FAR_Z = 0x10000
LINE_EMITTER = 0x20000
UNFOGGED = 0x40000
MODEL_SPACE = 0x80000
XY_QUAD = 0x100000

HEAD, TAIL, BOTH = 0, 1, 2
TAGS = ("KP2S", "KP2R", "KP2L", "KP2G", "KP2E", "KP2N", "KP2W", "KP2V")
SPEED, VARIATION, LATITUDE, GRAVITY, RATE, LENGTH, WIDTH, VISIBILITY = range(8)
MAX_LIVE = 100_000
UNIFORMS_PER_PARTICLE = 5

# Instance layout shared with renderer.gl.particles (float32 per instance).
INSTANCE_FLOATS = 16  # position 3, axis 3, rgba 4, uv rect 4, half-size 1, kind 1
KIND_BILLBOARD, KIND_XY, KIND_TAIL, KIND_TAIL_XY = 0.0, 1.0, 2.0, 3.0

FIELDS = {
    "pos": ((3,), "f8"), "vel": ((3,), "f8"), "birth": ((), "f8"), "gravity": ((), "f8"),
    "factor": ((), "f8"), "tail": ((), "?"), "blend": ((), "i1"),
}


def statics(e: ParticleEmitter2) -> dict:
    return {"KP2S": e.speed, "KP2R": e.variation, "KP2L": e.latitude, "KP2G": e.gravity, "KP2E": e.emission_rate,
            "KP2N": e.length, "KP2W": e.width, "KP2V": 1.0}


def _interval(iv) -> np.ndarray:
    try:
        a = np.array([int(x) for x in iv][:3] + [0, 0, 1][len(list(iv)):], np.int64)
    except (TypeError, ValueError):
        a = np.array([0, 0, 1], np.int64)
    return a


@dataclass
class Pre2Spec:
    """Static, sanitised fields of one PRE2 record."""

    index: int
    record: ParticleEmitter2
    node: int  # skeleton row of the emitter's node (`Skeleton.ids`)
    pivot: np.ndarray
    row: int  # row in the PRE2 ParamTable
    lifespan_ms: float
    flags: int
    head: bool
    tail: bool
    tail_length: float
    time: float
    colors: np.ndarray  # (3, 3) RGB
    alphas: np.ndarray  # (3,) 0..1
    scaling: np.ndarray  # (3,)
    intervals: np.ndarray  # (4, 3): head life, head decay, tail life, tail decay
    rows: int
    columns: int
    filter_mode: int
    squirt: bool
    priority_plane: int
    texture_id: int
    replaceable_id: int

    @classmethod
    def build(cls, index: int, e: ParticleEmitter2, node: int, pivot, row: int) -> Pre2Spec:
        hot = int(e.head_or_tail)
        mode = int(e.filter_mode)
        mode = mode if 0 <= mode < len(PRE2_FILTER_MODES) else PRE2_INVALID_FILTER_MODE  # as the reader notes
        colors = np.array([[finite(c) for c in col] for col in e.segment_colors], np.float64).reshape(3, 3)
        return cls(
            index=index, record=e, node=int(node), pivot=np.asarray(pivot, np.float64), row=row,
            lifespan_ms=clamp_lifetime_ms(finite(e.lifespan) * 1000.0), flags=int(e.flags),
            head=hot in (HEAD, BOTH) or hot not in (HEAD, TAIL, BOTH), tail=hot in (TAIL, BOTH),
            tail_length=finite(e.tail_length), time=finite(e.time, 0.5), colors=colors,
            alphas=np.array([finite(a) for a in e.segment_alphas], np.float64).reshape(3) / 255.0,
            scaling=np.array([finite(s) for s in e.segment_scaling], np.float64).reshape(3),
            intervals=np.stack([_interval(i) for i in (*e.head_intervals, *e.tail_intervals)]),
            rows=max(int(e.rows), 1), columns=max(int(e.columns), 1), filter_mode=mode,
            squirt=bool(e.squirt), priority_plane=int(e.priority_plane), texture_id=int(e.texture_id),
            replaceable_id=int(e.replaceable_id))


def squirt_schedule(e: ParticleEmitter2, sequence, global_sequences) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets ms, periods ms (0 = once), amounts) of a squirt emitter playing `sequence`.

    See `rules.PRE2_SQUIRT`: every KP2E key of the playing clock fires at offset + n period.
    """
    track = e.tracks.get("KP2E")
    offsets, periods, amounts = [], [], []
    looping = sequence is not None and not (int(sequence.flags) & 1)
    duration = 0
    if sequence is not None:
        start, end = (int(x) for x in sequence.interval)
        duration = max(end - start, 0)
    if track is not None and len(track.keys):
        frames = np.asarray(track.keys["frame"], np.int64)
        values = np.asarray(track.keys["value"], np.float64).reshape(len(frames), -1)[:, 0]
        gs = int(track.global_sequence_id)
        if 0 <= gs < len(global_sequences):
            d = int(global_sequences[gs])
            if d > 0 and frames[0] <= d:
                inside = (frames >= 0) & (frames <= d)
                offsets, periods, amounts = frames[inside], np.full(int(inside.sum()), d), values[inside]
        elif sequence is not None:
            inside = (frames >= start) & (frames <= end)
            offsets = frames[inside] - start
            periods = np.full(int(inside.sum()), duration if looping else 0)
            amounts = values[inside]
    if len(offsets) == 0:
        offsets, amounts = [0], [finite(e.emission_rate)]
        periods = [duration if looping else 0]
    amounts = np.where(np.isfinite(amounts), amounts, 0.0) * PRE2_EMISSION_RATE_SCALE
    return np.asarray(offsets, np.float64), np.asarray(periods, np.float64), np.asarray(amounts, np.float64)


def fires(offsets, periods, a: float, b: float) -> np.ndarray:
    """How often each schedule entry fires at times T = offset + n period (n >= 0) with a < T <= b;
    a < 0 includes T = 0."""
    offsets, periods = np.asarray(offsets, np.float64), np.asarray(periods, np.float64)
    once = ((offsets > a) & (offsets <= b)).astype(np.int64)
    p = np.where(periods > 0, periods, 1.0)
    hi = np.where(b >= offsets, np.floor((b - offsets) / p), -1)
    lo = np.where(a >= offsets, np.floor((a - offsets) / p) + 1, 0)
    many = np.maximum(hi - lo + 1, 0).astype(np.int64)
    return np.where(periods > 0, many, once)


def atlas_cells(intervals: np.ndarray, factor: np.ndarray, cells: int) -> np.ndarray:
    """Cell index per particle from its interval row (n, 3) = (start, end, repeat) and factor in [0, 1].

    Inclusive end (`rules.PRE2_ATLAS_END`): count = |end - start| + 1 cells, stepping down when
    end < start; index = floor(factor x count x repeat) mod count (repeat 0 counts as 1); the
    result is clamped to 0 .. cells - 1.
    """
    start, end, repeat = intervals[:, 0], intervals[:, 1], intervals[:, 2]
    repeat = np.where(repeat == 0, 1, repeat).astype(np.float64)
    count = np.abs(end - start) + 1
    step = np.floor(np.clip(factor, 0.0, 1.0) * count * repeat).astype(np.int64) % count
    cell = np.where(end >= start, start + step, start - step)
    return np.clip(cell, 0, cells - 1)


class Pre2Emitter(EmitterState):
    """One PRE2 emitter's particles and generator."""

    kind = "PRE2"

    def __init__(self, spec: Pre2Spec, key: int, squirt, global_driven: bool):
        self.spec = spec
        self.key = key  # generator key (renderer.fx.rng)
        self.squirt = squirt  # (offsets, periods, amounts) or None
        self.global_driven = global_driven
        self.particles = ParticleBuffer(FIELDS)
        per = int(spec.head) + int(spec.tail)
        self.cap = per_step_cap(MAX_LIVE, spec.lifespan_ms) // max(per, 1)  # emissions per step
        self.emitted = 0

    def squirted(self, t_ms: float) -> float:
        """S(t): the schedule's amounts fired in [0, t]."""
        return float(np.dot(fires(self.squirt[0], self.squirt[1], -1.0, t_ms), np.maximum(self.squirt[2], 0.0)))

    def step(self, t_ms: float, prev_ms: float | None, step: int, world: np.ndarray, params: np.ndarray,
             playing: bool) -> None:
        """Advance from prev_ms to t_ms (prev_ms None: a simulation's first step), the step ending at
        grid index `step`."""
        s = self.spec
        p = self.particles
        dt_ms = 0.0 if prev_ms is None else t_ms - prev_ms
        if len(p):
            p.keep(t_ms - p["birth"] < s.lifespan_ms)
        integrate_ballistic(p, dt_ms)
        if params[VISIBILITY] <= 0 or not (playing or self.global_driven) or s.lifespan_ms <= 0:
            return
        if self.squirt is not None:
            if prev_ms is None:
                total = self.squirted(t_ms) if t_ms == 0 else 0.0
                n = math.floor(total) if math.isfinite(total) else self.cap
            else:
                hi, lo = self.squirted(t_ms), self.squirted(prev_ms)
                n = math.floor(hi) - math.floor(lo) if math.isfinite(hi) and math.isfinite(lo) else self.cap
            n = min(max(int(n), 0), self.cap)
        elif prev_ms is None:
            n = 0
        else:
            n = emission_count(params[RATE] * PRE2_EMISSION_RATE_SCALE, t_ms, prev_ms, self.cap)
        per = int(s.head) + int(s.tail)
        if n <= 0 or per == 0:
            return
        self._spawn(n, per, step, t_ms, world, params)

    def _spawn(self, n: int, per: int, step: int, t_ms: float, world: np.ndarray, params: np.ndarray) -> None:
        s = self.spec
        m = n * per
        u = step_generator(self.key, step).random((m, UNIFORMS_PER_PARTICLE))
        local = np.empty((m, 3))
        local[:, 0] = s.pivot[0] + (u[:, 0] - 0.5) * params[LENGTH]
        local[:, 1] = s.pivot[1] + (u[:, 1] - 0.5) * params[WIDTH]
        local[:, 2] = s.pivot[2]
        lat = math.radians(params[LATITUDE])
        a = (2.0 * u[:, 2] - 1.0) * lat
        b = np.zeros(m) if s.flags & LINE_EMITTER else (2.0 * u[:, 3] - 1.0) * lat
        direction = np.stack([np.sin(b), np.cos(b) * np.sin(a), np.cos(a) * np.cos(b)], axis=1)
        speed = params[SPEED] * (1.0 + (2.0 * u[:, 4] - 1.0) * params[VARIATION])
        vel = direction * speed[:, None]
        g = params[GRAVITY]
        factor = 1.0
        if not s.flags & MODEL_SPACE:
            w3 = world[:3, :3]
            local = local @ w3.T + world[:3, 3]
            vel = vel @ w3.T
            g = g * float(np.linalg.norm(w3[:, 2]))
            factor = float(np.cbrt(abs(np.linalg.det(w3))))
        rows = self.particles.append(m)
        arr = self.particles.arrays
        arr["pos"][rows] = local
        arr["vel"][rows] = vel
        arr["birth"][rows] = t_ms
        arr["gravity"][rows] = g
        arr["factor"][rows] = factor
        arr["tail"][rows] = np.tile([False, True], n) if per == 2 else s.tail and not s.head
        arr["blend"][rows] = s.filter_mode  # the emitter's filter mode, copied to every particle
        self.emitted += m

    # -- appearance ---------------------------------------------------------------------------

    def instances(self, t_ms: float, world: np.ndarray, view: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(instances (n, INSTANCE_FLOATS) float32, blend (n,) int8) of the live particles at t_ms."""
        s = self.spec
        p = self.particles
        n = len(p)
        if n == 0:
            return np.zeros((0, INSTANCE_FLOATS), np.float32), np.zeros(0, np.int8)
        pos, vel, tail = p["pos"], p["vel"], p["tail"]
        factor = p["factor"].copy()
        if s.flags & MODEL_SPACE:
            w3 = world[:3, :3]
            pos = pos @ w3.T + world[:3, 3]
            vel = vel @ w3.T
            factor[:] = float(np.cbrt(abs(np.linalg.det(w3))))
        f = (t_ms - p["birth"]) / s.lifespan_ms
        split = s.time
        first = f < split
        k0 = np.clip(f / split, 0.0, 1.0) if split > 0 else np.zeros_like(f)
        k1 = np.clip((f - split) / (1.0 - split), 0.0, 1.0) if split < 1 else np.zeros_like(f)
        seg = np.where(first, 0, 1)
        k = np.where(first, k0, k1)
        lo_c, hi_c = s.colors[seg], s.colors[seg + 1]
        color = lo_c + (hi_c - lo_c) * k[:, None]
        alpha = s.alphas[seg] + (s.alphas[seg + 1] - s.alphas[seg]) * k
        scale = s.scaling[seg] + (s.scaling[seg + 1] - s.scaling[seg]) * k
        # Atlas: head life/decay = intervals 0/1, tail life/decay = 2/3.
        which = np.where(tail, 2, 0) + seg
        cell = atlas_cells(s.intervals[which], k, s.rows * s.columns)
        out = np.zeros((n, INSTANCE_FLOATS), np.float64)
        out[:, 0:3] = pos
        out[:, 6:9] = color
        out[:, 9] = alpha
        out[:, 10] = (cell % s.columns) / s.columns
        out[:, 11] = (cell // s.columns) / s.rows
        out[:, 12] = 1.0 / s.columns
        out[:, 13] = 1.0 / s.rows
        out[:, 14] = scale * factor
        xy = bool(s.flags & XY_QUAD)
        head = ~tail
        if xy:
            angle = np.arctan2(vel[:, 1], vel[:, 0]) - math.pi + math.pi / 8
            out[head, 3] = np.cos(angle[head])
            out[head, 4] = np.sin(angle[head])
        out[tail, 3:6] = -s.tail_length * vel[tail]
        out[:, 15] = np.where(tail, KIND_TAIL_XY if xy else KIND_TAIL, KIND_XY if xy else KIND_BILLBOARD)
        blend = p["blend"].copy()
        if s.flags & SORT_PRIMS_FAR_Z:
            depth = pos @ view[2, :3] + view[2, 3]  # view-space z: more negative is farther
            order = np.argsort(depth, kind="stable")
            out, blend = out[order], blend[order]
        out[~np.isfinite(out)] = 0.0
        return out.astype(np.float32), blend
