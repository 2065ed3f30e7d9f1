"""Struct-of-arrays particle storage: named numpy fields, live rows in [lo, hi), oldest first."""

from __future__ import annotations

import numpy as np


def integrate_ballistic(p: ParticleBuffer, dt_ms: float) -> None:
    """Move live particles (fields pos, vel, gravity) over dt_ms under gravity along -Z, exactly."""
    if len(p) and dt_ms > 0:
        dt = dt_ms / 1000.0
        pos, vel, g = p["pos"], p["vel"], p["gravity"]
        pos += vel * dt
        pos[:, 2] -= 0.5 * g * dt * dt
        vel[:, 2] -= g * dt


class EmitterState:
    """What every simulated emitter shares: its generator key (`renderer.fx.rng`) and `particles`,
    copied deeply by `copy()` so a copy can be stepped (to a time between fixed steps) without
    touching the stored state."""

    key: int
    particles: ParticleBuffer

    def copy(self):
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.particles = self.particles.copy()
        return other


class ParticleBuffer:
    """Growing field arrays; particles are appended at the end and dropped by mask.

    Rows stay in spawn order, so "oldest first" is always the storage order (draw order and the
    order random numbers were drawn in).
    """

    def __init__(self, fields: dict[str, tuple[tuple, str]], capacity: int = 64):
        self.fields = dict(fields)
        self.lo = self.hi = 0
        self.arrays = {name: np.zeros((capacity,) + tuple(shape), dtype) for name, (shape, dtype) in fields.items()}

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, name: str) -> np.ndarray:
        """The live rows of one field (a view: writes go to the buffer)."""
        return self.arrays[name][self.lo:self.hi]

    def keep(self, alive: np.ndarray) -> None:
        """Drop the live rows where `alive` is False (vectorised; a dead prefix just moves lo)."""
        alive = np.asarray(alive, bool)
        if alive.all():
            return
        first = int(np.argmax(alive)) if alive.any() else len(alive)
        if alive[first:].all():
            self.lo += first
        else:
            n = int(alive.sum())
            for arr in self.arrays.values():
                arr[self.lo:self.lo + n] = arr[self.lo:self.hi][alive]
            self.hi = self.lo + n
        if self.lo == self.hi:
            self.lo = self.hi = 0

    def append(self, n: int) -> slice:
        """Room for n new rows at the end; returns their slice into the field arrays."""
        cap = len(next(iter(self.arrays.values())))
        if self.hi + n > cap:
            live = self.hi - self.lo
            new_cap = cap if live + n <= cap // 2 else max(2 * cap, live + n)
            for name, arr in self.arrays.items():
                buf = np.zeros((new_cap,) + arr.shape[1:], arr.dtype)
                buf[:live] = arr[self.lo:self.hi]
                self.arrays[name] = buf
            self.lo, self.hi = 0, live
        rows = slice(self.hi, self.hi + n)
        self.hi += n
        return rows

    def copy(self) -> ParticleBuffer:
        other = ParticleBuffer.__new__(ParticleBuffer)
        other.fields = self.fields
        n = len(self)
        cap = max(n + 16, 64)
        other.arrays = {}
        for name, arr in self.arrays.items():
            buf = np.zeros((cap,) + arr.shape[1:], arr.dtype)
            buf[:n] = arr[self.lo:self.hi]
            other.arrays[name] = buf
        other.lo, other.hi = 0, n
        return other
