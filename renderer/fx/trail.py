"""Ribbon trails as an engine-level module: edges in, a strip of quads out. Knows nothing of MDX.

A trail is the history of one emitter on one model instance. Each call to `advance(stamp_ms, ...)`
moves it to a new time stamp and offers it the emitter's current edge (two world points, a colour
and an alpha). The rules:

* **Stamps.** A trail keeps the stamp it last advanced to. Advancing to the same stamp again (a
  shadow pass, a second draw of the same frame) is dt = 0: nothing ages, nothing is emitted, the
  strip is unchanged. A trail with no stamp yet (new, or just cleared) only records the stamp.
  A gap of more than `STALE_MS` (250 ms) since a live stamp, or a stamp earlier than the last one,
  clears the trail first (its edges are stale) and then counts as a first advance.
* **Lifetime.** An edge lives `lifespan_s` seconds: it is dropped on the first advance where
  stamp - birth >= lifespan.
* **Emission.** `rate` edges per second. The accumulator (kept in edge-milliseconds, so integer
  rates and stamps add exactly) grows by rate x dt, is clamped *before* emitting at
  `ACCUMULATOR_CLAMP` (2) edges plus what the rate owes over min(dt, `BURST_WINDOW_MS`), then one
  edge is emitted per whole unit. So an advance of at most 20 ms (the fx step) is never clamped and
  any authored rate is kept, while a hitch emits at most 2 edges more than a 20 ms advance would. An
  advance with `emit=False` (emitter hidden) neither accumulates nor emits. Edges emitted in one
  advance share its stamp and the offered points. A caller that counts its own emissions (the MDX
  ribbons, whose count comes from the step's times: `renderer.fx.window`) passes `count`: that many
  edges (at most the clamp) are emitted and the accumulator is not used.
* **History.** Colour and alpha are stored per edge when it is emitted: animating them later never
  repaints older parts of the strip.
* **Gravity.** Live edges fall along world -Z: an edge of age a (seconds) is drawn
  gravity x a^2 / 2 below where it was emitted (exact, so it does not depend on how often the
  trail is advanced).
* **Strip.** The live edges, oldest first, joined into quads. U of an edge is age / lifespan (0 at
  the newest edge, towards 1 at the oldest), so adding or expiring an edge never rescales the UVs
  of the others. An emitter that has not moved emits coincident edges: the strip has length 0
  until the node moves (with gravity 0).

Arrays are struct-of-arrays with the live edges in [lo, hi) of a growing buffer; nothing loops
over edges in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STALE_MS = 250.0
ACCUMULATOR_CLAMP = 2.0
BURST_WINDOW_MS = 20.0  # at least renderer.fx.STEP_MS (tests pin it), so stepped advances never clamp


MAX_EDGES = 100_000  # live edges of one trail (as pre2.MAX_LIVE bounds particles); real ribbons have hundreds


def burst_cap(rate: float, dt_ms: float) -> int:
    """The most edges one advance of `dt_ms` may emit at `rate` per second: what the rate owes over
    min(dt, BURST_WINDOW_MS) plus ACCUMULATOR_CLAMP, so a steady rate is never cut and a jump in
    time cannot burst."""
    return int(ACCUMULATOR_CLAMP + max(rate, 0.0) * min(max(dt_ms, 0.0), BURST_WINDOW_MS) / 1000.0)


@dataclass
class Strip:
    """The live edges of a trail at its stamp, oldest first."""

    above: np.ndarray  # (n, 3) world points (gravity applied)
    below: np.ndarray  # (n, 3)
    color: np.ndarray  # (n, 3) captured at emission
    alpha: np.ndarray  # (n,) captured at emission
    age_s: np.ndarray  # (n,)
    u: np.ndarray  # (n,) age / lifespan

    def __len__(self) -> int:
        return len(self.u)

    @property
    def length(self) -> float:
        """Total length of the strip's centre line (0 for fewer than two edges)."""
        if len(self.u) < 2:
            return 0.0
        mid = (self.above + self.below) / 2
        return float(np.linalg.norm(np.diff(mid, axis=0), axis=1).sum())


class Trail:
    """One trail's edges, emission accumulator and stamp (see the module docstring)."""

    def __init__(self, lifespan_s: float, rate: float, gravity: float = 0.0):
        lifespan_s = float(lifespan_s) if np.isfinite(lifespan_s) else 0.0
        rate = float(rate) if np.isfinite(rate) else 0.0
        self.lifespan_s = max(lifespan_s, 0.0)
        self.lifespan_ms = self.lifespan_s * 1000.0
        self.rate = max(rate, 0.0)
        self.gravity = float(gravity) if np.isfinite(gravity) else 0.0
        cap = int(min(self.rate * self.lifespan_s, 1024)) + 4  # grows on demand (_append)
        self._above = np.zeros((cap, 3))
        self._below = np.zeros((cap, 3))
        self._color = np.zeros((cap, 3))
        self._alpha = np.zeros(cap)
        self._birth = np.zeros(cap)
        self.lo = self.hi = 0
        self.accumulator = 0.0  # edge-milliseconds (1000 = one edge)
        self.stamp: float | None = None
        self.advances = 0  # advances with dt > 0 (tests: "each trail advances exactly once")
        self.clears = 0

    # -- state --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.hi - self.lo

    def clear(self) -> None:
        self.lo = self.hi = 0
        self.accumulator = 0.0
        self.stamp = None
        self.clears += 1

    def copy(self) -> Trail:
        other = Trail.__new__(Trail)
        other.__dict__.update(self.__dict__)
        n = len(self)
        cap = max(n + 4, 8)
        for name in ("_above", "_below", "_color"):
            buf = np.zeros((cap, 3))
            buf[:n] = getattr(self, name)[self.lo:self.hi]
            setattr(other, name, buf)
        for name in ("_alpha", "_birth"):
            buf = np.zeros(cap)
            buf[:n] = getattr(self, name)[self.lo:self.hi]
            setattr(other, name, buf)
        other.lo, other.hi = 0, n
        return other

    # -- advancing ----------------------------------------------------------------------------

    def advance(self, stamp_ms: float, above, below, color=(1.0, 1.0, 1.0), alpha: float = 1.0,
                emit: bool = True, count: int | None = None) -> int:
        """Move to `stamp_ms`, offering the emitter's current edge. Returns the edges emitted.
        `count`: emit that many edges (clamped) instead of what the accumulator owes."""
        stamp_ms = float(stamp_ms)
        if self.stamp is not None and stamp_ms == self.stamp:
            return 0  # dt = 0: a redraw of the same time
        if self.stamp is not None and (stamp_ms < self.stamp or stamp_ms - self.stamp > STALE_MS):
            self.clear()
        if self.stamp is None:
            self.stamp = stamp_ms
            self._expire(stamp_ms)
            return 0
        dt_ms = stamp_ms - self.stamp
        self.stamp = stamp_ms
        self.advances += 1
        self._expire(stamp_ms)
        if not emit or self.rate <= 0.0 or self.lifespan_ms <= 0.0:
            return 0
        if count is not None:  # counted by the caller (renderer.fx.window); the same anti-burst cap
            n = int(min(max(count, 0), burst_cap(self.rate, dt_ms)))
        else:
            cap = ACCUMULATOR_CLAMP * 1000.0 + self.rate * min(dt_ms, BURST_WINDOW_MS)
            self.accumulator = min(self.accumulator + self.rate * dt_ms, cap)
            n = int(self.accumulator // 1000.0)
            self.accumulator -= n * 1000.0
        n = min(n, MAX_EDGES)  # a hostile emission rate (3.4e38 per second) must not size an array
        if n <= 0:
            return 0
        if self.hi - self.lo + n > MAX_EDGES:  # the oldest edges give way
            self.lo = self.hi + n - MAX_EDGES
        rows = self._append(n)
        self._above[rows] = np.asarray(above, np.float64)
        self._below[rows] = np.asarray(below, np.float64)
        self._color[rows] = np.asarray(color, np.float64)
        self._alpha[rows] = float(alpha)
        self._birth[rows] = stamp_ms
        return n

    def _expire(self, stamp_ms: float) -> None:
        if self.hi > self.lo:
            ages = stamp_ms - self._birth[self.lo:self.hi]
            # Births are non-decreasing, so the expired edges are a prefix.
            self.lo += int(np.count_nonzero(ages >= self.lifespan_ms))
        if self.lo == self.hi:
            self.lo = self.hi = 0

    def _append(self, n: int) -> slice:
        cap = len(self._birth)
        if self.hi + n > cap:
            live = self.hi - self.lo
            new_cap = max(cap, live + n, 8)
            if live + n > cap // 2:
                new_cap = max(2 * cap, live + n)
            for name in ("_above", "_below", "_color", "_alpha", "_birth"):
                old = getattr(self, name)
                buf = np.zeros((new_cap,) + old.shape[1:])
                buf[:live] = old[self.lo:self.hi]
                setattr(self, name, buf)
            self.lo, self.hi = 0, live
        rows = slice(self.hi, self.hi + n)
        self.hi += n
        return rows

    # -- output -------------------------------------------------------------------------------

    def strip(self) -> Strip:
        """The live edges at the current stamp (gravity applied), oldest first."""
        sl = slice(self.lo, self.hi)
        stamp = self.stamp if self.stamp is not None else 0.0
        age = (stamp - self._birth[sl]) / 1000.0
        drop = 0.5 * self.gravity * age * age
        above, below = self._above[sl].copy(), self._below[sl].copy()
        above[:, 2] -= drop
        below[:, 2] -= drop
        u = age / self.lifespan_s if self.lifespan_s > 0 else np.zeros_like(age)
        return Strip(above, below, self._color[sl].copy(), self._alpha[sl].copy(), age, u)
