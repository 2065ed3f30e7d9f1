"""The time window rule: the effects state at t depends only on the steps in a bounded window before t.

* **Grid.** Simulations step on a fixed grid of `STEP_MS` (20 ms); step k ends at k x STEP_MS.
* **Lifetimes are bounded.** Every particle and ribbon edge lives at most `MAX_LIFETIME_MS` (60 s):
  longer PRE2 lifespans, PREM lifespans (KPEL, captured per particle at spawn; bounded by
  `track_bound`, the largest |value| or |tangent| of the track and the static value) and ribbon
  lifespans are clamped to it. The window W of a model instance is the longest lifetime any of its
  emitters can reach.
* **Window start.** The state at t is the state of a simulation started, empty, at
  `window_start(t, W)` = max(0, floor((t - W) / STEP_MS)) x STEP_MS and stepped on the grid to t. A
  particle or edge born before that start is dead at t (age >= W >= its lifetime), and nothing that
  happens in a step depends on earlier steps:
    - emission counts come from the step's own times (`emission_count`: floor(r t / 1000) -
      floor(r prev / 1000) with r the rate sampled at the step, so a constant rate emits exactly
      floor(r t / 1000) particles by t; squirts count whole firings of the closed-form schedule);
    - random draws come from a generator keyed by the step index (`renderer.fx.rng`);
    - the per-emitter live caps are per step (`per_step_cap`: MAX_LIVE / the steps a particle can
      live), never "what is alive now".
  So a simulation started at any earlier grid point gives the same bytes at t, a stored simulation
  can carry a batch along (in any order: one that is behind the window start of t, or ahead of t,
  is replaced by a fresh one at the window start), and the cost of a frame at any t is at most
  W / STEP_MS + 2 steps (3002 for the longest lifetime), whatever t is (up to
  `renderer.anim.tracks.MAX_TIME_MS`).
"""

from __future__ import annotations

import math

import numpy as np

STEP_MS = 20  # 50 steps per simulated second; integer ms so step times are exact
MAX_LIFETIME_MS = 60_000.0  # the longest a particle or ribbon edge lives


def clamp_lifetime_ms(ms: float) -> float:
    """A lifetime in ms, finite and within 0 .. MAX_LIFETIME_MS."""
    return float(min(max(ms, 0.0), MAX_LIFETIME_MS)) if math.isfinite(ms) else 0.0


def track_bound(track, static: float) -> float:
    """The largest |value| a 1-component track (or its static value) can take, its tangents included."""
    bound = abs(static) if math.isfinite(static) else 0.0
    if track is not None and len(track.keys):
        for name in ("value", "in_tan", "out_tan"):
            if name in track.keys.dtype.names:
                v = np.abs(np.asarray(track.keys[name], np.float64).reshape(-1))
                v = v[np.isfinite(v)]
                if len(v):
                    bound = max(bound, float(v.max()))
    return bound


def window_start(t_ms: float, window_ms: float) -> float:
    """The grid time a simulation for t starts at (see the module docstring)."""
    return float(max(0, math.floor((t_ms - window_ms) / STEP_MS)) * STEP_MS)


def grid_index(t_ms: float) -> int:
    """Index of the step ending at or just after t (a partial step to t shares the next grid index)."""
    return int(math.ceil(t_ms / STEP_MS))


def emission_count(rate: float, t_ms: float, prev_ms: float, cap: int) -> int:
    """Emissions in the step (prev_ms, t_ms] at `rate` per second, at most `cap`."""
    if not rate > 0:  # also NaN
        return 0
    hi, lo = rate * t_ms / 1000.0, rate * prev_ms / 1000.0
    if not math.isfinite(hi):
        return cap
    return int(min(max(math.floor(hi) - math.floor(lo), 0), cap))


def per_step_cap(max_live: int, lifetime_ms: float) -> int:
    """Emissions one step may make so that at most `max_live` are alive at once."""
    steps = math.ceil(lifetime_ms / STEP_MS) + 1
    return max(max_live // steps, 1)
